package pool

import (
	"testing"
	"time"
)

// The cap must bound the rest itself, not only the Retry-After that
// NextRelease reports: a 60 s throttle fallback (and a 300 s auth
// fallback) under MODEL_COOLDOWN_MAX_SECONDS=30 releases the credential
// after 30 s.
func TestFallbackRestEndsAtTheCap(t *testing.T) {
	for _, tc := range []struct {
		name string
		obs  Observation
		sel  Scope
	}{
		{"scoped throttle", throttle(modelA), modelA},
		{"unscoped throttle", throttle(unscoped), unscoped},
		{"scoped auth", status(modelA, 401), modelB},
		{"unscoped auth", status(unscoped, 401), unscoped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, func(c *Config) { c.Credentials = testCreds[:1] }, withMaxSeconds(30))
			f.record("a", tc.obs)
			f.clk.Advance(30 * time.Second)
			f.wantSelect(tc.sel, "a")
		})
	}
}

// Success clears only its model's observation, never a credential-wide
// auth rejection: after a scoped 401, a success for model A that was in
// flight, and an unscoped success (which legitimately clears the legacy
// rest), the auth observation still excludes the credential from every
// model until it expires.
func TestScopedSuccessKeepsTheAuthObservation(t *testing.T) {
	f := newFixture(t)
	f.record("a", status(modelA, 401)) // auth observation + legacy rest, 300 s
	f.record("a", success(modelA))     // an in-flight call succeeds
	f.record("a", success(unscoped))   // legacy success: clears the legacy rest only
	f.wantAvailable(modelA, "b", "c")
	f.wantAvailable(modelB, "b", "c")
}

// The model cooldown cap bounds an applied (learned) trial: the rest
// itself ends at the cap, not only the Retry-After reported for it.
func TestLearnedRestEndsAtTheCap(t *testing.T) {
	for _, path := range []struct {
		name string
		mod  func(*Config)
		sel  Scope
	}{{"scoped", func(*Config) {}, modelA}, {"legacy", disabled, modelB}} {
		t.Run(path.name, func(t *testing.T) {
			l := &fakeLearner{suggest: func(LearnEvent) (time.Duration, bool) { return 5000 * time.Second, true }}
			f := newFixture(t, func(c *Config) { c.Credentials = testCreds[:1] }, withLearner(l), path.mod, withMaxSeconds(100))
			f.record("a", throttle(modelA))
			f.clk.Advance(100 * time.Second)
			f.wantSelect(path.sel, "a")
		})
	}
}

// Learned identities are unambiguous: moving a byte from the model to the
// bucket gives another identity (each field is length-prefixed).
func TestLearnIdentityKeepsFieldBoundaries(t *testing.T) {
	k := testCreds[0].Key
	if learnIdentity(k, "api", "ab", "c") == learnIdentity(k, "api", "a", "bc") {
		t.Error("model ab/bucket c and model a/bucket bc share an identity")
	}
}

// The store holds the spec's 10,000 live observations, a literal the
// capacity tests take through DefaultStoreLimit.
func TestDefaultStoreLimitIsTheSpecs(t *testing.T) {
	if DefaultStoreLimit != 10000 {
		t.Errorf("DefaultStoreLimit = %d, want the spec's 10000", DefaultStoreLimit)
	}
}

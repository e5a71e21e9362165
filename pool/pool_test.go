package pool

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/secret"
)

// Flag and path: which rules apply where.

func TestModelCooldownDisabledByDefault(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Settings = Settings{} })
	if f.pool.ModelCooldownEnabled() {
		t.Fatal("zero Settings enabled model cooldown")
	}
	f.record("a", throttle(modelA))
	// Legacy: the throttle rests a provider-wide, for every model.
	for _, s := range []Scope{modelA, modelB, mini, unscoped} {
		f.wantAvailable(s, "b", "c")
	}
	if n := f.store.Len(); n != 0 {
		t.Errorf("store.Len() = %d after a disabled-path throttle, want 0", n)
	}
}

func TestDisabledKeepsLegacyBehaviour(t *testing.T) {
	f := newFixture(t, disabled)
	f.record("a", throttle(modelA))    // 60 s provider-wide
	f.record("b", status(modelA, 401)) // AuthRest, provider-wide
	f.record("c", status(modelA, 403)) // not genuine auth evidence
	f.wantAvailable(modelB, "c")
	f.wantSelect(modelB, "c")
	f.record("c", throttleFor(unscoped, 30))
	f.wantExhausted(modelB, false, 30*time.Second) // legacy 429: rate_limit_exceeded
	f.clk.Advance(60 * time.Second)
	f.wantAvailable(modelA, "a", "c")
	f.clk.Advance(240 * time.Second)
	f.wantAvailable(modelA, "a", "b", "c")
}

func TestDisabledKeepsLegacyFirstKeyFallback(t *testing.T) {
	f := newFixture(t, disabled, firstKeyFallback)
	for _, n := range []string{"a", "b", "c"} {
		f.record(n, throttle(modelA))
	}
	f.wantAvailable(modelA)
	// The pool offers the first candidate; the caller sends to it at most
	// once per request (decisions: TestFirstKeyFallbackRetryStormEndsIn429).
	for _, tc := range []struct {
		cands []string
		want  string
	}{{nil, "a"}, {[]string{"c", "b"}, "b"}} {
		t.Run(fmt.Sprintf("candidates=%q", tc.cands), func(t *testing.T) {
			_, err := f.pool.Select(modelA, tc.cands)
			ce, ok := errors.AsType[*CooldownExhaustedError](err)
			if !ok || ce.Fallback != tc.want || ce.Scoped || ce.RetryAfter != ThrottleRest {
				t.Errorf("Select(candidates %q) = %v; want a legacy 429 offering the first configured candidate %s", tc.cands, err, tc.want)
			}
		})
	}

	// Without the option the legacy path answers its 429.
	g := newFixture(t, disabled)
	g.record("a", throttleFor(unscoped, 33))
	g.record("b", throttleFor(unscoped, 11))
	g.record("c", throttleFor(unscoped, 22))
	g.wantExhausted(unscoped, false, 11*time.Second)
}

func TestFirstKeyFallbackNeverOnScopedPath(t *testing.T) {
	f := newFixture(t, firstKeyFallback)
	for _, n := range []string{"a", "b", "c"} {
		f.record(n, throttleFor(modelA, 20))
	}
	// No secret dispatch: the scoped path answers model_cooldown.
	f.wantExhausted(modelA, true, 20*time.Second)
}

func TestUnscopedPathKeepsLegacyBookkeeping(t *testing.T) {
	f := newFixture(t, firstKeyFallback)
	f.record("a", throttle(unscoped))
	f.record("b", status(unscoped, 401))
	f.record("c", status(unscoped, 403))
	if n := f.store.Len(); n != 0 {
		t.Errorf("store.Len() = %d after unscoped recording, want 0 (model state unchanged)", n)
	}
	snap := f.pool.Snapshot()
	if got, want := snap.Credentials[0].RestingUntil, t0.Add(60*time.Second); !got.Equal(want) {
		t.Errorf("a RestingUntil = %v, want %v (legacy 60 s throttle rest)", got, want)
	}
	if got, want := snap.Credentials[1].RestingUntil, t0.Add(DefaultAuthRest); !got.Equal(want) {
		t.Errorf("b RestingUntil = %v, want %v (legacy auth rest)", got, want)
	}
	f.wantAvailable(unscoped, "c")
	f.wantSelect(unscoped, "c")

	// The unscoped path keeps the disabled path's selection and exceptions,
	// the first-key fallback included.
	f.record("c", throttle(unscoped))
	if _, err := f.pool.Select(unscoped, nil); !errors.As(err, new(*CooldownExhaustedError)) || err.(*CooldownExhaustedError).Fallback != "a" {
		t.Errorf("Select(unscoped) = %v, want a legacy 429 offering a", err)
	}
	g := newFixture(t)
	for _, n := range []string{"a", "b", "c"} {
		g.record(n, throttleFor(unscoped, 5))
	}
	g.wantExhausted(unscoped, false, 5*time.Second)
}

func TestScopingAppliesOnlyWithModelOrBucket(t *testing.T) {
	f := newFixture(t)
	f.record("a", throttle(modelA))
	f.wantAvailable(modelA, "b", "c")
	f.wantAvailable(unscoped, "a", "b", "c")
	f.wantAvailable(Scope{QuotaBucket: "shared"}, "a", "b", "c")
	f.record("b", throttle(Scope{QuotaBucket: "shared"})) // a bucket alone scopes too
	f.wantAvailable(mini, "a", "c")
	f.wantAvailable(unscoped, "a", "b", "c")
}

// Scope: models and quota buckets.

func TestThrottleCoolsOnlyThatCredentialAndModel(t *testing.T) {
	f := newFixture(t)
	f.record("a", throttle(modelA))
	f.wantAvailable(modelA, "b", "c")
	f.wantAvailable(modelB, "a", "b", "c")
	f.wantAvailable(mini, "a", "b", "c")
	f.wantAvailable(unscoped, "a", "b", "c")
	f.wantSelect(modelA, "b")
	f.wantSelect(modelB, "a")
}

func TestQuotaBucketSharedByMemberModels(t *testing.T) {
	f := newFixture(t)
	f.record("a", throttle(mini))
	f.wantAvailable(mini, "b", "c")
	f.wantAvailable(large, "b", "c")
	f.wantAvailable(Scope{Model: "decide-large"}, "b", "c") // the configured bucket applies
	f.wantAvailable(modelA, "a", "b", "c")
	f.record("a", success(large)) // success in the bucket clears the bucket
	f.wantAvailable(mini, "a", "b", "c")
	if got := f.pool.BucketFor("decide-mini"); got != "shared" {
		t.Errorf("BucketFor(decide-mini) = %q, want shared", got)
	}
	if got := f.pool.BucketFor("model-alpha"); got != "" {
		t.Errorf("BucketFor(model-alpha) = %q, want none", got)
	}
}

func TestQuotaBucketNeverInferred(t *testing.T) {
	f := newFixture(t)
	// A bucket the configuration does not name is an arbitrary caller
	// field: it scopes nothing, and the model scope applies.
	f.record("a", throttle(Scope{Model: "model-alpha", QuotaBucket: "made-up"}))
	f.wantAvailable(modelA, "b", "c")
	f.wantAvailable(Scope{Model: "model-gamma", QuotaBucket: "made-up"}, "a", "b", "c")
	// A shared prefix does not make a bucket either.
	f.record("b", throttle(Scope{Model: "decide-mini-preview"}))
	f.wantAvailable(mini, "a", "b", "c")
	f.wantAvailable(Scope{Model: "decide-mini-preview"}, "a", "c")
	// Nor does a model prefix naming a bucket: shared/x is a model of its
	// own, and the bucket shared's members are untouched.
	f.record("c", throttle(Scope{Model: "shared/x"}))
	f.wantAvailable(mini, "a", "b", "c")
	f.wantAvailable(large, "a", "b", "c")
	f.wantAvailable(Scope{Model: "shared/x"}, "a", "b")
}

func TestModelAndBucketNamespacesDistinct(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.Options.QuotaBuckets = map[string][]string{"twin": {"member"}}
	})
	bucket := Scope{Model: "member", QuotaBucket: "twin"}
	model := Scope{Model: "twin"}
	f.record("a", throttle(model))
	f.wantAvailable(model, "b", "c")
	f.wantAvailable(bucket, "a", "b", "c")
	f.record("b", throttle(bucket))
	f.wantAvailable(bucket, "a", "c")
	f.wantAvailable(model, "b", "c")
}

// Selection.

func TestScopedSelectionExcludesLegacyRests(t *testing.T) {
	f := newFixture(t)
	f.record("a", throttleFor(unscoped, 30))
	f.wantAvailable(modelA, "b", "c")
	f.wantSelect(modelA, "b")
	f.clk.Advance(30 * time.Second)
	f.wantSelect(modelA, "a")
}

func TestAvailableKeepsConfiguredOrder(t *testing.T) {
	f := newFixture(t, preferActive)
	got := f.pool.Available(modelA, []string{"c", "a", "b", "a", "unknown"})
	if want := []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("Available(c, a, b) = %q, want %q", got, want)
	}
	f.record("c", success(modelA)) // the active preference does not reorder Available
	f.record("a", throttle(modelA))
	if got, want := f.pool.Available(modelA, []string{"c", "b"}), []string{"b", "c"}; !slices.Equal(got, want) {
		t.Errorf("Available(c, b) = %q, want %q", got, want)
	}
}

func TestPreferActive(t *testing.T) {
	f := newFixture(t, preferActive)
	f.wantSelect(modelA, "a")
	f.record("b", success(modelA))
	f.wantSelect(modelA, "b")
	f.wantSelect(modelB, "b") // the active key is pool-wide
	f.wantSelect(unscoped, "b")
	c, err := f.pool.Select(modelA, []string{"a", "c"})
	if err != nil || c.Name != "a" {
		t.Errorf("Select(a, c) with active b = %q, %v; want a", c.Name, err)
	}
	f.record("b", throttle(modelA)) // the active key cooling: configured order
	f.wantSelect(modelA, "a")
	f.wantSelect(modelB, "b")
	f.record("c", Observation{Scope: modelB, Status: 200, Catalog: true}) // a catalog fetch is no success of the key
	f.wantSelect(modelB, "b")
	if k := f.pool.Credentials()[1].Key; !k.Equal(testCreds[1].Key) {
		t.Error("pool does not retain the configured key for dispatch")
	}

	g := newFixture(t) // without the option: configured order
	g.record("b", success(modelA))
	g.wantSelect(modelA, "a")
}

func TestAllCoolingIsModelCooldown429(t *testing.T) {
	f := newFixture(t)
	f.record("a", throttleFor(modelA, 30))
	f.record("b", throttleFor(modelA, 10))
	f.record("c", throttleFor(modelA, 20))
	f.wantAvailable(modelA)
	f.wantExhausted(modelA, true, 10*time.Second)
	_, err := f.pool.Select(modelA, nil)
	if ce, ok := errors.AsType[*CooldownExhaustedError](err); !ok || !ce.Scoped || ce.RetryAfter != 10*time.Second {
		t.Errorf("Select = %v; want a scoped cooldown (429 model_cooldown) with 10 s", err)
	}
	// Candidates restrict the earliest release to themselves.
	_, err = f.pool.Select(modelA, []string{"a", "c"})
	if ce, ok := errors.AsType[*CooldownExhaustedError](err); !ok || ce.RetryAfter != 20*time.Second {
		t.Errorf("Select(a, c) = %v, want cooldown with 20 s", err)
	}
	// The pool never waits: no timer was started.
	if n := f.clk.Timers(); n != 0 {
		t.Errorf("%d timers started, want 0", n)
	}
}

func TestAvailableCallersGetSame429Decision(t *testing.T) {
	f := newFixture(t)
	f.record("a", throttleFor(modelA, 40))
	f.record("b", status(modelB, 401))
	f.record("c", throttleFor(unscoped, 25))
	if got := f.pool.Available(modelA, nil); len(got) != 0 {
		t.Fatalf("Available = %q, want none", got)
	}
	// An empty eligible result: Select with the original keys and the
	// legacy rests gives the 429 admission decision.
	f.wantExhausted(modelA, true, 25*time.Second)
	if d, ok := f.pool.NextRelease(modelA, nil); !ok || d != 25*time.Second {
		t.Errorf("NextRelease = %v, %v; want 25s, true", d, ok)
	}
}

func TestEmptyConfigurationIsDistinctNoKeyResult(t *testing.T) {
	for _, enabled := range []bool{false, true} {
		f := newFixture(t, func(c *Config) {
			c.Credentials = nil
			c.Settings.ModelCooldownEnabled = enabled
			c.Options.FirstKeyFallback = true
		})
		for _, s := range []Scope{unscoped, modelA, mini} {
			_, err := f.pool.Select(s, nil)
			if !errors.Is(err, ErrNoCredentials) {
				t.Errorf("enabled=%v: Select(%+v) = %v, want ErrNoCredentials", enabled, s, err)
			}
			if _, ok := errors.AsType[*CooldownExhaustedError](err); ok {
				t.Errorf("ErrNoCredentials treated as a cooldown error")
			}
			if got := f.pool.Available(s, nil); len(got) != 0 {
				t.Errorf("Available = %q, want none", got)
			}
			if _, ok := f.pool.NextRelease(s, nil); ok {
				t.Error("NextRelease reported a release for an empty pool")
			}
		}
		f.record("a", throttle(modelA)) // unknown credential: ignored
	}
	// An empty candidate list is the same distinct result.
	f := newFixture(t)
	for _, cands := range [][]string{{}, {"unknown"}} {
		if _, err := f.pool.Select(modelA, cands); !errors.Is(err, ErrNoCredentials) {
			t.Errorf("Select(%q) = %v, want ErrNoCredentials", cands, err)
		}
	}
}

func TestReleaseWaitsForBothAuthAndModelObservation(t *testing.T) {
	single := func(c *Config) { c.Credentials = testCreds[:1] }

	// Model observation outlasts the auth one.
	f := newFixture(t, single)
	f.record("a", throttleFor(modelA, 100))
	f.record("a", Observation{Scope: modelA, Status: 401, RetryAfter: 50, HasRetryAfter: true})
	f.wantExhausted(modelA, true, 100*time.Second)
	f.wantExhausted(modelB, true, 50*time.Second)
	f.clk.Advance(50 * time.Second)
	f.wantExhausted(modelA, true, 50*time.Second)
	f.wantSelect(modelB, "a")
	f.clk.Advance(50 * time.Second)
	f.wantSelect(modelA, "a")

	// Auth observation outlasts the model one.
	g := newFixture(t, single)
	g.record("a", throttleFor(modelA, 50))
	g.record("a", Observation{Scope: modelB, Status: 401, RetryAfter: 100, HasRetryAfter: true})
	g.clk.Advance(50 * time.Second)
	g.wantExhausted(modelA, true, 50*time.Second)
	g.clk.Advance(50 * time.Second)
	g.wantSelect(modelA, "a")

	// And for the legacy rest.
	h := newFixture(t, single)
	h.record("a", throttleFor(modelA, 10))
	h.record("a", throttleFor(unscoped, 200))
	h.wantExhausted(modelA, true, 200*time.Second)
	if d, ok := h.pool.NextRelease(modelA, nil); !ok || d != 200*time.Second {
		t.Errorf("NextRelease = %v, %v; want 200s, true", d, ok)
	}
}

func TestNextRelease(t *testing.T) {
	f := newFixture(t)
	if d, ok := f.pool.NextRelease(modelA, nil); ok || d != 0 {
		t.Errorf("NextRelease with keys available = %v, %v; want 0, false", d, ok)
	}
	f.record("a", throttleFor(modelA, 7))
	if _, ok := f.pool.NextRelease(modelA, nil); ok {
		t.Error("NextRelease = true while b is available")
	}
	if d, ok := f.pool.NextRelease(modelA, []string{"a"}); !ok || d != 7*time.Second {
		t.Errorf("NextRelease(a) = %v, %v; want 7s, true", d, ok)
	}
}

func TestPoolsIsolated(t *testing.T) {
	f := newFixture(t)
	zdr := New(Config{
		Options:     Options{Name: "zdr"},
		Credentials: testCreds, // the same keys under the same names
		Settings:    Settings{ModelCooldownEnabled: true},
		Store:       f.store,
		Clock:       f.clk,
	})
	f.record("a", throttle(modelA))
	f.record("b", status(modelA, 401))
	f.record("c", throttle(unscoped))
	if got, want := zdr.Available(modelA, nil), []string{"a", "b", "c"}; !slices.Equal(got, want) {
		t.Errorf("zdr Available = %q, want %q: pools share state", got, want)
	}
	zdr.Record("a", throttle(modelB))
	zdr.Record("a", status(unscoped, 401))
	f.wantAvailable(modelB, "a") // b: auth rejection, c: legacy rest, in api only
	for i := range testCreds {
		if f.pool.ids[i] == zdr.ids[i] {
			t.Errorf("credential %d has the same ID in two pools", i)
		}
	}
}

func TestSameKeySharesStateWithinPool(t *testing.T) {
	f := newFixture(t, func(c *Config) {
		c.Credentials = []Credential{
			{Name: "east", Key: secret.New("sk-shared")},
			{Name: "west", Key: secret.New("sk-shared")},
			{Name: "other", Key: secret.New("sk-other")},
		}
	})
	f.record("east", throttle(modelA))
	f.record("west", throttle(unscoped))
	f.wantAvailable(modelA, "other")
	f.wantAvailable(unscoped, "other")
}

func TestNewPanicsOnDuplicateNames(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("New with two credentials named a did not panic")
		}
	}()
	New(Config{Credentials: []Credential{testCreds[0], testCreds[0]}})
}

func TestSnapshot(t *testing.T) {
	f := newFixture(t)
	f.record("a", throttleFor(modelA, 10))
	f.record("a", throttleFor(mini, 30))
	f.record("b", Observation{Scope: modelA, Status: 401, RetryAfter: 20, HasRetryAfter: true})
	f.record("c", throttleFor(unscoped, 5))
	s := f.pool.Snapshot()
	if s.Pool != "api" || !s.ModelCooldownEnabled || s.StoreLive != 3 || s.StoreCapacity != DefaultStoreLimit || !s.OverflowUntil.IsZero() {
		t.Errorf("Snapshot = %+v", s)
	}
	at := func(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }
	want := []CredentialStatus{
		{Name: "a", ScopedObservations: 2, EarliestRelease: at(10), LatestRelease: at(30)},
		{Name: "b", RestingUntil: at(20), AuthCoolingUntil: at(20)},
		{Name: "c", RestingUntil: at(5)},
	}
	for i, w := range want {
		g := s.Credentials[i]
		if g.Name != w.Name || g.ScopedObservations != w.ScopedObservations ||
			!g.EarliestRelease.Equal(w.EarliestRelease) || !g.LatestRelease.Equal(w.LatestRelease) ||
			!g.RestingUntil.Equal(w.RestingUntil) || !g.AuthCoolingUntil.Equal(w.AuthCoolingUntil) {
			t.Errorf("Credentials[%d] = %+v, want %+v", i, g, w)
		}
	}
	f.clk.Advance(time.Hour)
	s = f.pool.Snapshot()
	if s.StoreLive != 0 || s.Credentials[0].ScopedObservations != 0 || !s.Credentials[2].RestingUntil.IsZero() {
		t.Errorf("Snapshot after expiry = %+v", s)
	}
}

func TestManyCredentials(t *testing.T) {
	var creds []Credential
	for i := range 70 {
		creds = append(creds, Credential{Name: fmt.Sprintf("k%02d", i), Key: secret.New(fmt.Sprintf("sk-canary-%02d", i))})
	}
	f := newFixture(t, func(c *Config) { c.Credentials = creds })
	if f.pool.Name() != "api" || len(f.pool.Credentials()) != 70 {
		t.Fatalf("pool %q has %d credentials", f.pool.Name(), len(f.pool.Credentials()))
	}
	f.record("k68", throttle(modelA))
	got := f.pool.Available(modelA, []string{"k69", "k68", "k67", "k00"})
	if want := []string{"k00", "k67", "k69"}; !slices.Equal(got, want) {
		t.Errorf("Available = %q, want %q", got, want)
	}
	c, err := f.pool.Select(modelA, []string{"k69", "k68"})
	if err != nil || c.Name != "k69" {
		t.Errorf("Select = %q, %v; want k69", c.Name, err)
	}
}

// A candidate list reaches every credential of the pool whatever its
// size, at the edge of the 64-credential fast path too: in a pool of 64
// or 65 credentials, the last one named as a candidate is available and
// selected, never silently dropped from the list.
func TestCandidatesReachTheLastCredential(t *testing.T) {
	for _, n := range []int{63, 64, 65} {
		var creds []Credential
		for i := range n {
			creds = append(creds, Credential{Name: fmt.Sprintf("k%02d", i), Key: secret.New(fmt.Sprintf("sk-canary-%02d", i))})
		}
		f := newFixture(t, func(c *Config) { c.Credentials = creds })
		last := creds[n-1].Name
		if got, want := f.pool.Available(modelA, []string{last, "k00"}), []string{"k00", last}; !slices.Equal(got, want) {
			t.Errorf("%d credentials: Available(%s, k00) = %q, want %q", n, last, got, want)
		}
		if c, err := f.pool.Select(modelA, []string{last}); err != nil || c.Name != last {
			t.Errorf("%d credentials: Select(%s) = %q, %v", n, last, c.Name, err)
		}
	}
}

func TestNewDefaults(t *testing.T) {
	// No store, clock, logger or learner: a private store on the real
	// clock, and the spec's defaults.
	p := New(Config{Options: Options{Name: "api"}, Credentials: testCreds[:1], Settings: Settings{ModelCooldownEnabled: true}})
	p.Record("a", throttle(modelA))
	if d, ok := p.NextRelease(modelA, nil); !ok || d <= 59*time.Second || d > 60*time.Second {
		t.Errorf("throttle rest = %v, %v; want about 60s", d, ok)
	}
	p.Record("a", status(modelB, 401))
	if d, ok := p.NextRelease(modelB, nil); !ok || d <= DefaultAuthRest-time.Second || d > DefaultAuthRest {
		t.Errorf("auth rest = %v, %v; want about %v", d, ok, DefaultAuthRest)
	}
	if s := p.Snapshot(); s.StoreLive != 2 || s.StoreCapacity != DefaultStoreLimit {
		t.Errorf("Snapshot = %+v", s)
	}
}

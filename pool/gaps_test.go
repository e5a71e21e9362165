package pool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/secret"
)

// A reload that adds or removes a credential configured before the active
// one shifts every index after it: the active-key preference must follow
// the credential (same name and key), not its old position.
func TestPreferActiveFollowsTheActiveCredentialAcrossAReload(t *testing.T) {
	d := Credential{Name: "d", Key: secret.New("sk-canary-key-dddddddddddddddddddd")}
	for _, c := range []struct {
		name  string
		creds []Credential
	}{
		{"an earlier credential removed", []Credential{testCreds[1], testCreds[2]}},
		{"a credential added first", []Credential{d, testCreds[0], testCreds[1], testCreds[2]}},
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			st := NewStore(clk, 0)
			opts := Options{Name: "api", PreferActive: true}
			old := New(Config{Options: opts, Credentials: testCreds, Store: st, Clock: clk})
			old.Record("c", success(modelA))
			keep := func(string) bool { return true }
			cur := New(Config{Options: opts, Credentials: c.creds, Store: st, Clock: clk, Previous: old, Keep: keep})
			if got, err := cur.Select(modelA, nil); err != nil || got.Name != "c" {
				t.Errorf("Select after the reload = %q, %v; want c, the active credential", got.Name, err)
			}
		})
	}
}

// The learner's scope is the one the configuration gives: a member model
// sent without its bucket is learned under the bucket (a policy entry
// names the exact quota_bucket), and a bucket name the configuration does
// not know is an arbitrary caller field that reaches no learned state.
func TestLearnerIsToldTheBucketTheConfigurationGives(t *testing.T) {
	l := &fakeLearner{}
	f := newFixture(t, withLearner(l))
	f.record("a", throttle(Scope{Model: "decide-mini"}))
	f.record("b", throttle(Scope{Model: "model-alpha", QuotaBucket: "made-up"}))
	if len(l.observed) != 2 {
		t.Fatalf("learner saw %d observations, want 2", len(l.observed))
	}
	for i, want := range []struct {
		key    secret.Value
		model  string
		bucket string
	}{
		{testCreds[0].Key, "decide-mini", "shared"},
		{testCreds[1].Key, "model-alpha", ""},
	} {
		got := l.observed[i]
		if got.Model != want.model || got.QuotaBucket != want.bucket || got.Identity != learnIdentity(want.key, "api", want.model, want.bucket) {
			t.Errorf("observation %d = model %q bucket %q, want model %q bucket %q and their identity", i, got.Model, got.QuotaBucket, want.model, want.bucket)
		}
	}
}

// A learner that answers zero proposes no rest at all: the pool keeps the
// existing cooldown (60 s for a throttle) instead of letting the
// throttled credential be redispatched within a second.
func TestLearnerZeroSuggestionKeepsTheExistingCooldown(t *testing.T) {
	for _, path := range []struct {
		name string
		mod  func(*Config)
	}{{"scoped", func(*Config) {}}, {"legacy", disabled}} {
		t.Run(path.name, func(t *testing.T) {
			l := &fakeLearner{suggest: func(LearnEvent) (time.Duration, bool) { return 0, true }}
			f := newFixture(t, func(c *Config) { c.Credentials = testCreds[:1] }, withLearner(l), path.mod)
			f.record("a", throttle(modelA))
			f.clk.Advance(ThrottleRest - time.Millisecond)
			if c, err := f.pool.Select(modelA, nil); err == nil {
				t.Fatalf("Select = %q %v after the throttle, want it still cooling for the 60 s fallback", c.Name, ThrottleRest-time.Millisecond)
			}
			f.clk.Advance(time.Millisecond)
			f.wantSelect(modelA, "a")
		})
	}
}

// rotor status shows the first and last release of a credential's model
// cooldowns, whatever order the store keeps them in.
func TestSnapshotReleasesSpanEveryScopedObservation(t *testing.T) {
	f := newFixture(t)
	const n = 40
	for i := range n {
		// Releases 10..49 s, recorded in an order unrelated to them.
		f.record("a", throttleFor(Scope{Model: fmt.Sprintf("m%02d", i)}, float64(10+(i*17)%n)))
	}
	for range 3 { // each snapshot walks the store's map in another order
		got := f.pool.Snapshot().Credentials[0]
		if got.ScopedObservations != n || !got.EarliestRelease.Equal(t0.Add(10*time.Second)) || !got.LatestRelease.Equal(t0.Add(49*time.Second)) {
			t.Fatalf("a = %d observations, earliest %v, latest %v; want %d, %v, %v",
				got.ScopedObservations, got.EarliestRelease, got.LatestRelease, n, t0.Add(10*time.Second), t0.Add(49*time.Second))
		}
	}
}

// A cooldown that a sibling's fall shortened leaves the store when it
// ends, as any other does: a slot kept past its release counts against the
// capacity, and a full store fails new scoped admission closed (503) for
// unrelated traffic.
func TestShortenedCooldownLeavesTheStoreWhenItEnds(t *testing.T) {
	l := &siblingLearner{fell: true, rest: 5 * time.Second}
	f := newFixture(t, withLearner(l), withStoreLimit(2))
	f.record("c", throttleFor(modelB, 50)) // released at 50 s
	f.record("b", throttle(modelA))        // released at 60 s
	f.clk.Advance(10 * time.Second)
	f.record("a", success(modelA)) // a fall: b rests 5 s more, to 15 s
	f.clk.Advance(10 * time.Second)
	if n := f.store.Len(); n != 1 {
		t.Errorf("store Len = %d at 20 s, want 1 (b's shortened cooldown ended at 15 s)", n)
	}
	f.record("a", throttle(Scope{Model: "model-gamma"})) // takes the freed slot
	f.wantSelect(Scope{Model: "model-delta"}, "a")
}

// A reload that lowers the cap ends the cooldowns already running by the
// new cap, and they leave the store then, beside cooldowns the reload did
// not touch (here of a credential the reload removed): otherwise their
// slots stay taken, and a full store fails new admission closed.
func TestCooldownsClippedByAReloadLeaveTheStoreWhenTheyEnd(t *testing.T) {
	clk := clock.NewFake(t0)
	st := NewStore(clk, 2)
	settings := func(max int64) Settings { return Settings{ModelCooldownEnabled: true, MaxSeconds: max} }
	old := New(Config{Options: Options{Name: "api"}, Credentials: testCreds[:2], Store: st, Clock: clk, Settings: settings(3600)})
	old.Record("b", throttleFor(modelA, 100))
	old.Record("a", throttleFor(modelA, 1800))
	keep := func(string) bool { return true }
	cur := New(Config{Options: Options{Name: "api"}, Credentials: testCreds[:1], Store: st, Clock: clk, Settings: settings(60), Previous: old, Keep: keep})
	clk.Advance(61 * time.Second)
	if n := st.Len(); n != 1 {
		t.Errorf("store Len = %d at 61 s, want 1 (a's cooldown, clipped to 60 s, ended)", n)
	}
	cur.Record("a", throttle(modelB)) // takes the freed slot
	if got, err := cur.Select(Scope{Model: "model-gamma"}, nil); err != nil || got.Name != "a" {
		t.Errorf("Select = %q, %v; want a", got.Name, err)
	}
}

// A reload that lowers the cap also clips the advice floors: trusted
// advice given under the old cap (1800 s) no longer holds a credential past
// the new one when a sibling's fall releases it.
func TestReloadThatLowersTheCapClipsTheAdviceFloor(t *testing.T) {
	clk := clock.NewFake(t0)
	st := NewStore(clk, 0)
	l := &siblingLearner{fell: true, rest: 5 * time.Second}
	settings := func(max int64) Settings { return Settings{ModelCooldownEnabled: true, MaxSeconds: max} }
	cfg := func(max int64) Config {
		return Config{Options: Options{Name: "api"}, Credentials: testCreds[:2], Store: st, Clock: clk, Settings: settings(max), Learner: l}
	}
	old := New(cfg(3600))
	old.Record("b", throttleFor(modelA, 1800))
	next := cfg(60)
	next.Previous, next.Keep = old, func(string) bool { return true }
	cur := New(next) // b now rests until 60 s
	clk.Advance(10 * time.Second)
	cur.Record("b", throttle(modelA)) // renewed without advice: until 70 s
	clk.Advance(10 * time.Second)
	cur.Record("a", success(modelA)) // a fall: b may go at 25 s, not before 60 s
	clk.Advance(40 * time.Second)
	if got := cur.Available(modelA, []string{"b"}); len(got) != 1 {
		t.Errorf("b still cooling at 60 s; the clipped advice ended then")
	}
}

// The capacity guard's Retry-After is bounded by the cap in force, also
// when the guard was raised under a larger cap before a reload.
func TestCapacityRetryAfterIsBoundedByTheNewCap(t *testing.T) {
	_, cur := guardRaisedThenCapLowered(t)
	_, err := cur.Select(Scope{Model: "model-gamma"}, nil)
	if ce, ok := errors.AsType[*CapacityError](err); !ok || ce.RetryAfter != 30*time.Second {
		t.Errorf("Select = %v, want *CapacityError with Retry-After 30s, the new cap", err)
	}
}

// guardRaisedThenCapLowered fills a one-slot store under a 3600 s cap,
// drops an observation with 1800 s of advice (raising the capacity
// guard), and reloads the pool to a 30 s cap: the new pool.
func guardRaisedThenCapLowered(t *testing.T) (clk *clock.Fake, cur *Pool) {
	t.Helper()
	clk = clock.NewFake(t0)
	st := NewStore(clk, 1)
	settings := func(max int64) Settings { return Settings{ModelCooldownEnabled: true, MaxSeconds: max} }
	old := New(Config{Options: Options{Name: "api"}, Credentials: testCreds, Store: st, Clock: clk, Settings: settings(3600)})
	old.Record("a", throttleFor(modelA, 1800))
	old.Record("b", throttleFor(modelB, 1800)) // dropped: the guard holds until 1800 s
	if _, err := old.Select(Scope{Model: "model-gamma"}, nil); err == nil {
		t.Fatal("Select with the store full and an observation dropped found a credential; want the capacity guard")
	}
	keep := func(string) bool { return true }
	cur = New(Config{Options: Options{Name: "api"}, Credentials: testCreds, Store: st, Clock: clk, Settings: settings(30), Previous: old, Keep: keep})
	return clk, cur
}

// Classify maps statuses and errors as the spec's UpstreamOutcome evidence:
// only a 2xx is a success (it ends a cooldown and makes the key active),
// and a 3xx, which rotor never follows, is none.
func TestClassifyMapsStatusesAndErrorsToOutcomes(t *testing.T) {
	for _, c := range []struct {
		status int
		err    error
		want   Outcome
	}{
		{200, nil, OutcomeSuccess},
		{204, nil, OutcomeSuccess},
		{299, nil, OutcomeSuccess},
		{100, nil, OutcomeCallerError},
		{300, nil, OutcomeCallerError},
		{302, nil, OutcomeCallerError},
		{400, nil, OutcomeCallerError},
		{401, nil, OutcomeCredentialRejected},
		{402, nil, OutcomeCallerError},
		{403, nil, OutcomeCredentialRejected},
		{429, nil, OutcomeThrottled},
		{499, nil, OutcomeCallerError},
		{500, nil, OutcomeProviderFailure},
		{503, nil, OutcomeProviderFailure},
		{0, context.Canceled, OutcomeCancelled},
		{0, fmt.Errorf("read body: %w", context.DeadlineExceeded), OutcomeCancelled},
		{0, errors.New("connection reset"), OutcomeTransportFailure},
	} {
		if got := Classify(c.status, c.err); got != c.want {
			t.Errorf("Classify(%d, %v) = %v, want %v", c.status, c.err, got, c.want)
		}
	}
}

// A 3xx from the provider ends no cooldown: a redirect is not the
// credential serving the call.
func TestRedirectEndsNoCooldown(t *testing.T) {
	f := newFixture(t)
	f.record("a", throttle(modelA))
	f.clk.Advance(time.Second)
	f.record("a", status(modelA, http.StatusMultipleChoices))
	f.record("a", status(modelA, http.StatusFound))
	if !f.cooling("a", modelA) {
		t.Error("a 3xx ended a's cooldown")
	}
}

// Learners and logs read outcomes by name; an outcome outside the known
// set reads "unknown" rather than panicking in a log call.
func TestOutcomeNamesReadUnknownOutsideTheKnownSet(t *testing.T) {
	for o, want := range map[Outcome]string{
		OutcomeUnknown:             "unknown",
		OutcomeSuccess:             "success",
		OutcomeThrottled:           "throttled",
		OutcomeCredentialRejected:  "credential_rejected",
		OutcomeProviderFailure:     "provider_failure",
		OutcomeProviderFailure + 1: "unknown",
		Outcome(-1):                "unknown", // a String in a log line must not panic
	} {
		if got := o.String(); got != want {
			t.Errorf("Outcome(%d).String() = %q, want %q", int(o), got, want)
		}
	}
}

// Label hashing pools its buffers; a key or model name written into one
// must not stay there for the next user of the buffer, or a heap dump, to
// find: only the digest may remain.
func TestLabelLeavesNoNameInItsPooledBuffer(t *testing.T) {
	st := NewStore(nil, 0)
	name := bytes.Repeat([]byte("sk-canary-pooled-"), 8)
	for range 20 { // sync.Pool may hand out another buffer now and then
		st.label(labelModel, string(name))
		l := st.hashers.Get().(*labeler)
		leftover := l.buf[:cap(l.buf)]
		found := bytes.Contains(leftover, []byte("canary"))
		st.hashers.Put(l)
		if found {
			t.Fatal("a pooled label buffer still holds the name it hashed")
		}
	}
}

// The credential-wide auth scope is a namespace of its own: a model that
// happens to carry its label is just a model, and its throttle cools that
// credential for that model only, not for every model as an auth
// rejection does.
func TestAModelNamedLikeTheAuthScopeIsJustAModel(t *testing.T) {
	f := newFixture(t)
	odd := Scope{Model: labelAuthScope}
	f.record("a", throttle(odd))
	f.wantAvailable(odd, "b", "c")
	f.wantAvailable(modelA, "a", "b", "c")
}

// Without a learner (learned cooldown off, the default) recording says
// nothing about one: no "learner failed" warning on every request.
func TestRecordWithoutALearnerWarnsOfNone(t *testing.T) {
	f := newFixture(t)
	f.record("a", throttle(modelA))
	f.record("b", success(modelA))
	f.record("c", status(modelB, 401))
	if logs := f.logs.String(); strings.Contains(logs, "learner") {
		t.Errorf("a pool without a learner logged about one:\n%s", logs)
	}
}

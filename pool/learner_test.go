package pool

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/secret"
)

func TestLearnerConsultedOnlyForInference(t *testing.T) {
	l := &fakeLearner{}
	f := newFixture(t, withLearner(l))
	f.clk.Advance(time.Minute)

	// Catalog fetches and unscoped observations: never.
	for _, code := range []int{200, 401, 403, 429, 500} {
		f.record("a", Observation{Scope: modelA, Status: code, Catalog: true})
		f.record("a", status(unscoped, code))
	}
	if o, s := l.counts(); o != 0 || s != 0 {
		t.Fatalf("learner saw %d observations and %d suggestions for catalog or unscoped calls, want 0", o, s)
	}

	// Inference with a scope: every outcome is observed; a throttle also
	// asks for a suggestion.
	f.record("a", Observation{Scope: large, Status: 429, RetryAfter: 12, HasRetryAfter: true})
	f.record("b", success(modelA))
	f.record("c", status(modelB, 401))
	if o, s := l.counts(); o != 3 || s != 1 {
		t.Fatalf("learner saw %d observations and %d suggestions, want 3 and 1", o, s)
	}
	ev := l.observed[0]
	want := LearnEvent{
		Provider:      "api",
		Model:         "decide-large",
		QuotaBucket:   "shared",
		Identity:      learnIdentity(testCreds[0].Key, "api", "decide-large", "shared"),
		Outcome:       OutcomeThrottled,
		At:            t0.Add(time.Minute),
		RetryAfter:    12,
		HasRetryAfter: true,
	}
	if ev != want {
		t.Errorf("observed %+v, want %+v", ev, want)
	}
	if l.suggested[0] != want {
		t.Errorf("suggest asked with %+v, want %+v", l.suggested[0], want)
	}
	if got := l.observed[1]; got.Outcome != OutcomeSuccess || got.Model != "model-alpha" || got.QuotaBucket != "" {
		t.Errorf("success observed as %+v", got)
	}
	f.record("a", throttle(Scope{QuotaBucket: "shared"})) // quota-only: model null
	if got := l.observed[3]; got.Model != "" || got.QuotaBucket != "shared" || got.Identity != learnIdentity(testCreds[0].Key, "api", "", "shared") {
		t.Errorf("quota-only observation = %+v", got)
	}
}

// The cap bounds the rest itself, not only the Retry-After read from it:
// a suggestion past MODEL_COOLDOWN_MAX_SECONDS leaves the credential
// serving again once the cap has passed.
func TestLearnerSuggestionPastTheCapRestsOnlyTheCap(t *testing.T) {
	for _, path := range []struct {
		name  string
		mod   func(*Config)
		scope Scope
	}{{"scoped", func(*Config) {}, modelA}, {"legacy", disabled, modelB}} {
		t.Run(path.name, func(t *testing.T) {
			l := &fakeLearner{suggest: func(LearnEvent) (time.Duration, bool) { return 5000 * time.Second, true }}
			f := newFixture(t, func(c *Config) { c.Credentials = testCreds[:1] }, withLearner(l), path.mod)
			f.record("a", Observation{Scope: modelA, Status: 429})
			f.clk.Advance(3600*time.Second - time.Millisecond)
			if _, err := f.pool.Select(path.scope, nil); err == nil {
				t.Fatal("the credential serves before the cap has passed")
			}
			f.clk.Advance(time.Millisecond)
			f.wantSelect(path.scope, "a")
		})
	}
}

func TestLearnerSuggestionBoundedByAdviceAndCap(t *testing.T) {
	cases := []struct {
		name       string
		advice     float64
		hasAdvice  bool
		suggestion time.Duration
		ok         bool
		want       time.Duration
	}{
		{"suggestion over advice", 10, true, 30 * time.Second, true, 30 * time.Second},
		{"advice is a hard minimum", 50, true, 30 * time.Second, true, 50 * time.Second},
		{"cap bounds the suggestion", 0, false, 5000 * time.Second, true, 3600 * time.Second},
		{"cap bounds the advice", 4000, true, 30 * time.Second, true, 3600 * time.Second},
		{"invalid advice does not count", math.NaN(), true, 30 * time.Second, true, 30 * time.Second},
		{"shorter than the fallback", 0, false, 20 * time.Second, true, 20 * time.Second},
		{"no suggestion: advice", 10, true, 0, false, 10 * time.Second},
		{"no suggestion: fallback", 0, false, 0, false, 60 * time.Second},
		{"nonsense suggestion ignored", 0, false, -time.Second, true, 60 * time.Second},
		{"sub-second suggestion is the learner's", 0, false, 300 * time.Millisecond, true, 300 * time.Millisecond},
		{"sub-second suggestion under advice", 0.5, true, 300 * time.Millisecond, true, 500 * time.Millisecond},
		{"zero advice, sub-second suggestion", 0, true, 300 * time.Millisecond, true, 300 * time.Millisecond},
		{"zero suggestion ignored", 0, true, 0, true, time.Second},
	}
	for _, tc := range cases {
		for _, path := range []struct {
			name  string
			mod   func(*Config)
			scope Scope
		}{{"scoped", func(*Config) {}, modelA}, {"legacy", disabled, modelB}} {
			t.Run(tc.name+"/"+path.name, func(t *testing.T) {
				l := &fakeLearner{suggest: func(LearnEvent) (time.Duration, bool) { return tc.suggestion, tc.ok }}
				o := Observation{Scope: modelA, Status: 429, RetryAfter: tc.advice, HasRetryAfter: tc.hasAdvice}
				if got := cooldownAfter(t, o, path.scope, withLearner(l), path.mod); got != tc.want {
					t.Errorf("cooldown = %v, want %v", got, tc.want)
				}
			})
		}
	}
	// Auth rejections never take a suggestion.
	l := &fakeLearner{suggest: func(LearnEvent) (time.Duration, bool) { return time.Second, true }}
	if got := cooldownAfter(t, status(modelA, 401), modelA, withLearner(l)); got != DefaultAuthRest {
		t.Errorf("auth cooldown = %v, want %v", got, DefaultAuthRest)
	}
}

func TestLearnerLearnsOnLegacyPath(t *testing.T) {
	l := &fakeLearner{suggest: func(LearnEvent) (time.Duration, bool) { return 25 * time.Second, true }}
	f := newFixture(t, disabled, withLearner(l))
	f.record("a", throttle(mini))
	if o, s := l.counts(); o != 1 || s != 1 {
		t.Fatalf("learner saw %d observations and %d suggestions, want 1 and 1", o, s)
	}
	if ev := l.observed[0]; ev.Model != "decide-mini" || ev.QuotaBucket != "shared" {
		t.Errorf("legacy path learned %+v, want the separate scope record", ev)
	}
	// The pool keeps its credential-wide rest, with the suggested length.
	f.wantAvailable(modelB, "b", "c")
	if d, ok := f.pool.NextRelease(unscoped, []string{"a"}); !ok || d != 25*time.Second {
		t.Errorf("legacy rest = %v, want 25s", d)
	}
}

func TestLearnerIdentityIsCredentialKeyedAndUnambiguous(t *testing.T) {
	k1, k2 := secret.New("sk-canary-one"), secret.New("sk-canary-two")
	base := learnIdentity(k1, "api", "m", "b")
	if len(base) != 64 {
		t.Errorf("identity %q is not a hex SHA-256", base)
	}
	if base != learnIdentity(secret.New("sk-canary-one"), "api", "m", "b") {
		t.Error("identity is not stable for the same key (it must survive restarts)")
	}
	differs := map[string]string{
		"rotated key":       learnIdentity(k2, "api", "m", "b"),
		"pool":              learnIdentity(k1, "zdr", "m", "b"),
		"model":             learnIdentity(k1, "api", "n", "b"),
		"bucket":            learnIdentity(k1, "api", "m", ""),
		"model/bucket swap": learnIdentity(k1, "api", "b", "m"),
	}
	for name, id := range differs {
		if id == base {
			t.Errorf("%s gives the same identity", name)
		}
	}
	if learnIdentity(k1, "api", "a\x00b", "c") == learnIdentity(k1, "api", "a", "b\x00c") {
		t.Error("identity encoding is ambiguous")
	}
	// A model without a bucket and a bucket without a model (both
	// scopes exist: a quota bucket's own identity) never meet.
	if learnIdentity(k1, "api", "x", "") == learnIdentity(k1, "api", "", "x") {
		t.Error("model x without a bucket and bucket x without a model share an identity")
	}
	if strings.Contains(base, "sk-canary") {
		t.Error("identity holds the key")
	}
}

type panickyLearner struct{}

func (panickyLearner) Observe(LearnEvent)                       { panic("observe") }
func (panickyLearner) Suggest(LearnEvent) (time.Duration, bool) { panic("suggest") }

func TestLearnerPanicDoesNotInterruptRecord(t *testing.T) {
	f := newFixture(t, withLearner(panickyLearner{}))
	f.record("a", throttleFor(modelA, 9))
	if d, ok := f.pool.NextRelease(modelA, []string{"a"}); !ok || d != 9*time.Second {
		t.Errorf("cooldown = %v, %v; want the existing 9 s", d, ok)
	}
	if !strings.Contains(f.logs.String(), "learner failed") {
		t.Error("learner panic not logged")
	}
}

// siblingLearner is a SiblingLearner whose Fell and Release answer as
// scripted; it records the identities Release was asked about.
type siblingLearner struct {
	fakeLearner
	fell     bool
	rest     time.Duration
	released []string
}

func (l *siblingLearner) Fell(LearnEvent) bool { return l.fell }

func (l *siblingLearner) Release(ev LearnEvent) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.released = append(l.released, ev.Identity)
	return l.rest, l.rest >= 0
}

// A sibling's fall (learned_cooldown.adapt): when a success proves that
// the reset fell, the other credentials cooling in the same scope rest
// only as long as the learner says; nothing else is shortened.
func TestSiblingLearnerEndsSiblingsCooldownsEarly(t *testing.T) {
	long := func(LearnEvent) (time.Duration, bool) { return 300 * time.Second, true }
	cases := []struct {
		name     string
		fell     bool
		rest     time.Duration
		wantB    time.Duration // b's cooldown left after a's success
		released int
	}{
		{"a fall shortens", true, 20 * time.Second, 20 * time.Second, 2},
		{"a fall past due ends it", true, 0, 0, 2},
		{"no fall keeps it", false, 20 * time.Second, 290 * time.Second, 0},
		{"the learner declines", true, -1, 290 * time.Second, 2},
		{"never longer", true, 400 * time.Second, 290 * time.Second, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := &siblingLearner{fakeLearner: fakeLearner{suggest: long}, fell: c.fell, rest: c.rest}
			f := newFixture(t, withLearner(l))
			f.record("b", throttle(modelA))
			f.record("c", throttle(modelA))
			f.record("c", throttle(modelB)) // another scope: never asked about
			f.clk.Advance(10 * time.Second)
			f.record("a", success(modelA))
			if len(l.released) != c.released {
				t.Fatalf("Release asked %d times, want %d", len(l.released), c.released)
			}
			for _, id := range l.released {
				if id != learnIdentity(testCreds[1].Key, "api", "model-alpha", "") &&
					id != learnIdentity(testCreds[2].Key, "api", "model-alpha", "") {
					t.Errorf("Release asked about %s, not a sibling in model-alpha", id)
				}
			}
			if !f.cooling("c", modelB) {
				t.Error("c's cooldown for another model ended")
			}
			logs := f.logs.String()
			if ended := strings.Contains(logs, `"msg":"credential cooldown ended early: a sibling's reset fell","pool":"api","credential":"b"`); ended != (c.wantB < 290*time.Second) {
				t.Errorf("log of b's early end: %v, want %v:\n%s", ended, c.wantB < 290*time.Second, logs)
			}
			if strings.Contains(logs, "sk-canary") {
				t.Errorf("a key in the logs:\n%s", logs)
			}
			if c.wantB == 0 {
				f.wantAvailable(modelA, "a", "b", "c")
			} else {
				f.clk.Advance(c.wantB - time.Millisecond)
				if !f.cooling("b", modelA) {
					t.Fatalf("b serves before %v", c.wantB)
				}
				f.clk.Advance(time.Millisecond)
				if f.cooling("b", modelA) {
					t.Fatalf("b still cools after %v", c.wantB)
				}
			}
		})
	}
}

// A rest that a new throttle renewed after Release was asked is not cut,
// and a panicking SiblingLearner leaves the cooldowns as they were.
func TestSiblingReleaseKeepsARenewedRestAndSurvivesAPanic(t *testing.T) {
	var f *fixture
	long := func(LearnEvent) (time.Duration, bool) { return 300 * time.Second, true }
	l := &renewingLearner{siblingLearner: siblingLearner{fakeLearner: fakeLearner{suggest: long}, fell: true, rest: 5 * time.Second}}
	f = newFixture(t, withLearner(l))
	l.renew = func() { f.record("b", throttle(modelA)) } // b rests anew, for 300 s from now
	f.record("b", throttle(modelA))
	f.clk.Advance(10 * time.Second)
	f.record("a", success(modelA))
	f.clk.Advance(300*time.Second - time.Millisecond)
	if !f.cooling("b", modelA) {
		t.Fatal("a release cut the rest a newer throttle set")
	}

	p := &panickySibling{fakeLearner: fakeLearner{suggest: long}}
	g := newFixture(t, withLearner(p))
	g.record("b", throttle(modelA))
	g.record("a", success(modelA))
	if !g.cooling("b", modelA) {
		t.Fatal("a panicking learner ended b's cooldown")
	}
	g.clk.Advance(300 * time.Second)
	g.wantAvailable(modelA, "a", "b", "c")
}

// renewingLearner's Release records a new throttle of the sibling first,
// as a concurrent request would.
type renewingLearner struct {
	siblingLearner
	renew func()
}

func (l *renewingLearner) Release(ev LearnEvent) (time.Duration, bool) {
	l.renew()
	return l.siblingLearner.Release(ev)
}

type panickySibling struct{ fakeLearner }

func (*panickySibling) Fell(LearnEvent) bool                     { return true }
func (*panickySibling) Release(LearnEvent) (time.Duration, bool) { panic("release") }

// A sibling's release never ends a cooldown before the end of a rest the
// provider's trusted Retry-After set, whether the advice came with the
// released model or with another model of its shared quota bucket (a
// decide-large call on b answered 429 with Retry-After 1800 while b was
// cooling for decide-mini): the learner knows each model's advice apart,
// the pool's cooldown is the bucket's.
func TestSiblingReleaseNeverBeforeTrustedAdvice(t *testing.T) {
	long := func(LearnEvent) (time.Duration, bool) { return 300 * time.Second, true }
	for _, c := range []struct {
		name      string
		advice    Scope
		released  Scope
		wantAfter time.Duration // still cooling this long after a's success
	}{
		{"same model", modelA, modelA, 1790 * time.Second},
		{"another model of the bucket", large, mini, 1790 * time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := &siblingLearner{fakeLearner: fakeLearner{suggest: long}, fell: true, rest: 5 * time.Second}
			f := newFixture(t, withLearner(l))
			f.record("b", throttle(c.released))
			f.record("b", throttleFor(c.advice, 1800))
			f.clk.Advance(10 * time.Second)
			f.record("a", success(c.released))
			if len(l.released) == 0 {
				t.Fatal("the learner was not asked to release b")
			}
			f.clk.Advance(c.wantAfter - time.Millisecond)
			if !f.cooling("b", c.released) {
				t.Errorf("b released %v after a's success, before its 1800 s of trusted advice ran out", c.wantAfter)
			}
			f.clk.Advance(2 * time.Millisecond)
			if f.cooling("b", c.released) {
				t.Error("b still cooling after its advice ran out")
			}
		})
	}
}

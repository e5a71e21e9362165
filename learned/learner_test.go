package learned

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/pool"
)

const sec = time.Second

// next is when tests start the episode after becomeConfident: within the
// refresh window of its last refusal.
const next = 10 * time.Minute

// --- Configuration -------------------------------------------------------

func TestDefaultModeIsOff(t *testing.T) {
	if m, p := ParseSettings("", "", nil); m != ModeOff || p.Len() != 0 {
		t.Errorf("ParseSettings(\"\", \"\") = %q, %d scopes; want off, empty", m, p.Len())
	}
	if m, _ := ParseSettings("off", "{}", nil); m != ModeOff {
		t.Errorf("ParseSettings(off, {}) = %q, want off", m)
	}
	if got := New(Config{}).Mode(); got != ModeOff {
		t.Errorf("New(Config{}).Mode() = %q, want off", got)
	}
	var nilLearner *Learner
	nilLearner.Observe(pool.LearnEvent{Outcome: pool.OutcomeThrottled})
	if _, ok := nilLearner.Suggest(pool.LearnEvent{Outcome: pool.OutcomeThrottled}); ok || nilLearner.Mode() != ModeOff {
		t.Error("a nil learner is not off")
	}
}

func TestEmptyValuesUseDefaults(t *testing.T) {
	log, buf := newLogger()
	for _, c := range []struct{ mode, policy string }{{"", ""}, {"  ", " "}, {"shadow", ""}, {"apply", "  "}} {
		t.Run(fmt.Sprintf("mode=%q,policy=%q", c.mode, c.policy), func(t *testing.T) {
			m, p := ParseSettings(c.mode, c.policy, log)
			want := ModeOff
			if strings.TrimSpace(c.mode) != "" {
				want = Mode(c.mode)
			}
			if m != want || p.Len() != 0 {
				t.Errorf("ParseSettings(%q, %q) = %q, %d scopes; want %q, empty", c.mode, c.policy, m, p.Len(), want)
			}
		})
	}
	if buf.String() != "" {
		t.Errorf("defaults logged: %s", buf)
	}
}

func TestModesAreOffShadowApply(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Mode
		ok   bool
	}{
		{"off", ModeOff, true}, {"shadow", ModeShadow, true}, {"apply", ModeApply, true}, {" apply ", ModeApply, true}, {"", ModeOff, true},
		{"on", ModeOff, false}, {"Apply", ModeOff, false}, {"true", ModeOff, false}, {"shadow,apply", ModeOff, false},
	} {
		t.Run(c.in, func(t *testing.T) {
			got, err := ParseMode(c.in)
			if got != c.want || (err == nil) != c.ok {
				t.Errorf("ParseMode(%q) = %q, %v; want %q, ok=%v", c.in, got, err, c.want, c.ok)
			}
		})
	}
}

func TestMalformedModeOrPolicyDisablesTuningWithOneWarning(t *testing.T) {
	const secret = "sk-canary-0f1e2d3c4b5a"
	cases := []struct{ name, mode, policy, setting string }{
		{"mode", secret, testPolicy, "LEARNED_COOLDOWN_MODE"},
		{"policy", "apply", `{"buckets":[{"provider":"` + secret + `","model":"*","quota_bucket":null}]}`, "LEARNED_COOLDOWN_POLICY_JSON"},
		{"policy not JSON", "shadow", secret, "LEARNED_COOLDOWN_POLICY_JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			log, buf := newLogger()
			m, p := ParseSettings(c.mode, c.policy, log)
			if m != ModeOff || p.Len() != 0 {
				t.Errorf("ParseSettings = %q, %d scopes; want off, empty", m, p.Len())
			}
			warnings := buf.Lines("level=WARN")
			if len(warnings) != 1 || !strings.Contains(warnings[0], c.setting) {
				t.Errorf("warnings = %q, want one naming %s", warnings, c.setting)
			}
			if strings.Contains(buf.String(), "canary") {
				t.Errorf("the warning quotes the value: %s", buf)
			}
		})
	}
	t.Run("mode given to New", func(t *testing.T) {
		log, buf := newLogger()
		store := &countingStore{inner: NewMemoryStore(0)}
		l := New(Config{Mode: Mode(secret), Policy: mustPolicy(t, testPolicy), Store: store, Logger: log})
		h := &harness{t: t, clk: clock.NewFake(epoch), store: store, l: l,
			ev: pool.LearnEvent{Provider: "api", Model: "decide-mini", Identity: identity("k", "api", "decide-mini", "")}}
		h.throttle(0)
		if l.Mode() != ModeOff || len(buf.Lines("level=WARN")) != 1 || strings.Contains(buf.String(), "canary") {
			t.Errorf("mode %q, log %q; want off and one warning without the value", l.Mode(), buf)
		}
		if g, p := store.ops(); g+p != 0 {
			t.Errorf("a malformed mode did %d storage operations", g+p)
		}
	})
	t.Run("off does not read the policy", func(t *testing.T) {
		log, buf := newLogger()
		if m, _ := ParseSettings("off", "not json", log); m != ModeOff || buf.String() != "" {
			t.Errorf("off with a malformed policy: %q, log %q; want off and no report", m, buf)
		}
	})
}

func TestOffModePerformsNoStorageOperations(t *testing.T) {
	store := &countingStore{inner: NewMemoryStore(0)}
	h := newHarness(t, ModeOff, withStore(store))
	for i := range 10 {
		h.throttle(time.Duration(i) * time.Minute)
		h.success(time.Duration(i)*time.Minute + 30*sec)
	}
	if g, p := store.ops(); g+p != 0 {
		t.Errorf("off mode did %d gets and %d puts, want none", g, p)
	}
	if h.logs.String() != "" {
		t.Errorf("off mode reported: %s", h.logs)
	}
	if s := h.l.Snapshot(); s.Observations != 0 {
		t.Errorf("off mode counted %d observations", s.Observations)
	}
}

func TestShadowLogsSuggestionAndChangesNoCooldown(t *testing.T) {
	h := newHarness(t, ModeShadow)
	h.becomeConfident(0)
	d, ok := h.throttle(next)
	if ok || d != 0 {
		t.Errorf("shadow Suggest = %v, %v; want 0, false (existing cooldown)", d, ok)
	}
	lines := h.logs.Lines("learned cooldown suggestion")
	if len(lines) != 4 { // one per counted throttle
		t.Fatalf("shadow reports = %d, want 4:\n%s", len(lines), h.logs)
	}
	last := lines[len(lines)-1]
	for _, want := range []string{"level=INFO", "bucket=" + bucketDigest(h.ev.Identity), "suggested_seconds=150", "confidence=3", "steps=0", "ready=true"} {
		if !strings.Contains(last, want) {
			t.Errorf("shadow report %q lacks %q", last, want)
		}
	}
	for _, leak := range []string{"decide-mini", h.ev.Identity, "api"} {
		if strings.Contains(h.logs.String(), leak) {
			t.Errorf("shadow report holds %q", leak)
		}
	}
	// Shadow never applies a trial, so it never spends a step.
	if st := h.mustState(); st.steps != 0 || st.decidedAt != 0 {
		t.Errorf("shadow spent steps=%d decidedAt=%d", st.steps, st.decidedAt)
	}
}

func TestApplyUsesSuggestionAfterConsistentEvidence(t *testing.T) {
	h := newHarness(t, ModeApply)
	h.becomeConfident(0)
	d, ok := h.throttle(next)
	if !ok || d != 150*sec {
		t.Errorf("apply Suggest = %v, %v; want the midpoint trial 150s, true", d, ok)
	}
	if s := h.l.Snapshot(); s.Suggestions != 1 || s.TrialSteps != 1 || s.Evidence != 3 {
		t.Errorf("snapshot = %+v", s)
	}
}

func TestApplyUsesExistingCooldownUntilConfidenceReturns(t *testing.T) {
	h := newHarness(t, ModeApply)
	// The first throttle opens the episode; the retries at 60 s and 120 s
	// are two consistent observations: not yet.
	h.throttle(0)
	h.throttle(60 * sec)
	if _, ok := h.throttle(120 * sec); ok {
		t.Fatal("suggestion at confidence 2")
	}
	h.success(180 * sec) // confidence 3
	if _, ok := h.throttle(next); !ok {
		t.Fatal("no suggestion at confidence 3")
	}
	// A contradiction (a throttle at or past hi) drops confidence...
	if _, ok := h.throttle(next + 200*sec); ok {
		t.Error("a suggestion for the contradicting throttle")
	}
	if st := h.mustState(); st.conf != 0 {
		t.Fatalf("confidence %d after a contradiction", st.conf)
	}
	// ...and it comes back after three consistent observations.
	h.success(next + 300*sec) // 1
	if _, ok := h.throttle(2 * time.Hour); ok {
		t.Error("a suggestion at confidence 1")
	}
	if _, ok := h.throttle(2*time.Hour + 60*sec); ok { // 2
		t.Error("a suggestion at confidence 2")
	}
	if _, ok := h.throttle(2*time.Hour + 120*sec); !ok { // 3
		t.Error("no suggestion once confidence returned")
	}
}

func TestQuotaOnlyObservationUsesNullModel(t *testing.T) {
	h := newHarness(t, ModeApply)
	h.ev = pool.LearnEvent{Provider: "api", QuotaBucket: "shared-decide", Identity: identity("k", "api", "", "shared-decide")}
	h.becomeConfident(0)
	if _, ok := h.throttle(next); !ok {
		t.Error("the quota-only scope (model null) did not learn")
	}
	// The same bucket with a model is another scope, not in the policy.
	h2 := newHarness(t, ModeApply, withStore(h.store))
	h2.ev = pool.LearnEvent{Provider: "api", Model: "decide-mini", QuotaBucket: "shared-decide", Identity: identity("k", "api", "decide-mini", "shared-decide")}
	h2.throttle(0)
	if _, ok := h2.state(); ok {
		t.Error("model+bucket learned from a model:null policy entry")
	}
}

func TestConfiguredNameLearnsNothingUntilExactScopeObserved(t *testing.T) {
	store := &countingStore{inner: NewMemoryStore(0)}
	h := newHarness(t, ModeApply, withStore(store))
	for _, ev := range []pool.LearnEvent{
		{Provider: "api", Model: "decide-large"},
		{Provider: "zdr", Model: "decide-mini"},
		{Provider: "api", Model: "decide-mini", QuotaBucket: "shared-decide"},
		{Provider: "api", Model: "Decide-Mini"},
		{Provider: "zdr", Model: "decide-large"}, // bucket null, policy has one
	} {
		ev.Identity = identity("k", ev.Provider, ev.Model, ev.QuotaBucket)
		ev.Outcome = pool.OutcomeThrottled
		ev.At = epoch
		h.l.Observe(ev)
		if _, ok := h.l.Suggest(ev); ok {
			t.Errorf("Suggest for unconfigured scope %+v", ev)
		}
	}
	if g, p := store.ops(); g+p != 0 {
		t.Errorf("scopes outside the policy did %d storage operations", g+p)
	}
}

func TestTuningOnlyAdjustsDurationAndDoesNotEnableModelCooldown(t *testing.T) {
	// The learner's only output is a duration for a throttle: it cannot
	// create a cooldown, enable model cooldown, or affect other outcomes.
	h := newHarness(t, ModeApply)
	h.becomeConfident(0)
	for _, o := range []pool.Outcome{pool.OutcomeSuccess, pool.OutcomeCredentialRejected, pool.OutcomeCallerError,
		pool.OutcomeTransportFailure, pool.OutcomeCancelled, pool.OutcomeProviderFailure, pool.OutcomeUnknown} {
		if d, ok := h.l.Suggest(h.event(o, time.Hour)); ok {
			t.Errorf("Suggest(%v) = %v, true; want false", o, d)
		}
	}
}

// --- Evidence and bounds -------------------------------------------------

func TestIntervalStartsAt1To3600Seconds(t *testing.T) {
	h := newHarness(t, ModeApply)
	h.throttle(0)
	st := h.mustState()
	if st.lo != 1000 || st.hi != 3_600_000 || st.conf != 0 || st.steps != 0 {
		t.Errorf("first state: lo=%d hi=%d conf=%d steps=%d; want 1000 3600000 0 0", st.lo, st.hi, st.conf, st.steps)
	}
}

func TestLaterThrottleRaisesLowerBoundFromFailedWait(t *testing.T) {
	h := newHarness(t, ModeApply)
	h.throttle(0)
	h.throttle(60 * sec)
	if st := h.mustState(); st.lo != 60_000 || st.conf != 1 {
		t.Errorf("after a throttle 60s into the episode: lo=%d conf=%d; want 60000 1", st.lo, st.conf)
	}
	// The wait is measured from the episode's first throttle.
	h.throttle(125 * sec)
	if st := h.mustState(); st.lo != 125_000 || st.anchor != epoch.UnixMilli() {
		t.Errorf("after a throttle at 125s: lo=%d anchor=%d; want 125000 %d", st.lo, st.anchor, epoch.UnixMilli())
	}
	if st := h.mustState(); st.hi != 3_600_000 {
		t.Errorf("a throttle moved hi to %d", st.hi)
	}
}

func TestSuccessAfterThrottleLowersUpperBoundFromElapsedWait(t *testing.T) {
	h := newHarness(t, ModeApply)
	h.throttle(0)
	h.success(75 * sec)
	st := h.mustState()
	if st.hi != 75_000 || st.lo != 1000 || st.conf != 1 || st.anchor != 0 {
		t.Errorf("after a success 75s after a throttle: lo=%d hi=%d conf=%d anchor=%d; want 1000 75000 1 0", st.lo, st.hi, st.conf, st.anchor)
	}
}

func TestSuccessWithoutPrecedingThrottleProvidesNoSample(t *testing.T) {
	store := &countingStore{inner: NewMemoryStore(0)}
	h := newHarness(t, ModeApply, withStore(store))
	h.success(0)
	if _, puts := store.ops(); puts != 0 {
		t.Errorf("a success without a throttle wrote %d times", puts)
	}
	h.throttle(10 * sec)
	h.success(70 * sec) // closes the episode
	before := h.mustState()
	h.success(200 * sec) // no throttle since
	if after := h.mustState(); after != before {
		t.Errorf("a success without a preceding throttle changed the state: %+v -> %+v", before, after)
	}
}

func TestNonLearningOutcomesProvideNoEvidence(t *testing.T) {
	store := &countingStore{inner: NewMemoryStore(0)}
	h := newHarness(t, ModeApply, withStore(store))
	h.throttle(0)
	before := h.mustState()
	g0, p0 := store.ops()
	for i, o := range []pool.Outcome{pool.OutcomeCredentialRejected, pool.OutcomeCallerError, pool.OutcomeCancelled,
		pool.OutcomeTransportFailure, pool.OutcomeProviderFailure, pool.OutcomeUnknown, pool.Outcome(99)} {
		h.l.Observe(h.event(o, time.Duration(90+i)*sec))
	}
	if g, p := store.ops(); g != g0 || p != p0 {
		t.Errorf("non-learning outcomes did %d gets and %d puts", g-g0, p-p0)
	}
	if after := h.mustState(); after != before {
		t.Errorf("non-learning outcomes changed the state")
	}
}

func TestThreeConsistentObservationsAllowMidpointTrial(t *testing.T) {
	h := newHarness(t, ModeApply)
	h.throttle(0)
	h.throttle(60 * sec) // 1: lo = 60
	h.success(130 * sec) // 2: hi = 130
	if _, ok := h.throttle(time.Hour); ok {
		t.Fatal("a trial after two observations")
	}
	d, ok := h.throttle(time.Hour + 60*sec) // 3: lo = 60 again (consistent)
	if !ok {
		t.Fatal("no trial after three consistent observations")
	}
	// The midpoint of (60, 130] is 95 s after the episode's first throttle,
	// which was 60 s ago.
	if want := 35 * sec; d != want {
		t.Errorf("trial = %v, want %v", d, want)
	}
	if st := h.mustState(); st.steps != 1 {
		t.Errorf("steps = %d, want 1", st.steps)
	}
}

func TestAtMost12TrialSteps(t *testing.T) {
	// A provider whose reset jumps between 400 s and 1,400 s each episode
	// keeps the search going; the steps stop at 12.
	h := newHarness(t, ModeApply)
	rng := rand.New(rand.NewPCG(7, 7))
	reset := 1000 * sec
	p := newFakeProvider(1, func(time.Time) time.Duration { return reset })
	run := func(episodes int) {
		for range episodes {
			var free time.Duration
			for now := h.clk.Now().Sub(epoch) + 5*time.Minute; ; now = max(now+sec, free) {
				if p.call(h.at(now)) {
					h.success(now)
					break
				}
				d, ok := h.throttle(now)
				if !ok {
					d = 60 * sec
				}
				free = now + d
				if st := h.mustState(); st.steps > MaxTrialSteps {
					t.Fatalf("steps = %d", st.steps)
				}
			}
		}
	}
	for range 40 {
		reset = time.Duration(400+rng.IntN(1000)) * sec
		run(1)
	}
	if st := h.mustState(); st.steps != MaxTrialSteps {
		t.Fatalf("steps = %d after 40 moving episodes, want %d", st.steps, MaxTrialSteps)
	}
	// The reset settles: no step is spent any more, and the learner answers
	// hi, the proven wait: 60 s into an episode, the time left to it.
	reset = 1000 * sec
	run(30)
	if s := h.l.Snapshot(); s.TrialSteps != MaxTrialSteps {
		t.Errorf("Snapshot.TrialSteps = %d, want %d", s.TrialSteps, MaxTrialSteps)
	}
	st := h.mustState()
	start := h.clk.Now().Sub(epoch) + 5*time.Minute
	h.throttle(start) // may be declined to refresh old evidence
	d, ok := h.throttle(start + 60*sec)
	if want := time.Duration(st.hi)*time.Millisecond - 60*sec; !ok || d != want {
		t.Errorf("after the steps: %v, %v; want hi - 60s = %v (hi = %dms)", d, ok, want, st.hi)
	}
	if h.mustState().steps != MaxTrialSteps {
		t.Error("a step beyond the limit")
	}
}

func TestContradictionWidensIntervalAndRemovesConfidence(t *testing.T) {
	t.Run("throttle at or after hi", func(t *testing.T) {
		h := newHarness(t, ModeApply)
		h.becomeConfident(0) // (120, 180]
		h.throttle(next)
		h.throttle(next + 200*sec) // R > 200 contradicts R <= 180
		st := h.mustState()
		if st.lo != 60_000 || st.hi != 3_600_000 || st.conf != 0 {
			t.Errorf("after the contradiction: lo=%d hi=%d conf=%d; want 60000 3600000 0", st.lo, st.hi, st.conf)
		}
		if s := h.l.Snapshot(); s.Contradictions != 1 {
			t.Errorf("Snapshot.Contradictions = %d, want 1", s.Contradictions)
		}
	})
	t.Run("success at or before lo", func(t *testing.T) {
		// Shadow mode keeps the existing 60 s cooldown, so a call can
		// follow the throttle before the would-be trial ends.
		h := newHarness(t, ModeShadow)
		h.becomeConfident(0)      // (120, 180]
		h.throttle(next)          // existing cooldown 60 s
		h.success(next + 100*sec) // R <= 100 contradicts R > 120
		st := h.mustState()
		if st.lo != 50_000 || st.hi != 3_600_000 || st.conf != 0 || st.anchor != 0 {
			t.Errorf("after the contradiction: lo=%d hi=%d conf=%d anchor=%d; want 50000 3600000 0 0", st.lo, st.hi, st.conf, st.anchor)
		}
	})
	t.Run("widening stays within 1-3600 s", func(t *testing.T) {
		h := newHarness(t, ModeApply)
		h.throttleHint(0, 1) // a 1 s cooldown
		h.success(2 * sec)   // hi = 2 s
		h.throttle(time.Hour)
		h.throttle(time.Hour + 3000*sec) // contradicts hi=2 s
		st := h.mustState()
		if st.lo != 1000 || st.hi != 3_600_000 {
			t.Errorf("lo=%d hi=%d, want 1000 3600000", st.lo, st.hi)
		}
	})
}

func TestNonincreasingTimestampWidensIntervalAndRemovesConfidence(t *testing.T) {
	h := newHarness(t, ModeApply)
	h.becomeConfident(0) // last observation at 180 s
	// An observation 10 s before the latest one: the clock went back.
	ev := h.ev
	ev.Outcome, ev.At = pool.OutcomeThrottled, epoch.Add(170*sec)
	h.l.Observe(ev)
	st := h.mustState()
	if st.lo != 60_000 || st.hi != 3_600_000 || st.conf != 0 {
		t.Errorf("after a nonincreasing timestamp: lo=%d hi=%d conf=%d; want 60000 3600000 0", st.lo, st.hi, st.conf)
	}
	if _, ok := h.l.Suggest(ev); ok {
		t.Error("a suggestion after a nonincreasing timestamp")
	}
	// Timestamps less than a second apart are concurrent, not decreasing.
	h2 := newHarness(t, ModeApply)
	h2.becomeConfident(0)
	ev = h2.ev
	ev.Outcome, ev.At = pool.OutcomeThrottled, epoch.Add(180*sec-500*time.Millisecond)
	h2.l.Observe(ev)
	if st := h2.mustState(); st.conf != 3 {
		t.Errorf("a straggler 0.5 s out of order dropped confidence to %d", st.conf)
	}
}

func TestModelCooldownCapBoundsAppliedTrial(t *testing.T) {
	h := newHarness(t, ModeApply, withMaxSeconds(100))
	h.throttle(0)
	h.throttle(60 * sec)
	h.throttle(120 * sec) // existing cooldown 60 s (< cap)
	h.success(180 * sec)
	d, ok := h.throttle(next) // midpoint 150 s, capped
	if !ok || d != 100*sec {
		t.Errorf("capped trial = %v, %v; want 100s, true", d, ok)
	}
	if st := h.mustState(); st.steps != 1 {
		t.Errorf("a capped trial is still a step: steps = %d", st.steps)
	}
	// The cap also bounds advice: min(cap, max(hint, suggestion)).
	h2 := newHarness(t, ModeApply, withMaxSeconds(100))
	h2.becomeConfident(0)
	if d, ok := h2.throttleHint(next, 5000); !ok || d != 100*sec {
		t.Errorf("advice above the cap = %v, %v; want 100s", d, ok)
	}
}

func TestRetryAfterIsHardMinimumEvenAbove3600(t *testing.T) {
	h := newHarness(t, ModeApply, withMaxSeconds(86400))
	h.becomeConfident(0)
	d, ok := h.throttleHint(time.Hour, 7200.5)
	if !ok || d != 7200500*time.Millisecond {
		t.Errorf("Suggest with 7200.5 s advice = %v, %v; want 2h0m0.5s", d, ok)
	}
	// The advice holds for the rest of the episode, also for throttles
	// that carry none: an in-flight call refused 10 s later.
	d, ok = h.throttle(time.Hour + 10*sec)
	if want := 7190500 * time.Millisecond; !ok || d != want {
		t.Errorf("a later throttle without advice got %v, %v; want %v", d, ok, want)
	}
	if st := h.mustState(); st.steps != 0 {
		t.Errorf("advice-bound cooldowns spent %d steps", st.steps)
	}
}

func TestApplyNeverGoesUnderRetryAfterHint(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	h := newHarness(t, ModeApply, withMaxSeconds(1_000_000))
	now := time.Duration(0)
	applied := 0
	for i := 0; i < 5000; i++ {
		now += time.Duration(rng.IntN(400_000)) * time.Millisecond
		if rng.IntN(3) == 0 {
			h.success(now)
			continue
		}
		if rng.IntN(2) == 0 {
			h.throttle(now) // evidence without advice
			continue
		}
		hint := rng.Float64() * 5000
		d, ok := h.throttleHint(now, hint)
		if !ok {
			continue
		}
		applied++
		if d < time.Duration(math.Ceil(hint*1000))*time.Millisecond {
			t.Fatalf("step %d: applied %v under the advice %.3fs", i, d, hint)
		}
	}
	if applied == 0 {
		t.Fatal("no suggestion was applied; the test proves nothing")
	}
}

func TestHintsCanPreventShortening(t *testing.T) {
	h := newHarness(t, ModeApply)
	h.becomeConfident(0) // trial would be 150 s
	d, ok := h.throttleHint(time.Hour, 400)
	if !ok || d != 400*sec {
		t.Errorf("Suggest = %v, %v; want the advice 400s", d, ok)
	}
	if st := h.mustState(); st.steps != 0 {
		t.Errorf("advice that overrode the trial spent a step: steps = %d", st.steps)
	}
}

func TestInvalidOrNonfiniteHintsIgnored(t *testing.T) {
	for _, hint := range []float64{math.NaN(), math.Inf(1), math.Inf(-1), -1, -0.001} {
		h := newHarness(t, ModeApply)
		h.becomeConfident(0)
		d, ok := h.throttleHint(next, hint)
		if !ok || d != 150*sec {
			t.Errorf("advice %v: Suggest = %v, %v; want the trial 150s", hint, d, ok)
		}
		if st := h.mustState(); st.hintUntil != 0 {
			t.Errorf("advice %v was recorded", hint)
		}
	}
	// Advice not flagged as present is not advice either.
	h := newHarness(t, ModeApply)
	h.becomeConfident(0)
	ev := h.event(pool.OutcomeThrottled, next)
	ev.RetryAfter = 900
	if d, ok := h.l.Suggest(ev); !ok || d != 150*sec {
		t.Errorf("unflagged advice: %v, %v; want 150s", d, ok)
	}
	// Huge finite advice is bounded without overflow.
	h2 := newHarness(t, ModeApply, withMaxSeconds(math.MaxInt32))
	h2.becomeConfident(0)
	if d, ok := h2.throttleHint(next, 1e300); !ok || d != math.MaxInt32*sec {
		t.Errorf("advice 1e300: %v, %v; want %v", d, ok, math.MaxInt32*sec)
	}
}

func TestSeparateEvidencePerCredentialProviderModelBucket(t *testing.T) {
	store := NewMemoryStore(0)
	h := newHarness(t, ModeApply, withStore(store))
	h.becomeConfident(0)
	others := []pool.LearnEvent{
		{Provider: "api", Model: "decide-mini", Identity: identity("key-b", "api", "decide-mini", "")},           // credential
		{Provider: "api", QuotaBucket: "shared-decide", Identity: identity("key-a", "api", "", "shared-decide")}, // bucket
		{Provider: "zdr", Model: "decide-large", QuotaBucket: "shared-decide", Identity: identity("key-a", "zdr", "decide-large", "shared-decide")},
	}
	for _, ev := range others {
		ev.Outcome, ev.At = pool.OutcomeThrottled, epoch.Add(next)
		if _, ok := h.l.Suggest(ev); ok {
			t.Errorf("scope %s/%s/%s used another scope's evidence", ev.Provider, ev.Model, ev.QuotaBucket)
		}
	}
	if _, ok := h.throttle(next); !ok {
		t.Error("the learned scope lost its evidence")
	}
}

func TestModelAndQuotaNamesNeverStored(t *testing.T) {
	// The state type holds numbers only; check the bytes anyway.
	h := newHarness(t, ModeApply)
	h.ev.Model = "decide-mini"
	h.becomeConfident(0)
	h.throttleHint(time.Hour, 30)
	rec, ok, err := h.store.Get(context.Background(), h.ev.Identity, h.clk.Now())
	if err != nil || !ok {
		t.Fatalf("Get = %v, %v", ok, err)
	}
	if rec.ID != h.ev.Identity {
		t.Errorf("record ID %q is not the identity digest", rec.ID)
	}
	for _, name := range []string{"decide-mini", "decide", "api", "key-a"} {
		if strings.Contains(string(rec.State), name) {
			t.Errorf("stored state holds %q", name)
		}
	}
	if len(rec.State) != stateSize {
		t.Errorf("state is %d bytes, want %d", len(rec.State), stateSize)
	}
}

func TestIdentitiesAreOpaqueDigests(t *testing.T) {
	store := &countingStore{inner: NewMemoryStore(0)}
	h := newHarness(t, ModeApply, withStore(store))
	for _, id := range []string{"", "sk-canary-0123456789abcdef0123", "decide-mini", strings.ToUpper(identity("k", "", "", "")), "abc", identity("k", "", "", "") + "0"} {
		h.ev.Identity = id
		h.throttle(0)
	}
	if g, p := store.ops(); g+p != 0 {
		t.Errorf("events without a hex digest identity did %d storage operations", g+p)
	}
	if w := h.logs.Lines("invalid_identity"); len(w) != 1 {
		t.Errorf("warnings = %q, want one", w)
	}
	if strings.Contains(h.logs.String(), "canary") {
		t.Error("the warning quotes the identity")
	}
}

func TestRotatedCredentialStartsNewIdentity(t *testing.T) {
	h := newHarness(t, ModeApply)
	h.becomeConfident(0)
	h.ev.Identity = identity("key-a-rotated", "api", "decide-mini", "")
	if _, ok := h.throttle(time.Hour); ok {
		t.Error("a rotated credential inherited the old key's evidence")
	}
}

func TestConvergesToIntervalHoldingTrueResetWithin12Steps(t *testing.T) {
	// A fake provider with a hidden reset R, a client sending a request
	// every 250 ms, the pool's 60 s fallback when the learner has no answer.
	for _, reset := range []time.Duration{3 * sec, 45 * sec, 150 * sec, 1234567 * time.Millisecond, 3000 * sec} {
		t.Run(reset.String(), func(t *testing.T) {
			h := newHarness(t, ModeApply)
			p := newFakeProvider(5, func(time.Time) time.Duration { return reset })
			const span = 2 * 24 * time.Hour
			var free time.Duration
			wastedBeforeLastDay := -1
			for now := time.Duration(0); now < span; now = max(now+250*time.Millisecond, free) {
				if wastedBeforeLastDay < 0 && now >= span-24*time.Hour {
					wastedBeforeLastDay = p.wasted
				}
				if p.call(h.at(now)) {
					h.success(now)
					continue
				}
				d, ok := h.throttle(now)
				if !ok {
					d = 60 * sec
				}
				free = now + d
				// Every state holds the truth: lo < R <= hi.
				st := h.mustState()
				if r := reset.Milliseconds(); st.lo >= r || st.hi < r {
					t.Fatalf("at %v the interval (%d, %d] ms misses R = %d ms", now, st.lo, st.hi, r)
				}
			}
			st := h.mustState()
			if r := reset.Milliseconds(); st.lo >= r || st.hi < r || st.hi-st.lo > resolvedMS {
				t.Errorf("after %d steps the interval is (%d, %d] ms, want at most a second wide around R = %d ms",
					st.steps, st.lo, st.hi, r)
			}
			if st.steps > MaxTrialSteps {
				t.Errorf("steps = %d", st.steps)
			}
			// Converged, a scope wastes at most the refresh of a learned wait
			// longer than the existing cooldown: one throttle per window.
			if late, most := p.wasted-wastedBeforeLastDay, int(24*time.Hour/(refreshMS*time.Millisecond)); late > most {
				t.Errorf("%d wasted throttles on the last day, after convergence; want at most %d", late, most)
			}
			t.Logf("R=%v: (%d, %d] ms after %d steps, %d wasted throttles", reset, st.lo, st.hi, st.steps, p.wasted)
		})
	}
}

func TestInFlightSuccessIsNotARecovery(t *testing.T) {
	h := newHarness(t, ModeApply)
	h.throttle(0)
	// A call dispatched before the throttle completes 20 s later: the pool
	// did not dispatch to the cooling credential, so this is no recovery.
	h.success(20 * sec)
	if st := h.mustState(); st.hi != 3_600_000 || st.anchor == 0 {
		t.Errorf("an in-flight success taught: hi=%d anchor=%d", st.hi, st.anchor)
	}
	h.success(61 * sec) // after the 60 s cooldown: genuine
	if st := h.mustState(); st.hi != 61_000 {
		t.Errorf("a genuine recovery: hi=%d, want 61000", st.hi)
	}
}

func TestConcurrentThrottlesAreOneObservation(t *testing.T) {
	h := newHarness(t, ModeApply)
	h.becomeConfident(0)
	d0, ok := h.throttle(next)
	if !ok {
		t.Fatal("no trial")
	}
	// In-flight calls refused right after: the same cooldown, no new step.
	for i := 1; i <= 5; i++ {
		off := time.Duration(i) * 100 * time.Millisecond
		d, ok := h.throttle(next + off)
		if !ok || d != d0-off {
			t.Errorf("straggler %d: %v, %v; want %v", i, d, ok, d0-off)
		}
	}
	if st := h.mustState(); st.steps != 1 || st.conf != 3 {
		t.Errorf("stragglers: steps=%d conf=%d, want 1 3", st.steps, st.conf)
	}
}

func TestObserveAndSuggestOrderDoesNotMatter(t *testing.T) {
	run := func(observeFirst bool) []time.Duration {
		h := newHarness(t, ModeApply)
		var out []time.Duration
		p := newFakeProvider(3, func(time.Time) time.Duration { return 150 * sec })
		now, free := time.Duration(0), time.Duration(0)
		for now < 6*time.Hour {
			now = max(now+sec, free)
			ev := h.event(pool.OutcomeSuccess, now)
			if p.call(ev.At) {
				h.l.Observe(ev)
				continue
			}
			ev.Outcome = pool.OutcomeThrottled
			var d time.Duration
			var ok bool
			if observeFirst {
				h.l.Observe(ev)
				d, ok = h.l.Suggest(ev)
			} else {
				d, ok = h.l.Suggest(ev)
				h.l.Observe(ev)
			}
			if !ok {
				d = 60 * sec
			}
			out = append(out, d)
			free = now + d
		}
		return out
	}
	a, b := run(true), run(false)
	if len(a) != len(b) {
		t.Fatalf("%d vs %d cooldowns", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("cooldown %d: %v (observe first) vs %v (suggest first)", i, a[i], b[i])
		}
	}
}

// --- Storage, errors and retention ---------------------------------------

func TestProcessLocalStateBoundedTo1024(t *testing.T) {
	h := newHarness(t, ModeApply)
	for i := range StoreCapacity + 1 {
		ev := h.event(pool.OutcomeThrottled, 0)
		ev.Identity = identity("k", "api", "decide-mini", string(rune(i)))
		h.l.Observe(ev)
	}
	if n := h.store.(*MemoryStore).Len(h.clk.Now()); n != StoreCapacity {
		t.Errorf("memory store holds %d records, want %d", n, StoreCapacity)
	}
}

func TestFullStoreRefusesNewScopesButKeepsServing(t *testing.T) {
	h := newHarness(t, ModeApply, withStore(NewMemoryStore(2)))
	h.becomeConfident(0)
	filler := h.event(pool.OutcomeThrottled, 0)
	filler.Identity = identity("k2", "api", "decide-mini", "")
	h.l.Observe(filler)
	// A third scope is refused with one warning; its Suggest falls back.
	for i := range 3 {
		ev := h.event(pool.OutcomeThrottled, 4*time.Minute+time.Duration(i)*time.Minute)
		ev.Identity = identity("k3", "api", "decide-mini", "")
		h.l.Observe(ev)
		if _, ok := h.l.Suggest(ev); ok {
			t.Error("a refused scope got a suggestion")
		}
	}
	if w := h.logs.Lines("reason=capacity"); len(w) != 1 {
		t.Errorf("capacity warnings = %d, want 1", len(w))
	}
	// The existing scope keeps learning and serving.
	if d, ok := h.throttle(next); !ok || d != 150*sec {
		t.Errorf("existing scope in a full store: %v, %v; want 150s", d, ok)
	}
	if s := h.l.Snapshot(); s.Fallbacks["capacity"] == 0 {
		t.Errorf("Snapshot.Fallbacks = %v", s.Fallbacks)
	}
}

func TestStateResetsOnRestart(t *testing.T) {
	h := newHarness(t, ModeApply)
	h.becomeConfident(0)
	// A restart: a new learner with a new memory store.
	restarted := newHarness(t, ModeApply)
	restarted.ev = h.ev
	if _, ok := restarted.throttle(time.Hour); ok {
		t.Error("learned state survived a restart")
	}
}

func TestSharedStoreAcrossProcesses(t *testing.T) {
	// Two processes sharing a store see one state per identity: the
	// identity digest is stable and the revision check serializes them.
	shared := NewMemoryStore(0)
	clk := clock.NewFake(epoch)
	a := newHarness(t, ModeApply, withStore(shared), withClock(clk))
	b := newHarness(t, ModeApply, withStore(shared), withClock(clk))
	a.throttle(0)
	b.throttle(60 * sec)
	a.throttle(120 * sec)
	b.success(180 * sec)
	if _, ok := a.throttle(next); !ok {
		t.Error("process a did not use evidence gathered by both")
	}
}

func TestStateExpiresSevenDaysAfterCreationNotExtended(t *testing.T) {
	h := newHarness(t, ModeApply)
	h.becomeConfident(0)
	// Observations keep coming for six days; none extends the lifetime.
	for day := 1; day <= 6; day++ {
		at := time.Duration(day) * 24 * time.Hour
		h.throttle(at)
		h.success(at + 170*sec)
	}
	h.throttle(Retention - 10*time.Minute) // refreshes the evidence
	if _, ok := h.throttle(Retention - 9*time.Minute); !ok {
		t.Fatal("no suggestion before expiry")
	}
	h.at(Retention)
	if _, ok := h.state(); ok {
		t.Fatal("state readable 7 days after creation")
	}
	if _, ok := h.throttle(Retention + time.Minute); ok {
		t.Error("a suggestion from expired state")
	}
	if st := h.mustState(); st.conf != 0 || st.lo != 1000 || st.hi != 3_600_000 {
		t.Errorf("after expiry a new state starts at 1-3600 s: lo=%d hi=%d conf=%d", st.lo, st.hi, st.conf)
	}
}

func TestUnavailableStoreFallsBackWithOneWarning(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
	}{
		{"missing table", errors.Join(ErrUnavailable, errors.New("no such table: learned_cooldown"))},
		{"database down", errors.New("database is locked")},
		{"timeout", context.DeadlineExceeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := &funcStore{
				get: func(context.Context, string, time.Time) (Record, bool, error) { return Record{}, false, c.err },
				put: func(context.Context, Record, int64, time.Time) (int64, error) { return 0, c.err },
			}
			h := newHarness(t, ModeApply, withStore(store))
			for i := range 20 {
				if _, ok := h.throttle(time.Duration(i) * time.Minute); ok {
					t.Fatal("a suggestion without storage")
				}
				h.success(time.Duration(i)*time.Minute + 30*sec)
			}
			w := h.logs.Lines("level=WARN")
			if len(w) != 1 || !strings.Contains(w[0], "reason=unavailable") {
				t.Errorf("warnings = %q, want one with reason=unavailable", w)
			}
		})
	}
}

func TestStaleRevisionIsRefusedAndPreventsApplying(t *testing.T) {
	inner := NewMemoryStore(0)
	h := newHarness(t, ModeApply, withStore(inner))
	h.becomeConfident(0)
	// Another process writes between every read and write of this one.
	var mu sync.Mutex
	racing := &funcStore{
		get: func(ctx context.Context, id string, now time.Time) (Record, bool, error) {
			mu.Lock()
			defer mu.Unlock()
			rec, ok, err := inner.Get(ctx, id, now)
			if ok {
				_, _ = inner.Put(ctx, rec, rec.Revision, now) // bump the revision
			}
			return rec, ok, err
		},
		put: inner.Put,
	}
	h.l = New(Config{Mode: ModeApply, Policy: mustPolicy(t, testPolicy), Store: racing, Logger: h.l.log, Clock: h.clk})
	if _, ok := h.throttle(next); ok {
		t.Error("a suggestion whose write was refused for a stale revision")
	}
	if w := h.logs.Lines("reason=stale_revision"); len(w) != 1 {
		t.Errorf("stale warnings = %d, want 1", len(w))
	}
	if st := h.mustState(); st.steps != 0 {
		t.Error("a refused put spent a step")
	}
	// A single lost race is retried once and succeeds.
	once := true
	retry := &funcStore{
		get: func(ctx context.Context, id string, now time.Time) (Record, bool, error) {
			rec, ok, err := inner.Get(ctx, id, now)
			if ok && once {
				once = false
				_, _ = inner.Put(ctx, rec, rec.Revision, now)
			}
			return rec, ok, err
		},
		put: inner.Put,
	}
	h.l = New(Config{Mode: ModeApply, Policy: mustPolicy(t, testPolicy), Store: retry, Clock: h.clk})
	if _, ok := h.throttle(next + 2*time.Minute); !ok {
		t.Error("one lost race was not retried")
	}
}

// TestStaleRevisionIsRetriedOnce: rotor's departure from the spec (README,
// "Cooldowns"). A put refused for a stale revision is retried once on the
// fresh state, by Observe and by Suggest alike, and never more: against a
// store that always loses the race each call makes exactly two puts.
func TestStaleRevisionIsRetriedOnce(t *testing.T) {
	inner := NewMemoryStore(0)
	h := newHarness(t, ModeApply, withStore(inner))
	h.becomeConfident(0)
	puts := 0
	racing := &funcStore{
		get: func(ctx context.Context, id string, now time.Time) (Record, bool, error) {
			rec, ok, err := inner.Get(ctx, id, now)
			if ok {
				_, _ = inner.Put(ctx, rec, rec.Revision, now) // another process writes first
			}
			return rec, ok, err
		},
		put: func(ctx context.Context, rec Record, rev int64, now time.Time) (int64, error) {
			puts++
			return inner.Put(ctx, rec, rev, now)
		},
	}
	h.l = New(Config{Mode: ModeApply, Policy: mustPolicy(t, testPolicy), Store: racing, Logger: h.l.log, Clock: h.clk})
	ev := h.event(pool.OutcomeThrottled, next)
	h.l.Observe(ev)
	if puts != 2 {
		t.Errorf("Observe made %d puts against a store that always loses the race, want 2: one retry", puts)
	}
	puts = 0
	if _, ok := h.l.Suggest(ev); ok {
		t.Error("a suggestion whose writes were all refused")
	}
	if puts != 2 {
		t.Errorf("Suggest made %d puts against a store that always loses the race, want 2: one retry", puts)
	}
}

func TestInvalidStoredStatePreventsApplying(t *testing.T) {
	for _, c := range []struct {
		name    string
		corrupt func([]byte) []byte
		healed  bool
	}{
		{"bit flip", func(b []byte) []byte { b[3] ^= 0x40; return b }, true},
		{"truncated", func(b []byte) []byte { return b[:10] }, true},
		{"bounds crossed", func(b []byte) []byte {
			st, _ := decodeState(b)
			st.lo, st.hi = st.hi, st.lo
			return st.encode()
		}, true},
		{"unknown version", func(b []byte) []byte { b[0] = 9; return b }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, ModeApply)
			h.becomeConfident(0)
			ctx := context.Background()
			rec, _, _ := h.store.Get(ctx, h.ev.Identity, h.clk.Now())
			if _, err := h.store.Put(ctx, Record{ID: rec.ID, State: c.corrupt(rec.State)}, rec.Revision, h.clk.Now()); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if _, ok := h.throttle(time.Hour + time.Duration(i)*time.Hour); ok {
					t.Fatal("a suggestion from invalid state")
				}
			}
			if w := h.logs.Lines("reason=invalid_state"); len(w) != 1 {
				t.Errorf("warnings = %d, want 1", len(w))
			}
			rec, _, _ = h.store.Get(ctx, h.ev.Identity, h.clk.Now())
			_, err := decodeState(rec.State)
			if healed := err == nil; healed != c.healed {
				t.Errorf("state rewritten = %v, want %v (a newer binary's state is left alone)", healed, c.healed)
			}
		})
	}
}

func TestConcurrentUseIsSafe(t *testing.T) {
	h := newHarness(t, ModeApply)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				ev := h.ev
				ev.Identity = identity("k", "api", "decide-mini", string(rune('a'+g%3)))
				ev.At = epoch.Add(time.Duration(i) * 7 * sec)
				ev.Outcome = pool.OutcomeThrottled
				if i%3 == 0 {
					ev.Outcome = pool.OutcomeSuccess
				}
				h.l.Observe(ev)
				h.l.Suggest(ev)
				_ = h.l.Snapshot()
			}
		}()
	}
	wg.Wait()
	for _, k := range "abc" {
		if _, ok := storedState(t, h.store, identity("k", "api", "decide-mini", string(k)), h.clk.Now()); !ok {
			t.Errorf("no state for scope %c", k)
		}
	}
}

func TestStateEncoding(t *testing.T) {
	st := state{lo: 61_000, hi: 180_500, conf: 7, steps: 12, last: 1_767_225_780_000, anchor: 1_767_225_600_000,
		until: 1_767_225_840_000, hintUntil: 1_767_225_900_000, decidedAt: 1_767_225_780_000}
	b := st.encode()
	got, err := decodeState(b)
	if err != nil || got != st {
		t.Fatalf("decode(encode(%+v)) = %+v, %v", st, got, err)
	}
	for i := range b {
		c := append([]byte(nil), b...)
		c[i] ^= 0x01
		if _, err := decodeState(c); err == nil {
			t.Errorf("a flipped bit in byte %d went unnoticed", i)
		}
	}
	if _, err := decodeState(nil); !errors.Is(err, errStateCorrupt) {
		t.Errorf("decode(nil) = %v", err)
	}
}

func TestStaleLongerWaitIsRefreshedByExistingCooldown(t *testing.T) {
	t.Run("refusal confirms", func(t *testing.T) {
		h := newHarness(t, ModeApply)
		h.becomeConfident(0) // (120, 180]; the last refusal at 120 s
		// 20 minutes on, a wait longer than the existing 60 s lacks a
		// recent refusal: the existing cooldown goes first.
		if d, ok := h.throttle(20 * time.Minute); ok {
			t.Fatalf("stale evidence applied: %v", d)
		}
		// Its retry is refused: fresh evidence; the learner takes the rest
		// of the episode: the trial at 150 s, 60 s in.
		d, ok := h.throttle(21 * time.Minute)
		if !ok || d != 90*sec {
			t.Errorf("after the refresh: %v, %v; want 90s", d, ok)
		}
	})
	t.Run("recovery below lo contradicts", func(t *testing.T) {
		h := newHarness(t, ModeApply)
		h.becomeConfident(0)
		h.throttle(20 * time.Minute)
		h.success(21 * time.Minute) // the provider got faster: R <= 60 < lo
		if st := h.mustState(); st.conf != 0 || st.lo != 30_000 || st.hi != 3_600_000 {
			t.Errorf("after a faster recovery: lo=%d hi=%d conf=%d; want 30000 3600000 0", st.lo, st.hi, st.conf)
		}
	})
	t.Run("shadow reports not ready", func(t *testing.T) {
		h := newHarness(t, ModeShadow)
		h.becomeConfident(0)
		h.throttle(20 * time.Minute)
		lines := h.logs.Lines("learned cooldown suggestion")
		if last := lines[len(lines)-1]; !strings.Contains(last, "ready=false") {
			t.Errorf("stale shadow report %q, want ready=false", last)
		}
	})
	t.Run("waits no longer than the existing cooldown need no refresh", func(t *testing.T) {
		h := newHarness(t, ModeApply)
		// Advice of 5 s gives the evidence (10, 15] s.
		h.throttleHint(0, 5)
		h.throttleHint(5*sec, 5)
		h.throttleHint(10*sec, 5)
		h.success(15 * sec)
		if d, ok := h.throttle(2 * time.Hour); !ok || d > simFallback {
			t.Errorf("a learned wait under the existing 60 s: %v, %v; want it applied", d, ok)
		}
	})
}

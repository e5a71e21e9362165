package learned

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/quotasim"
	"github.com/rotorhq/rotor/pool"
)

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
	// Only raises: a refusal earlier than lo (the existing 60 s
	// cooldown ran out before the learned lower bound) keeps lo.
	h = confidentEpisode(t, ModeShadow)
	h.throttle(next + 61*sec)
	if st := h.mustState(); st.lo != 120_000 || st.conf != 4 {
		t.Errorf("a refusal at 61 s with lo 120 s: lo=%d conf=%d; want 120000 4", st.lo, st.conf)
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
	// Only lowers: a recovery later than hi agrees with it and keeps it.
	h = confidentEpisode(t, ModeShadow)
	h.success(next + 200*sec)
	if st := h.mustState(); st.hi != 180_000 || st.conf != 4 {
		t.Errorf("a recovery at 200 s with hi 180 s: hi=%d conf=%d; want 180000 4", st.hi, st.conf)
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
	p := quotasim.New(1, func(time.Time) time.Duration { return reset })
	run := func(episodes int) {
		for range episodes {
			var free time.Duration
			for now := h.clk.Now().Sub(epoch) + 5*time.Minute; ; now = max(now+sec, free) {
				if p.Call(h.at(now)) {
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
	// The edges: R > hi contradicts R <= hi, so a refusal exactly at hi
	// does; R <= lo contradicts R > lo, so a recovery exactly at lo does.
	// (Shadow keeps the existing 60 s cooldown, so the recovery at 120 s
	// is no trial's.)
	for _, tc := range []struct {
		name string
		mode Mode
		edge func(h *harness)
	}{
		{"throttle exactly at hi", ModeApply, func(h *harness) { h.throttle(next + 180*sec) }},
		{"success exactly at lo", ModeShadow, func(h *harness) { h.success(next + 120*sec) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := confidentEpisode(t, tc.mode)
			tc.edge(h)
			if st := h.mustState(); st.lo != 60_000 || st.hi != 3_600_000 || st.conf != 0 {
				t.Errorf("lo=%d hi=%d conf=%d; want 60000 3600000 0 (widened)", st.lo, st.hi, st.conf)
			}
			if s := h.l.Snapshot(); s.Contradictions != 1 {
				t.Errorf("Snapshot.Contradictions = %d, want 1", s.Contradictions)
			}
		})
	}
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
	// At the edges: "less than a second" out of order is concurrent
	// (README), a second or more is a nonincreasing timestamp, for a
	// success as for a throttle.
	for _, tc := range []struct {
		back     time.Duration
		outcome  pool.Outcome
		wantConf uint8
	}{
		{999 * time.Millisecond, pool.OutcomeThrottled, 3},
		{time.Second, pool.OutcomeThrottled, 0},
		{time.Second, pool.OutcomeSuccess, 0},
		{5 * time.Second, pool.OutcomeSuccess, 0},
	} {
		h := newHarness(t, ModeApply)
		h.becomeConfident(0)
		latest := 180 * sec
		if tc.outcome == pool.OutcomeSuccess {
			// A success counts inside an episode only.
			latest = 400 * sec
			h.throttle(latest)
		}
		ev := h.ev
		ev.Outcome, ev.At = tc.outcome, epoch.Add(latest-tc.back)
		h.l.Observe(ev)
		if st := h.mustState(); st.conf != tc.wantConf {
			t.Errorf("%v %v out of order: confidence %d, want %d", tc.outcome, tc.back, st.conf, tc.wantConf)
		}
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
	// Nor does a later, smaller hint lower it: advice of 30 s 10 s in
	// keeps the 7200.5 s the first set.
	d, ok = h.throttleHint(time.Hour+10*sec, 30)
	if want := 7190500 * time.Millisecond; !ok || d != want {
		t.Errorf("a later throttle with smaller advice got %v, %v; want %v", d, ok, want)
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
			p := quotasim.New(5, func(time.Time) time.Duration { return reset })
			const span = 2 * 24 * time.Hour
			var free time.Duration
			wastedBeforeLastDay := -1
			for now := time.Duration(0); now < span; now = max(now+250*time.Millisecond, free) {
				if wastedBeforeLastDay < 0 && now >= span-24*time.Hour {
					wastedBeforeLastDay = p.Wasted
				}
				if p.Call(h.at(now)) {
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
			if late, most := p.Wasted-wastedBeforeLastDay, int(24*time.Hour/(refreshMS*time.Millisecond)); late > most {
				t.Errorf("%d wasted throttles on the last day, after convergence; want at most %d", late, most)
			}
			t.Logf("R=%v: (%d, %d] ms after %d steps, %d wasted throttles", reset, st.lo, st.hi, st.steps, p.Wasted)
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

// A long call sent before the throttle and ending after the cooldown (a
// generation in flight through the whole episode) never waited: its
// success is no recovery, whenever it ends. Its send time tells.
func TestSuccessSentBeforeTheThrottleIsNotARecovery(t *testing.T) {
	h := newHarness(t, ModeApply)
	h.throttle(sec)
	ev := h.event(pool.OutcomeSuccess, 90*sec)
	ev.Sent = epoch // a second before the throttle
	h.l.Observe(ev)
	if st := h.mustState(); st.hi != maxBoundMS || st.anchor == 0 {
		t.Errorf("a success sent before the throttle taught: hi=%d anchor=%d, want hi %d and the episode open", st.hi, st.anchor, maxBoundMS)
	}
	ev = h.event(pool.OutcomeSuccess, 91*sec)
	ev.Sent = epoch.Add(90 * sec) // sent after the 60 s cooldown: genuine
	h.l.Observe(ev)
	if st := h.mustState(); st.hi != 90_000 {
		t.Errorf("a genuine recovery: hi=%d, want 90000", st.hi)
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
		p := quotasim.New(3, func(time.Time) time.Duration { return 150 * sec })
		now, free := time.Duration(0), time.Duration(0)
		for now < 6*time.Hour {
			now = max(now+sec, free)
			ev := h.event(pool.OutcomeSuccess, now)
			if p.Call(ev.At) {
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

// confidentEpisode is a harness whose state learned (120 s, 180 s] and
// whose next episode began with a throttle at next.
func confidentEpisode(t *testing.T, mode Mode) *harness {
	t.Helper()
	h := newHarness(t, mode)
	h.becomeConfident(0)
	h.throttle(next)
	return h
}

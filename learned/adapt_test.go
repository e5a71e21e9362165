package learned

import (
	"math"
	"testing"
	"time"

	"github.com/rotorhq/rotor/pool"
)

func withAdapt() harnessOption { return func(c *Config) { c.Adapt = true } }

// provenEpisode feeds one episode under the existing 60 s cooldown with a
// reset between 60 and 120 s: throttles at start and start+60 s, a prompt
// recovery at start+120 s. Adapt then holds a proven wait of 120 s.
func (h *harness) provenEpisode(start time.Duration) {
	h.t.Helper()
	if d, ok := h.throttle(start); ok {
		h.t.Fatalf("a learned wait %v with nothing proven", d)
	}
	if d, ok := h.throttle(start + 60*sec); ok {
		h.t.Fatalf("a learned wait %v before any recovery", d)
	}
	h.success(start + 120*sec)
	if st := h.mustState(); st.good != 120_000 {
		h.t.Fatalf("proven wait %d ms, want 120000", st.good)
	}
}

// TestAdaptAppliesProvenWait: with adapt on, the wait a recovery proved is
// applied from the next episode on.
func TestAdaptAppliesProvenWait(t *testing.T) {
	h := newHarness(t, ModeApply, withAdapt())
	h.provenEpisode(0)
	if d, ok := h.throttle(next); !ok || d != 120*sec {
		t.Errorf("next episode = %v, %v; want the proven 2m0s", d, ok)
	}
}

// TestAdaptShorterNaturalRetryAfterHold: once the proven wait has held,
// an episode lets the next natural request through earlier; a refusal
// sends the one after at the proven wait again, and nothing else changes
// (the learner answers durations only).
func TestAdaptShorterNaturalRetryAfterHold(t *testing.T) {
	h := newHarness(t, ModeApply, withAdapt())
	h.provenEpisode(0)
	start := next
	var shorter time.Duration
	for i := range 8 {
		d, ok := h.throttle(start)
		if !ok {
			t.Fatalf("episode %d: no learned wait", i)
		}
		if d < 120*sec {
			shorter = d
			break
		}
		h.success(start + d)
		start += d + 5*time.Minute
	}
	if shorter == 0 {
		t.Fatal("the proven wait never gave way to a shorter natural retry")
	}
	d, ok := h.throttle(start + shorter)
	if !ok || start+shorter+d != start+120*sec {
		t.Errorf("after the shorter retry was refused: %v, %v; want the rest of the proven wait", d, ok)
	}
}

// TestAdaptNeverBelowTrustedHint: trusted advice stays a hard minimum with
// adapt on, at the first throttle and at a refused retry, above 3,600 s
// too.
func TestAdaptNeverBelowTrustedHint(t *testing.T) {
	h := newHarness(t, ModeApply, withAdapt(), withMaxSeconds(10_000))
	h.provenEpisode(0)
	if d, ok := h.throttleHint(next, 500); !ok || d < 500*sec {
		t.Errorf("with advice 500 s: %v, %v", d, ok)
	}
	if d, ok := h.throttleHint(next+10*time.Minute, 5000); !ok || d < 5000*sec {
		t.Errorf("with advice 5000 s: %v, %v", d, ok)
	}
}

// TestAdaptBoundedByModelCooldownCap: every adapt wait is capped by
// MODEL_COOLDOWN_MAX_SECONDS.
func TestAdaptBoundedByModelCooldownCap(t *testing.T) {
	h := newHarness(t, ModeApply, withAdapt(), withMaxSeconds(100))
	h.provenEpisode(0)
	if d, ok := h.throttle(next); !ok || d > 100*sec {
		t.Errorf("capped at 100 s: %v, %v", d, ok)
	}
}

// TestAdaptStepBudgetRenewsHourly: shorter retries are trial steps, at
// most 12 per state; with adapt the budget renews an hour after it last
// did, instead of lasting the state's seven days.
func TestAdaptStepBudgetRenewsHourly(t *testing.T) {
	const t0 = int64(1_767_225_600_000)
	st := newState()
	st.good, st.hold, st.steps, st.budgetAt = 100_000, 255, MaxTrialSteps, t0
	o := observation{throttle: true, at: t0 + 30*60_000, hint: -1, existing: 60_000}
	st.anchor = o.at
	if w, trial, ok := st.adaptTarget(o); !ok || trial || w != st.good {
		t.Errorf("budget spent: %d, trial %v, %v; want the proven wait, no trial", w, trial, ok)
	}
	o.at = t0 + 60*60_000
	st.anchor = o.at
	w, trial, ok := st.adaptTarget(o)
	if !ok || !trial || w >= st.good || st.steps != 1 || st.budgetAt != o.at {
		t.Errorf("an hour on: %d, trial %v, %v, steps %d; want a shorter trial, the budget renewed", w, trial, ok, st.steps)
	}
}

// TestAdaptKeepsStorageBounds: adapt changes no storage bound: 1,024
// records, seven days from creation, opaque digests only.
func TestAdaptKeepsStorageBounds(t *testing.T) {
	h := newHarness(t, ModeApply, withAdapt())
	checkStoreHoldsAtMostCapacity(t, h)
	h2 := newHarness(t, ModeApply, withAdapt())
	h2.provenEpisode(0)
	h2.throttle(Retention - time.Hour)
	h2.at(Retention)
	if _, ok := h2.state(); ok {
		t.Error("adapt state readable 7 days after creation")
	}
	ev := h2.event(pool.OutcomeThrottled, Retention+time.Hour)
	ev.Identity = "decide-mini" // a name, not a digest: never stored
	h2.l.Observe(ev)
	if _, ok, _ := h2.store.Get(t.Context(), ev.Identity, h2.clk.Now()); ok {
		t.Error("a non-digest identity was stored")
	}
}

// TestAdaptOffStoresVersion1: with adapt off nothing of adapt is stored
// and the record is the version-1 encoding it always was; with it on, a
// version-2 record round-trips and detects a flipped bit.
func TestAdaptOffStoresVersion1(t *testing.T) {
	h := newHarness(t, ModeApply)
	h.becomeConfident(0)
	rec, _, _ := h.store.Get(t.Context(), h.ev.Identity, h.clk.Now())
	if rec.State[0] != stateVersion || len(rec.State) != stateSize {
		t.Errorf("adapt off stored version %d, %d bytes; want %d, %d", rec.State[0], len(rec.State), stateVersion, stateSize)
	}
	st := state{lo: 61_000, hi: 180_500, conf: 3, steps: 4, last: 1_767_225_780_000, anchor: 1_767_225_600_000,
		until: 1_767_225_840_000, good: 120_000, floor: 90_000, high: 600_000, budgetAt: 1_767_225_000_000,
		fails: 1, hold: 2, push: 1, aflags: flagExplored | flagLastReturn, fage: 3, backoff: 1}
	b := st.encode()
	if b[0] != adaptVersion || len(b) != adaptSize {
		t.Fatalf("adapt state: version %d, %d bytes", b[0], len(b))
	}
	checkRoundTripAndFlips(t, st)
}

// FuzzAdaptTransitions drives a learner with adapt on through arbitrary
// throttles, recoveries and advice: it never panics, every stored state
// decodes and keeps its invariants (bounds, at most 12 steps), and no
// applied wait is below trusted advice, above the cap or under a second.
func FuzzAdaptTransitions(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 60, 0, 1, 60, 0, 0, 200, 0, 0, 120, 0})
	f.Add([]byte{2, 10, 250, 0, 0, 0, 1, 255, 0, 0, 1, 0, 2, 0, 9, 1, 3, 0})
	f.Add([]byte{0, 1, 0, 1, 1, 0, 0, 30, 0, 1, 40, 0, 0, 200, 0, 0, 50, 0, 1, 70, 0})
	const capSeconds = 1800
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 3*64 {
			ops = ops[:3*64] // keep each execution cheap
		}
		h := newHarness(t, ModeApply, withAdapt(), withMaxSeconds(capSeconds))
		at := time.Duration(0)
		for i := 0; i+2 < len(ops); i += 3 {
			kind, step, hint := ops[i]%4, time.Duration(ops[i+1])*sec/2, float64(ops[i+2])*15
			at += step
			switch kind {
			case 0, 3:
				d, ok := h.throttle(at)
				checkAdaptWait(t, d, ok, -1, capSeconds)
			case 1:
				h.success(at)
			case 2:
				d, ok := h.throttleHint(at, hint)
				checkAdaptWait(t, d, ok, hint, capSeconds)
			}
			if st, ok := h.state(); ok && !st.valid() {
				t.Fatalf("op %d: invalid state %+v", i/3, st)
			}
		}
	})
}

func checkAdaptWait(t *testing.T, d time.Duration, ok bool, hint float64, capSeconds int64) {
	t.Helper()
	if !ok {
		return
	}
	if d < time.Second || d > time.Duration(capSeconds)*time.Second {
		t.Fatalf("wait %v outside 1 s .. %d s", d, capSeconds)
	}
	if hint >= 0 && d.Seconds() < math.Min(hint, float64(capSeconds)) {
		t.Fatalf("wait %v below trusted advice %v s", d, hint)
	}
}

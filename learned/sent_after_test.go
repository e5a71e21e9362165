package learned

import (
	"testing"
	"time"

	"github.com/rotorhq/rotor/pool"
)

// TestThrottleSentAfterRecoveryOpensAnEpisode: a throttle of a call sent
// after the previous episode's recovery is the next episode's first
// natural throttle, even when it comes less than a second after that
// recovery (the quota's last allowed call, then the next call refused at
// once: the usual way an exhaustion begins). The elapsed waits of that
// episode are measured from it.
func TestThrottleSentAfterRecoveryOpensAnEpisode(t *testing.T) {
	h := newHarness(t, ModeShadow)
	sec := time.Second
	// Episode 1: throttled at 0, recovered at 200 s.
	h.throttle(0)
	h.success(200 * sec)
	// Episode 2: a call sent at 200.4 s is refused at 200.5 s; retries after
	// the existing 60 s cooldown are refused at 260.5 and 320.5; the one at
	// 380.5 s succeeds: the reset lies in (120 s, 180 s] after 200.5 s.
	ev := h.event(pool.OutcomeThrottled, 200500*time.Millisecond)
	ev.Sent = epoch.Add(200400 * time.Millisecond)
	h.l.Observe(ev)
	h.l.Suggest(ev)
	h.throttle(260500 * time.Millisecond)
	h.throttle(320500 * time.Millisecond)
	h.success(380500 * time.Millisecond)
	st := h.mustState()
	if st.lo != 120_000 || st.hi != 180_000 {
		t.Errorf("episode 2 learned (%d, %d] ms; want (120000, 180000]: its first throttle, 0.5 s after the recovery, was dropped", st.lo, st.hi)
	}
}
func TestSuccessSentAfterTheThrottleIsARecovery(t *testing.T) {
	h := newHarness(t, ModeShadow)
	sec := time.Second
	h.throttle(0) // existing cooldown: 60 s
	ev := h.event(pool.OutcomeSuccess, 10200*time.Millisecond)
	ev.Sent = epoch.Add(10 * sec) // sent 10 s after the throttle
	h.l.Observe(ev)
	st := h.mustState()
	if st.hi != 10_200 || st.anchor != 0 {
		t.Errorf("after a success sent 10 s after the throttle: hi=%d anchor=%d; want 10200 and the episode ended", st.hi, st.anchor)
	}
	// The quota runs out again at 70 s: a new episode, not a wait of 70 s
	// refused.
	h.throttle(70 * sec)
	if st := h.mustState(); st.lo >= 10_200 {
		t.Errorf("after the next exhaustion: lo=%d; a refused wait past the proven recovery was invented", st.lo)
	}
}

// TestThrottleSentAfterTheThrottleIsARefusedWait: likewise a throttle of a
// call sent after the episode's latest throttle, before the existing
// cooldown ran out, is a natural throttle: it raises the lower bound from
// its failed wait.
func TestThrottleSentAfterTheThrottleIsARefusedWait(t *testing.T) {
	h := newHarness(t, ModeShadow)
	h.throttle(0) // existing cooldown: 60 s
	ev := h.event(pool.OutcomeThrottled, 10200*time.Millisecond)
	ev.Sent = epoch.Add(10 * time.Second)
	h.l.Observe(ev)
	h.l.Suggest(ev)
	if st := h.mustState(); st.lo != 10_200 {
		t.Errorf("after a refusal 10.2 s into the episode: lo=%d, want 10200", st.lo)
	}
}

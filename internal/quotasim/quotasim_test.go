package quotasim

import (
	"testing"
	"time"
)

// A quota of two, then refusals until the hidden reset 90 s after the
// first refusal; each later refusal is wasted; the time a caller kept the
// credential cooling after the reset is idle.
func TestProviderHidesItsReset(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	p := New(2, func(time.Time) time.Duration { return 90 * time.Second })
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, step := range []struct {
		s    int
		want bool
	}{
		{0, true}, {1, true}, // the quota
		{2, false},  // the first refusal: the reset is at 92 s
		{60, false}, // wasted
		{91, false}, // wasted, one second early
		{100, true}, // after the reset: a full quota again
		{101, true},
		{102, false}, // the next episode's first refusal
	} {
		if got := p.Call(at(step.s)); got != step.want {
			t.Errorf("call at %d s = %v, want %v", step.s, got, step.want)
		}
		if step.s == 91 {
			p.Release = at(100) // the caller cooled it until 100 s
			if !p.ResetAt().Equal(at(92)) {
				t.Errorf("ResetAt() = %v, want the hidden reset at 92 s", p.ResetAt())
			}
		}
		if step.s == 101 && !p.ResetAt().IsZero() {
			t.Errorf("ResetAt() = %v while serving, want zero", p.ResetAt())
		}
	}
	if p.Wasted != 2 {
		t.Errorf("wasted %d, want 2", p.Wasted)
	}
	if p.Idle != 8*time.Second {
		t.Errorf("idle %v, want 8s (reset at 92 s, released at 100 s)", p.Idle)
	}
	// The second episode resets at 192 s; the caller would release at
	// 250 s, but the measurement ends at 200 s.
	p.Release = at(250)
	p.Finish(at(200))
	if p.Idle != 16*time.Second {
		t.Errorf("idle after Finish %v, want 16s", p.Idle)
	}
	// An episode whose reset lies after the end adds nothing.
	q := New(0, func(time.Time) time.Duration { return time.Hour })
	q.Call(t0)
	q.Release = at(7200)
	q.Finish(at(60))
	if q.Idle != 0 {
		t.Errorf("idle of an unfinished episode %v, want 0", q.Idle)
	}
}

// ByRun files each episode under its run: how many episodes in a row
// before it met the same reset (0 for the first and after a change),
// with its refusals after the first and its idle time.
func TestProviderSplitsByRun(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	resets := []time.Duration{60, 60, 60, 30, 30, 60, 60, 60, 60, 60, 60, 60, 60} // seconds, one per episode
	n := 0
	p := New(1, func(time.Time) time.Duration {
		if n == len(resets) {
			return time.Hour // an episode still open at the end
		}
		r := resets[n] * time.Second
		n++
		return r
	})
	now := t0
	for i, r := range resets {
		p.Call(now)                                                                     // the quota
		p.Call(now.Add(time.Second))                                                    // the first refusal: the reset is r later
		p.Call(now.Add(2 * time.Second))                                                // wasted
		p.Release = now.Add(time.Second + r*time.Second + time.Duration(i)*time.Second) // idle i s
		now = now.Add(time.Second + r*time.Second + time.Hour)
	}
	p.Call(now) // ends the last episode
	// Runs: 0 1 2 | 0 1 | 0 1 2 3 4 5 6 7 -> buckets 0:3, 1:3, 2:2, 3:1, 4:1, 5+:3.
	wantEnded := [Runs]int{3, 3, 2, 1, 1, 3}
	wantIdle := [Runs]time.Duration{0 + 3 + 5, 1 + 4 + 6, 2 + 7, 8, 9, 10 + 11 + 12}
	var ended, wasted int
	var idle time.Duration
	for b, e := range p.ByRun {
		if e.Ended != wantEnded[b] || e.Wasted != wantEnded[b] || e.Idle != wantIdle[b]*time.Second {
			t.Errorf("run %d: %+v, want %d ended, %d wasted, idle %v", b, e, wantEnded[b], wantEnded[b], wantIdle[b]*time.Second)
		}
		ended += e.Ended
		wasted += e.Wasted
		idle += e.Idle
	}
	if ended != len(resets) || wasted != p.Wasted || idle != p.Idle {
		t.Errorf("ByRun sums to %d ended, %d wasted, %v idle; want %d, %d, %v", ended, wasted, idle, len(resets), p.Wasted, p.Idle)
	}
	// The two changes: 60 s to 30 s (episode 3, idle 3 s), a fall to
	// half; 30 s to 60 s (episode 5, idle 5 s), a rise by half or more.
	wantChange := [Changes]Episodes{Fell: {1, 1, 3 * time.Second}, RoseByHalf: {1, 1, 5 * time.Second}}
	if p.ByChange != wantChange {
		t.Errorf("ByChange %+v, want %+v", p.ByChange, wantChange)
	}
	// An episode still open at the end is left out: its idle is unknown.
	before := p.ByRun
	p.Call(now.Add(time.Second)) // the quota was spent at now: the first refusal
	p.Call(now.Add(2 * time.Second))
	p.Finish(now.Add(3 * time.Second))
	if p.ByRun != before || p.Wasted != wasted+1 {
		t.Errorf("an open episode changed ByRun to %+v (Wasted %d); want it unchanged, Wasted %d", p.ByRun, p.Wasted, wasted+1)
	}
}

func TestChangeOf(t *testing.T) {
	for _, c := range []struct {
		last, r time.Duration
		want    int
	}{
		{100, 49, FellBelowHalf}, {100, 50, Fell}, {100, 99, Fell},
		{100, 101, Rose}, {100, 149, Rose}, {100, 150, RoseByHalf}, {100, 900, RoseByHalf},
	} {
		if got := changeOf(c.last*time.Second, c.r*time.Second); got != c.want {
			t.Errorf("%v s after %v s: %s, want %s", c.r, c.last, ChangeNames[got], ChangeNames[c.want])
		}
	}
}

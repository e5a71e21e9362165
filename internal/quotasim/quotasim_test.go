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

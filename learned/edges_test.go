package learned

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/pool"
)

// TestRecoveryAfterTheExistingCooldownIsLearned: the learner must know the
// cooldown the pool applies without it (valid advice, zero advice being
// 1 s, else the 60 s fallback; both bounded by MODEL_COOLDOWN_MAX_SECONDS),
// since a call the pool admits once that cooldown ran out is natural
// evidence: a success just after it lowers hi, a throttle just after it
// raises lo. Taking the cooldown for longer than the pool's would drop
// every such outcome as a straggler, and the scope would learn nothing.
func TestRecoveryAfterTheExistingCooldownIsLearned(t *testing.T) {
	for _, c := range []struct {
		name     string
		max      int64   // MODEL_COOLDOWN_MAX_SECONDS; 0 is the default
		hint     float64 // trusted advice in seconds; < 0 for none
		existing time.Duration
	}{
		{"fallback", 0, -1, 60 * sec},
		{"advice under the cap", 0, 20, 20 * sec},
		{"zero advice rests a second", 0, 0, sec},
		{"advice above the cap rests the cap", 30, 120, 30 * sec},
		{"fallback above the cap rests the cap", 30, -1, 30 * sec},
	} {
		for _, recovered := range []bool{true, false} {
			name := c.name + "/refused"
			if recovered {
				name = c.name + "/recovered"
			}
			t.Run(name, func(t *testing.T) {
				h := newHarness(t, ModeApply, withMaxSeconds(c.max))
				if c.hint >= 0 {
					h.throttleHint(0, c.hint)
				} else {
					h.throttle(0)
				}
				wait := c.existing + 2*sec // the pool's next natural call
				want := wait.Milliseconds()
				if recovered {
					h.success(wait)
					st := h.mustState()
					if st.hi != want || st.conf != 1 {
						t.Errorf("success %v after the throttle: hi=%d conf=%d; want %d 1", wait, st.hi, st.conf, want)
					}
				} else {
					h.throttle(wait)
					st := h.mustState()
					if st.lo != want || st.conf != 1 {
						t.Errorf("throttle %v after the first: lo=%d conf=%d; want %d 1", wait, st.lo, st.conf, want)
					}
				}
			})
		}
	}
}

// TestThrottlesOfTheSameInstantSpendOneStep: calls refused in the same
// millisecond (concurrent requests on one credential, each reported by
// the pool) are one throttle: each gets the cooldown decided for the
// first, and together they spend one trial step of the twelve.
func TestThrottlesOfTheSameInstantSpendOneStep(t *testing.T) {
	h := newHarness(t, ModeApply)
	h.becomeConfident(0)
	d0, ok := h.throttle(next)
	if !ok {
		t.Fatal("no trial")
	}
	for i := range 3 {
		if d, ok := h.throttle(next); !ok || d != d0 {
			t.Errorf("throttle %d of the same instant: %v, %v; want %v, true", i+2, d, ok, d0)
		}
	}
	if st := h.mustState(); st.steps != 1 {
		t.Errorf("four throttles of one instant spent %d steps, want 1", st.steps)
	}
	if s := h.l.Snapshot(); s.TrialSteps != 1 {
		t.Errorf("Snapshot.TrialSteps = %d, want 1", s.TrialSteps)
	}
}

// TestShadowBucketLabelSharesNothingWithTheIdentity: the shadow report's
// bucket is an opaque digest of the identity, not a piece of it, so that a
// log line cannot be joined to a stored record; it is stable for one
// identity and differs between identities.
func TestShadowBucketLabelSharesNothingWithTheIdentity(t *testing.T) {
	label := func(t *testing.T, ev pool.LearnEvent) (string, string) {
		h := newHarness(t, ModeShadow)
		h.ev = ev
		h.becomeConfident(0)
		h.throttle(next)
		logs := h.logs.String()
		lines := h.logs.Lines("learned cooldown suggestion")
		if len(lines) == 0 {
			t.Fatal("no shadow report")
		}
		var got string
		for _, line := range lines {
			_, after, ok := strings.Cut(line, "bucket=")
			if !ok {
				t.Fatalf("shadow report without a bucket: %q", line)
			}
			b, _, _ := strings.Cut(after, " ")
			if got != "" && b != got {
				t.Fatalf("bucket label changed within one identity: %q, then %q", got, b)
			}
			got = b
		}
		return got, logs
	}
	a := pool.LearnEvent{Provider: "api", Model: "decide-mini", Identity: identity("key-a", "api", "decide-mini", "")}
	b := a
	b.Identity = identity("key-b", "api", "decide-mini", "")
	la, logs := label(t, a)
	lb, _ := label(t, b)
	if la == lb {
		t.Errorf("two identities share the bucket label %q", la)
	}
	const window = 12 // hex characters: any piece long enough to join on
	for i := 0; i+window <= len(a.Identity); i++ {
		if piece := a.Identity[i : i+window]; strings.Contains(logs, piece) {
			t.Fatalf("the shadow log holds %q, a piece of the stored identity", piece)
		}
	}
}

// TestSmallerLaterAdviceDoesNotLowerTheMinimum: trusted advice is a hard
// minimum for the rest of its episode. A later counted throttle of the
// same episode (a call sent during the cooldown, by the legacy first-key
// fallback or another process) whose own advice is shorter does not lower
// it, and a trial it would have allowed spends no step.
func TestSmallerLaterAdviceDoesNotLowerTheMinimum(t *testing.T) {
	h := newHarness(t, ModeApply, withMaxSeconds(86400))
	h.becomeConfident(0) // (120, 180] s: a trial would end 150 s in
	if d, ok := h.throttleHint(time.Hour, 400); !ok || d != 400*sec {
		t.Fatalf("Suggest with 400 s advice = %v, %v; want 400s, true", d, ok)
	}
	ev := h.event(pool.OutcomeThrottled, time.Hour+11*sec)
	ev.Sent = epoch.Add(time.Hour + 10*sec)
	ev.RetryAfter, ev.HasRetryAfter = 30, true
	h.l.Observe(ev)
	d, ok := h.l.Suggest(ev)
	if want := 389 * sec; !ok || d != want {
		t.Errorf("a later throttle with 30 s advice got %v, %v; want the first advice's %v", d, ok, want)
	}
	if st := h.mustState(); st.steps != 0 {
		t.Errorf("advice-bound cooldowns spent %d steps", st.steps)
	}
}

// TestMemoryStoreKeepsReclaimingAsRecordsExpire: writes reclaim expired
// records, not only the first to expire: a full store whose records expire
// one after another takes a new record in each one's place.
func TestMemoryStoreKeepsReclaimingAsRecordsExpire(t *testing.T) {
	const n = 3
	day := 24 * time.Hour
	m := NewMemoryStore(n)
	ctx := context.Background()
	id := func(i int) string { return identity("k", "api", "m", string(rune('a'+i))) }
	for i := range n { // created a day apart
		if _, err := m.Put(ctx, Record{ID: id(i), State: []byte("x")}, 0, epoch.Add(time.Duration(i)*day)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n { // each expires in turn; a new scope takes its place
		now := epoch.Add(Retention + time.Duration(i)*day + time.Minute)
		if _, err := m.Put(ctx, Record{ID: id(n + i), State: []byte("y")}, 0, now); err != nil {
			t.Fatalf("day %d after record %d expired: Put = %v, want it stored in its place", 7+i, i, err)
		}
		if got := m.Len(now); got != n {
			t.Errorf("day %d: %d live records, want %d", 7+i, got, n)
		}
	}
}

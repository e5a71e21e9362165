package learned

import (
	"testing"
	"time"

	"github.com/rotorhq/rotor/pool"
)

// TestSiblingMemoriesExpire: the sibling memories (falls, rises,
// climbs, checks) hold credential identities and times from learned
// state; like the state they must not outlive Retention. Drive two
// credentials until a fall and refusals are remembered, let eight days
// pass (every learned record has expired), and have a third credential
// of the same scope throttle and recover: nothing from before may remain.
func TestSiblingMemoriesExpire(t *testing.T) {
	b := pool.LearnEvent{Provider: "api", Model: "decide-mini", Identity: identity("key-b", "api", "decide-mini", "")}
	h, a, at := learnTwo(t, b)
	h.ev = a
	at, _ = h.drive(at, 3, steadyReset(100*sec))
	old := h.clk.Now().UnixMilli()
	count := func() (n int) {
		h.l.fallMu.Lock()
		for _, f := range h.l.falls {
			if f.at <= old {
				n++
			}
		}
		h.l.fallMu.Unlock()
		for _, se := range []*siblingEvents{&h.l.rises, &h.l.climbs, &h.l.checks, &h.l.starts} {
			se.mu.Lock()
			for _, rs := range se.m {
				for _, r := range rs {
					if r.at <= old {
						n++
					}
				}
			}
			se.mu.Unlock()
		}
		return n
	}
	if count() == 0 {
		t.Fatal("nothing remembered: the test shows nothing")
	}
	at += 8 * 24 * time.Hour
	h.at(at)
	h.ev = a
	if _, ok := h.state(); ok {
		t.Fatal("a's learned state outlived seven days")
	}
	h.ev = pool.LearnEvent{Provider: "api", Model: "decide-mini", Identity: identity("key-c", "api", "decide-mini", "")}
	h.drive(at, 1, steadyReset(100*sec))
	if n := count(); n > 0 {
		t.Errorf("%d sibling memories (with credential identities) outlive the seven-day expiry of the state they came from", n)
	}
}

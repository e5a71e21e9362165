package decisions

import (
	"slices"
	"sync"
	"testing"

	fp "github.com/rotorhq/rotor/internal/fakeprovider"
)

// upstreamCalls records the route's Upstream events.
type upstreamCalls struct {
	mu    sync.Mutex
	calls []string
}

func (u *upstreamCalls) Refused(string)          {}
func (u *upstreamCalls) Failover(string, string) {}
func (u *upstreamCalls) Cooldown(string, string) {}
func (u *upstreamCalls) Upstream(pool, credential, outcome string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.calls = append(u.calls, pool+"/"+credential+"/"+outcome)
}

// Every provider call is counted once, by the credential's name (never its
// key) and how it ended, failover included: rotor_upstream_calls_total.
func TestUpstreamCallsCountedByCredentialAndOutcome(t *testing.T) {
	m := &upstreamCalls{}
	h := newHarness(t, opts{metrics: m})
	h.fp.Script(h.keys["team-a"], "decide-mini", fp.Unauthorized())
	h.fp.Script(h.keys["team-b"], "decide-mini", fp.Status(500, fp.ErrorBody(500), nil))
	wantStatus(t, h.post(decision("api/decide-mini")), 500, "")
	wantStatus(t, h.post(decision("api/decide-mini")), 200, "")
	m.mu.Lock()
	defer m.mu.Unlock()
	want := []string{"api/team-a/auth", "api/team-b/error", "api/team-b/ok"}
	if !slices.Equal(m.calls, want) {
		t.Errorf("upstream calls %q, want %q", m.calls, want)
	}
}

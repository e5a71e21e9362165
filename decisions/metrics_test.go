package decisions

import (
	"slices"
	"sync"
	"testing"
	"time"

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

// refusals records the route's Refused reasons.
type refusals struct {
	upstreamCalls
	reasons []string
}

func (r *refusals) Refused(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reasons = append(r.reasons, reason)
}

// A refusal is counted under the code its answer carries
// (rotor_refusals_total): a body without a model, or with a number for
// it, answers invalid_model_prefix and was counted as invalid_json.
func TestRefusalsCountedUnderTheAnswersCode(t *testing.T) {
	m := &refusals{}
	h := newHarness(t, opts{metrics: m})
	wantStatus(t, h.post(`{"input":"no model"}`), 400, "invalid_model_prefix")
	wantStatus(t, h.post(`{"model":7}`), 400, "invalid_model_prefix")
	wantStatus(t, h.post(`{"model":"api/decide-mini","model":"x"}`), 400, "invalid_json")
	wantStatus(t, h.post(`{"model":"api/decide\u0000mini"}`), 404, "model_not_available")
	m.mu.Lock()
	defer m.mu.Unlock()
	want := []string{"invalid_model_prefix", "invalid_model_prefix", "invalid_json", "model_not_available"}
	if !slices.Equal(m.reasons, want) {
		t.Errorf("refusals %q, want %q", m.reasons, want)
	}
}

// failovers records the route's Failover events.
type failovers struct {
	upstreamCalls
	moves []string
}

func (f *failovers) Failover(pool, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.moves = append(f.moves, pool+"/"+reason)
}

// rotor_failovers_total counts moves to another credential within a
// request (README, Metrics): not a request that waits for the same
// credential after its 429, nor the last rejection before the request
// ends.
func TestFailoversCountMovesToAnotherCredential(t *testing.T) {
	for _, tt := range []struct {
		name   string
		creds  []cred
		script func(h *harness)
		status int
		wait   bool // the request waits out a 5 s cooldown
		want   []string
	}{
		{"rate limited, then a sibling serves", defaultCreds(), func(h *harness) {
			h.fp.Script(h.keys["team-a"], "decide-mini", fp.RateLimited("5"))
		}, 200, false, []string{"api/rate_limited"}},
		{"rate limited, then the same credential after the wait", defaultCreds()[:1], func(h *harness) {
			h.fp.Script(h.keys["team-a"], "decide-mini", fp.RateLimited("5"))
		}, 200, true, nil},
		{"every credential rejected", defaultCreds(), func(h *harness) {
			h.fp.Script(h.keys["team-a"], "decide-mini", fp.Unauthorized())
			h.fp.Script(h.keys["team-b"], "decide-mini", fp.Unauthorized())
		}, 503, false, []string{"api/auth"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &failovers{}
			h := newHarness(t, opts{creds: tt.creds, modelCooldown: true, metrics: m})
			tt.script(h)
			done := make(chan reply, 1)
			go func() { done <- h.post(decision("api/decide-mini")) }()
			if tt.wait {
				h.waitTimers(1)
				h.clk.Advance(5 * time.Second)
			}
			r := <-done
			wantStatus(t, r, tt.status, "")
			m.mu.Lock()
			defer m.mu.Unlock()
			if !slices.Equal(m.moves, tt.want) {
				t.Errorf("failovers %q, want %q", m.moves, tt.want)
			}
		})
	}
}

// cooldowns records the route's Cooldown events.
type cooldowns struct {
	upstreamCalls
	classes []string
}

func (c *cooldowns) Cooldown(pool, class string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.classes = append(c.classes, pool+"/"+class)
}

// rotor_cooldowns_total counts cooldown evidence (README, Metrics): every
// 429 is throttle evidence, and a 401, at inference or at a catalog
// fetch, is auth evidence; a 403 (an endpoint or model permission denial)
// is not.
func TestCooldownsCountOnlyCooldownEvidence(t *testing.T) {
	for _, tt := range []struct {
		name   string
		script func(h *harness)
		want   []string
	}{
		{"401 at inference", func(h *harness) { h.fp.Script(h.keys["team-a"], "", fp.Unauthorized()) }, []string{"api/auth"}},
		{"403 at inference", func(h *harness) { h.fp.Script(h.keys["team-a"], "", fp.Forbidden()) }, nil},
		{"401 at a catalog fetch", func(h *harness) { h.fp.ScriptCatalog(h.keys["team-a"], fp.Unauthorized()) }, []string{"api/auth"}},
		{"403 at a catalog fetch", func(h *harness) { h.fp.ScriptCatalog(h.keys["team-a"], fp.Forbidden()) }, nil},
		{"rate limited", func(h *harness) { h.fp.Script(h.keys["team-a"], "", fp.RateLimited("5")) }, []string{"api/throttle"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := &cooldowns{}
			h := newHarness(t, opts{modelCooldown: true, metrics: m})
			tt.script(h)
			r := h.post(decision("api/decide-mini"))
			wantStatus(t, r, 200, "")
			if got := r.header.Get("X-Rotor-Credential"); got != "team-b" {
				t.Fatalf("served by %q, want team-b", got)
			}
			m.mu.Lock()
			defer m.mu.Unlock()
			if !slices.Equal(m.classes, tt.want) {
				t.Errorf("cooldowns %q, want %q", m.classes, tt.want)
			}
		})
	}
}

package gateway

import (
	"net/http/httptest"
	"strings"
	"testing"
)

// A settled row adds each kind of its tokens under its own kind (a single
// token too) and its known cost in USD; a row of unknown cost counts as
// such and adds nothing to the cost. A provider call is counted under its
// credential's name and its outcome.
func TestSettledRowsAndUpstreamCallsReachTheirSeries(t *testing.T) {
	m := NewMetrics()
	n := func(v int64) *int64 { return &v }
	m.Settled(Usage{Operation: "chat.completions", Input: n(10), Output: n(1), Cached: n(4), Reasoning: n(2), CostMicros: n(2500)})
	m.Settled(Usage{Operation: "decisions", Input: n(7)})
	m.Upstream("api", "team-a", "ok")
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`rotor_tokens_total{kind="input",operation="chat.completions"} 10`,
		`rotor_tokens_total{kind="output",operation="chat.completions"} 1`,
		`rotor_tokens_total{kind="cached",operation="chat.completions"} 4`,
		`rotor_tokens_total{kind="reasoning",operation="chat.completions"} 2`,
		`rotor_cost_usd_total{operation="chat.completions"} 0.0025`,
		`rotor_tokens_total{kind="input",operation="decisions"} 7`,
		`rotor_cost_unknown_rows_total{operation="decisions"} 1`,
		`rotor_upstream_calls_total{credential="team-a",outcome="ok",pool="api"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, never := range []string{`rotor_cost_unknown_rows_total{operation="chat.completions"}`, `rotor_cost_usd_total{operation="decisions"}`} {
		if strings.Contains(body, never) {
			t.Errorf("/metrics has %s", never)
		}
	}
}

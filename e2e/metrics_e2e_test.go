package e2e

import (
	"context"
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rotorhq/rotor/internal/testutil/pgtest"
	"github.com/rotorhq/rotor/ledger"
	"github.com/rotorhq/rotor/ledger/pgledger"
)

// scrape parses a /metrics answer into its families.
func scrape(t *testing.T, body string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parse /metrics: %v\n%s", err, body)
	}
	return mfs
}

// sample sums the family's samples whose labels include want (nil when the
// family has none of them).
func sample(mfs map[string]*dto.MetricFamily, name string, want map[string]string) *float64 {
	mf, ok := mfs[name]
	if !ok {
		return nil
	}
	var sum float64
	found := false
next:
	for _, m := range mf.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		}
	}
	if !found {
		return nil
	}
	return &sum
}

// A running bridge's /metrics, after real traffic through the fake
// provider, passes promtool's lint rules and says what happened: the build,
// each provider call by credential name, tokens and known cost that add up
// to the ledger's rows, budgets with their unit in the name (no used
// sample while a cost budget fails closed), and the code of 401 and 403
// refusals. No provider key is ever in it.
//
// It runs on both engines: on PostgreSQL the tokens and cost series come
// from the same settlement hook (OnSettle) as on SQLite.
func TestMetricsLintAndUsageSeriesMatchTheLedger(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		e := newE2E(t)
		metricsMatchTheLedger(t, e, func() ledgerView { return readLedger(t, e.db()) })
	})
	t.Run("postgres", func(t *testing.T) {
		dbURL, _ := pgtest.Schema(t)
		e := newE2E(t)
		e.env = append(e.env, "ROTOR_DB="+dbURL)
		e.mustRun("ledger", "migrate")
		metricsMatchTheLedger(t, e, func() ledgerView { return readPGLedger(t, dbURL) })
	})
}

// readPGLedger reads the rows of the last day from a PostgreSQL ledger,
// and the totals budgets read, as readLedger does from a SQLite file.
func readPGLedger(t *testing.T, dbURL string) ledgerView {
	t.Helper()
	ctx := context.Background()
	s, err := pgledger.Open(ctx, dbURL, pgledger.Options{})
	if err != nil {
		t.Fatalf("open ledger: %v", err)
	}
	defer s.Close()
	var v ledgerView
	now := time.Now()
	if v.rows, err = s.Rows(ctx, now.Add(-24*time.Hour), now.Add(time.Hour), 0); err != nil {
		t.Fatalf("rows: %v", err)
	}
	if err := s.View(ctx, func(r ledger.WindowReader) error {
		var err error
		v.totals, err = r.Totals(ledger.Window{From: now.Add(-24 * time.Hour), To: now.Add(time.Hour)})
		return err
	}); err != nil {
		t.Fatalf("totals: %v", err)
	}
	return v
}

func metricsMatchTheLedger(t *testing.T, e *e2e, read func() ledgerView) {
	prov, keys := e.provider("")
	for _, k := range keys {
		prov.SetCatalog(k, "decide-mini", "gpt-4o-mini")
	}
	e.mustRun("pricing", "set", "gpt-4o-mini", "--input", "0.15", "--output", "0.60", "--cached-input", "0.075")
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	tok := e.token()
	for range 3 {
		if r := call(t, "POST", b.url+"/v1/decisions", tok, decideBody); r.status != 200 {
			t.Fatalf("decision: %d %s", r.status, r.body)
		}
	}
	for _, q := range []string{"Say hello.", "Name three colours of the rainbow, please."} {
		r := call(t, "POST", b.url+"/v1/chat/completions", tok, `{"model":"api/gpt-4o-mini","messages":[{"role":"user","content":"`+q+`"}]}`)
		if r.status != 200 {
			t.Fatalf("chat: %d %s", r.status, r.body)
		}
	}
	if r := call(t, "POST", b.url+"/v1/decisions", "wrong-token", decideBody); r.status != 401 {
		t.Fatalf("wrong token: %d", r.status)
	}
	if r := call(t, "POST", b.url+"/v1/decisions", tok, decideBody, "Origin", "https://evil.example"); r.status != 403 {
		t.Fatalf("foreign origin: %d", r.status)
	}
	// Added after the traffic: the decisions rows (cost unknown, as the
	// spec says) make the cost budget fail closed.
	e.mustRun("budget", "add", "--cost", "5", "--window", "24h", "--name", "spend")
	e.mustRun("budget", "add", "--tokens", "1000000", "--window", "24h", "--name", "tok")

	body := call(t, "GET", b.url+"/metrics", tok, "").body
	problems, err := promlint.New(strings.NewReader(body)).Lint()
	if err != nil {
		t.Fatalf("lint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	for name, key := range keys {
		if strings.Contains(body, key) {
			t.Errorf("/metrics holds %s's key", name)
		}
	}
	mfs := scrape(t, body)
	if v := sample(mfs, "rotor_build_info", nil); v == nil || *v != 1 {
		t.Errorf("rotor_build_info = %v, want 1", v)
	}
	if !regexp.MustCompile(`rotor_build_info\{goversion="go1\.[^"]+",revision="[^"]*",version="[^"]+"\} 1`).MatchString(body) {
		t.Errorf("rotor_build_info lacks its labels:\n%s", grepLines(body, "rotor_build_info"))
	}

	v := read()
	type sums struct{ input, output, cached, reasoning, cost float64 }
	want := map[string]*sums{}
	credOK := map[string]float64{}
	for _, r := range v.rows {
		if !r.Settled {
			t.Fatalf("row %s unsettled", r.RequestID)
		}
		s := want[r.Operation]
		if s == nil {
			s = &sums{}
			want[r.Operation] = s
		}
		s.input += float64(r.InputTokens.V)
		s.output += float64(r.OutputTokens.V)
		s.cached += float64(r.CachedInputTokens.V)
		s.reasoning += float64(r.ReasoningTokens.V)
		s.cost += float64(r.CostMicros.V) / 1e6
		credOK[r.Credential]++
	}
	if len(v.rows) != 5 || want["decisions"] == nil || want["chat.completions"] == nil {
		t.Fatalf("ledger rows: %+v", v.rows)
	}
	for op, s := range want {
		for kind, w := range map[string]float64{"input": s.input, "output": s.output, "cached": s.cached, "reasoning": s.reasoning} {
			got := sample(mfs, "rotor_tokens_total", map[string]string{"operation": op, "kind": kind})
			if w == 0 && got == nil {
				continue
			}
			if got == nil || *got != w {
				t.Errorf("rotor_tokens_total{operation=%q,kind=%q} = %v, want %v (the ledger's rows)", op, kind, got, w)
			}
		}
	}
	if want["decisions"].input == 0 || want["chat.completions"].cost == 0 {
		t.Fatalf("traffic left no tokens or no known cost: %+v %+v", want["decisions"], want["chat.completions"])
	}
	if got := sample(mfs, "rotor_cost_usd_total", map[string]string{"operation": "chat.completions"}); got == nil || math.Abs(*got-want["chat.completions"].cost) > 1e-9 {
		t.Errorf("rotor_cost_usd_total{operation=chat.completions} = %v, want %v", got, want["chat.completions"].cost)
	}
	if got := sample(mfs, "rotor_cost_usd_total", map[string]string{"operation": "decisions"}); got != nil {
		t.Errorf("decisions have a known cost on /metrics: %v (their cost is unknown)", *got)
	}
	if got := sample(mfs, "rotor_cost_unknown_rows_total", map[string]string{"operation": "decisions"}); got == nil || *got != 3 {
		t.Errorf("rotor_cost_unknown_rows_total{operation=decisions} = %v, want 3", got)
	}
	for cred, n := range credOK {
		if got := sample(mfs, "rotor_upstream_calls_total", map[string]string{"pool": "api", "credential": cred, "outcome": "ok"}); got == nil || *got != n {
			t.Errorf("rotor_upstream_calls_total{credential=%q,outcome=ok} = %v, want %v", cred, got, n)
		}
	}
	for _, c := range []struct {
		code, status string
		n            float64
	}{{"invalid_token", "401", 1}, {"origin_not_allowed", "403", 1}} {
		if got := sample(mfs, "rotor_requests_total", map[string]string{"server": "bridge", "code": c.code, "status": c.status}); got == nil || *got != c.n {
			t.Errorf("rotor_requests_total{code=%q,status=%q} = %v, want %v", c.code, c.status, got, c.n)
		}
	}
	if got := sample(mfs, "rotor_budget_used_usd", map[string]string{"name": "spend"}); got != nil {
		t.Errorf("fail-closed budget shows used %v USD; its used is unknown", *got)
	}
	for _, c := range []struct {
		name, budget string
		want         float64
	}{
		{"rotor_budget_limit_usd", "spend", 5},
		{"rotor_budget_unknown_rows", "spend", 3},
		{"rotor_budget_limit_tokens", "tok", 1e6},
		{"rotor_budget_used_tokens", "tok", float64(v.totals.Tokens)},
	} {
		if got := sample(mfs, c.name, map[string]string{"name": c.budget}); got == nil || *got != c.want {
			t.Errorf("%s{name=%q} = %v, want %v", c.name, c.budget, got, c.want)
		}
	}
	if got := sample(mfs, "rotor_budget_state", map[string]string{"name": "spend", "state": "fail-closed"}); got == nil || *got != 1 {
		t.Errorf("spend is not fail-closed on /metrics: %v", got)
	}

	// /v1/status says the same: a fail-closed budget's used and remaining
	// are null (unknown), as budget list --format json has them; the
	// tokens budget keeps its numbers.
	var st struct {
		Budgets []map[string]any `json:"budgets"`
	}
	r := call(t, "GET", b.url+"/v1/status", tok, "")
	if err := json.Unmarshal([]byte(r.body), &st); r.status != 200 || err != nil {
		t.Fatalf("/v1/status: %d %v %s", r.status, err, r.body)
	}
	for _, bs := range st.Budgets {
		switch bs["name"] {
		case "spend":
			if used, ok := bs["used"]; !ok || used != nil || bs["remaining"] != nil || bs["state"] != "fail-closed" {
				t.Errorf("/v1/status spend = %v, want used and remaining null while it fails closed", bs)
			}
		case "tok":
			if bs["used"] != float64(v.totals.Tokens) {
				t.Errorf("/v1/status tok = %v, want used %d", bs, v.totals.Tokens)
			}
		}
	}
	list := e.mustRun("budget", "list", "--format", "json").stdout
	if !strings.Contains(list, `"used": null`) && !strings.Contains(list, `"used":null`) {
		t.Errorf("budget list --format json: %s; want spend's used null, as /v1/status has it", list)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

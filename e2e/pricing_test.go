package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/ledger"
)

// On the built binary: pricing import reads LiteLLM's price file, list
// shows it, a cut stream's row of unknown usage is resolved by ledger
// settle at the price in force, and the report shows its cost known, beside
// a Decisions row of unknown cost.
func TestPricingImportSettleAndReport(t *testing.T) {
	e := newE2E(t)
	e.mustRun("init")
	file := filepath.Join("..", "cmd", "rotor", "testdata", "model_prices_and_context_window.json")
	out := e.mustRun("pricing", "import", file).stdout
	if !strings.Contains(out, "imported 3 prices") || !strings.Contains(out, "skipped 6 entries") {
		t.Errorf("import printed %q", out)
	}
	e.mustRun("pricing", "set", "o3", "--input", "2", "--output", "8")
	rows := parseJSON(t, e.mustRun("pricing", "list", "--format", "json").stdout)
	if len(rows) != 3 || rows[0]["model"] != "gpt-4.1-mini" || rows[0]["cached_input_usd_per_1m"] != 0.1 || rows[1]["source"] != "set" ||
		rows[2]["cached_input_usd_per_1m"] != nil || rows[2]["source"] != "model_prices_and_context_window.json" {
		t.Errorf("pricing list = %v", rows)
	}
	if r := e.run("pricing", "set", "o3", "--input", "0.1234567", "--output", "1"); r.code != 2 || !strings.Contains(r.stderr, "--input") {
		t.Errorf("7 decimals: exit %d, stderr %q; want 2 naming --input", r.code, r.stderr)
	}

	now := time.Now().UTC()
	s, err := ledger.Open(context.Background(), e.db(), ledger.Options{Clock: fixedClock(now.Add(-time.Hour))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, r := range []ledger.Reservation{
		{RequestID: "cut", Operation: "chat.completions", Model: "o3", Expires: now},
		{RequestID: "dec", Operation: "decisions", Model: "o3", Expires: now},
	} {
		if err := s.Reserve(ctx, r, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Settle(ctx, ledger.Settlement{RequestID: "cut", Model: "o3", Status: 200, ErrorCode: "upstream_stream_cut"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(ctx, ledger.Settlement{RequestID: "dec", Model: "o3", Status: 200,
		InputTokens: ledger.Known(7), OutputTokens: ledger.Known(3), TotalTokens: ledger.Known(10)}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	rep := parseJSON(t, e.mustRun("ledger", "report", "--format", "json").stdout)
	if len(rep) != 2 || rep[0]["operation"] != "chat.completions" || rep[0]["total_tokens"] != nil || rep[0]["unknown_token_rows"] != float64(1) ||
		rep[0]["errors"] != float64(1) {
		t.Fatalf("report before settle = %v", rep)
	}
	// $2 x 1000 + $8 x 500 per 1M = 6000 micro-USD = $0.006.
	if out := e.mustRun("ledger", "settle", "cut", "--input", "1000", "--output", "500").stdout; !strings.Contains(out, "settled cut") {
		t.Errorf("settle printed %q", out)
	}
	rep = parseJSON(t, e.mustRun("ledger", "report", "--format", "json").stdout)
	chat, dec := rep[0], rep[1]
	if chat["cost_usd"] != 0.006 || chat["known_cost_usd"] != 0.006 || chat["unknown_cost_rows"] != float64(0) || chat["total_tokens"] != float64(1500) {
		t.Errorf("chat after settle = %v, want cost 0.006 and 1500 tokens known", chat)
	}
	if dec["cost_usd"] != nil || dec["known_cost_usd"] != float64(0) || dec["unknown_cost_rows"] != float64(1) {
		t.Errorf("decisions = %v, want cost null, 1 unknown cost row", dec)
	}
	if r := e.run("ledger", "settle", "cut", "--input", "1", "--output", "1"); r.code != 2 || !strings.Contains(r.stderr, "already known") {
		t.Errorf("settle a known row: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := e.run("ledger", "settle", "cut", "--input", "1"); r.code != 2 || !strings.Contains(r.stderr, "--output") {
		t.Errorf("settle without --output: exit %d, stderr %q", r.code, r.stderr)
	}
}

// On a running bridge, while a cost budget exists: a chat request for a
// model without a price gets 403 policy_blocked naming the budget before
// any discovery; a price set from the CLI binds the next request, which is
// admitted (its answer is then whatever discovery finds); Decisions stays
// 403 policy_blocked.
func TestCostBudgetRefusesUnpricedBeforeDiscoveryAndAdmitsPriced(t *testing.T) {
	e := newE2E(t)
	prov, _ := e.provider("")
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	tok := e.token()
	e.mustRun("budget", "add", "--cost", "5", "--window", "day", "--name", "spend")
	chat := `{"model":"api/gpt-x","messages":[{"role":"user","content":"hi"}]}`
	before := len(prov.Requests())
	r := call(t, "POST", b.url+"/v1/chat/completions", tok, chat)
	if r.status != 403 || errCode(r.body) != "policy_blocked" || !strings.Contains(r.body, "spend") || !strings.Contains(r.body, "gpt-x") {
		t.Fatalf("unpriced model under a cost budget: %d %s, want 403 policy_blocked naming spend and gpt-x", r.status, r.body)
	}
	if n := len(prov.Requests()) - before; n != 0 {
		t.Errorf("the refused request reached the provider %d times, want none (refused before discovery)", n)
	}
	e.mustRun("pricing", "set", "gpt-x", "--input", "1", "--output", "2")
	if r := call(t, "POST", b.url+"/v1/chat/completions", tok, chat); r.status == 403 && errCode(r.body) == "policy_blocked" {
		t.Errorf("priced model under a cost budget: %d %s, want it admitted", r.status, r.body)
	}
	if r := call(t, "POST", b.url+"/v1/decisions", tok, decideBody); r.status != 403 || errCode(r.body) != "policy_blocked" {
		t.Errorf("decisions under a cost budget: %d %s, want 403 policy_blocked", r.status, r.body)
	}
}

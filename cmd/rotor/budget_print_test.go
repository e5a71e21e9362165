package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/ledger"
)

// budget add says what it did on stdout (added, or set with --replace),
// a cost limit in dollars with no unit word; the cost budget's Decisions
// warning goes to stderr. A name that exists without --replace exits 2
// saying to add it.
func TestBudgetAddPrintsAndRefusesATakenName(t *testing.T) {
	f, out, errOut := testFactory(t)
	for _, tc := range []struct {
		args           []string
		exit           int
		stdout, stderr string
	}{
		{[]string{"budget", "add", "--requests", "10", "--window", "24h", "--name", "r"}, 0,
			"added budget r: at most 10 requests per", ""},
		{[]string{"budget", "add", "--requests", "10", "--window", "24h", "--name", "r"}, ExitUsage,
			"", `budget "r" already exists; add --replace`},
		{[]string{"budget", "add", "--requests", "12", "--window", "24h", "--name", "r", "--replace"}, 0,
			"set budget r: at most 12 requests per", ""},
		{[]string{"budget", "add", "--cost", "5", "--window", "day", "--name", "c"}, 0,
			"added budget c: at most $5 per", "warning: while a cost budget exists, Decisions requests are refused"},
	} {
		code := runCmd(t, f, out, errOut, tc.args...)
		if code != tc.exit {
			t.Errorf("%q: exit %d, want %d; stderr %q", tc.args, code, tc.exit, errOut)
		}
		if tc.stdout == "" && out.Len() != 0 || !strings.HasPrefix(out.String(), tc.stdout) {
			t.Errorf("%q: stdout %q, want it to start %q", tc.args, out, tc.stdout)
		}
		if tc.stderr == "" && errOut.Len() != 0 || !strings.Contains(errOut.String(), tc.stderr) {
			t.Errorf("%q: stderr %q, want %q", tc.args, errOut, tc.stderr)
		}
		if strings.Contains(out.String(), "warning") {
			t.Errorf("%q: a warning on stdout: %q", tc.args, out)
		}
	}
}

// budget list --format json: used and remaining in the budget's unit
// (micro_usd for cost), remaining = limit - used, both null while a cost
// budget fails closed over a row of unknown cost; a budget this rotor cannot
// read is a warning on stderr, never a line in the json.
func TestBudgetListJSON(t *testing.T) {
	ctx := context.Background()
	f, out, errOut := testFactory(t)
	store, err := f.LedgerOrCreate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	now := f.Clock.Now()
	for _, b := range []ledger.BudgetRecord{
		{Name: "r", Kind: "requests", Limit: 10, Window: "24h", CreatedAt: now},
		{Name: "c", Kind: "cost", Limit: 5_000_000, Window: "24h", CreatedAt: now},
		{Name: "odd", Kind: "requests", Limit: 10, Window: "fortnight", CreatedAt: now},
	} {
		if err := store.PutBudget(ctx, b, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Reserve(ctx, ledger.Reservation{RequestID: "q1", Operation: "chat", Pool: "api", Model: "unpriced", Client: "ci", Expires: now.Add(time.Minute)}, nil); err != nil {
		t.Fatal(err)
	}
	if err := store.Settle(ctx, ledger.Settlement{RequestID: "q1", Model: "unpriced", Status: 200, Attempts: 1,
		InputTokens: ledger.Known(10), OutputTokens: ledger.Known(1), TotalTokens: ledger.Known(11)}); err != nil {
		t.Fatal(err)
	}
	if code := runCmd(t, f, out, errOut, "budget", "list", "--format", "json"); code != 0 {
		t.Fatalf("budget list: exit %d: %s", code, errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("stdout is not json (%v): %s", err, out)
	}
	got := map[string]map[string]any{}
	for _, r := range rows {
		got[r["name"].(string)] = r
	}
	if r := got["r"]; r == nil || r["used"] != 1.0 || r["remaining"] != 9.0 || r["limit"] != 10.0 || r["unit"] != "requests" {
		t.Errorf("requests budget %v, want used 1, remaining 9 of 10 requests", r)
	}
	if c := got["c"]; c == nil || c["state"] != "fail-closed" || c["used"] != nil || c["remaining"] != nil || c["limit"] != 5e6 || c["unit"] != "micro_usd" {
		t.Errorf("cost budget %v, want fail-closed, used and remaining null, limit 5000000 micro_usd", c)
	}
	if _, ok := got["odd"]; ok || len(rows) != 2 {
		t.Errorf("json lists %d budgets (%v), want the two readable ones", len(rows), rows)
	}
	if !strings.Contains(errOut.String(), "warning:") || !strings.Contains(errOut.String(), "odd") {
		t.Errorf("stderr %q, want a warning naming the unreadable budget", errOut)
	}
}

package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/ledger"
)

// Issue 14, items 1, 8 and 9, as a user meets them.

// hugeUsageBody is the answer of a provider that lies about usage (issue
// 14, item 1): rotor adds the two into a total of about 2*10^18.
const hugeUsageBody = `{"id":"dec_1","decision":{"answer":true},"usage":{"input_tokens":999999999999999999,"output_tokens":999999999999999999}}`

func TestUsageOverflowCannotBrickLedgerThroughBridge(t *testing.T) {
	e := newE2E(t)
	prov, b, tok := advBridge(e, "", "")
	lie := fp.Status(200, hugeUsageBody, http.Header{"Content-Type": {"application/json"}})
	prov.Script("", "", lie, lie, lie, lie, lie)
	for i := range 5 {
		if r := advCall(t, "POST", b.url+"/v1/decisions", tok, decideBody); r.status != 200 {
			t.Fatalf("lying answer %d: %d %s", i, r.status, r.body)
		}
	}
	check := func(when string) {
		t.Helper()
		rows := parseJSON(t, e.mustRun("ledger", "report", "--by", "operation", "--format", "json").stdout)
		if len(rows) != 1 || rows[0]["total_tokens"] != nil || rows[0]["input_tokens"] != nil {
			t.Errorf("%s: report = %v, want the tokens unknown (null), never summed", when, rows)
		}
		if r := advCall(t, "POST", b.url+"/v1/decisions", tok, decideBody); r.status != 200 {
			t.Errorf("%s: a request after the lying answers: %d %s", when, r.status, r.body)
		}
	}
	e.mustRun("budget", "add", "--tokens", "1000000", "--window", "day", "--name", "daily")
	e.mustRun("bridge", "token", "create", "--label", "after-the-lie")
	check("bridge running")
	b.stop()
	b = e.start("bridge", "start", "--listen", "127.0.0.1:0")
	check("after a restart")
	list := parseJSON(t, e.mustRun("budget", "list", "--format", "json").stdout)
	if len(list) != 1 || list[0]["unknown_rows"] != float64(5) {
		t.Fatalf("budget list = %v, want the five lies counted as unknown", list)
	}
	if used, _ := list[0]["used"].(float64); used <= 0 || used > 1000 {
		t.Errorf("budget used = %v, want the few tokens of the three honest answers", list[0]["used"])
	}
}

// writeUnreadableRows writes, as an older rotor did, usage rows whose usage
// this rotor cannot read, into a new ledger at path.
func writeUnreadableRows(t *testing.T, path string, at time.Time, n int) {
	t.Helper()
	s, err := ledger.Open(context.Background(), path, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for i := range n {
		if _, err := db.Exec(`INSERT INTO usage (request_id, ts_ms, state, expires_ms, operation, model, status, attempts, input_tokens, output_tokens, total_tokens)
			VALUES (?, ?, 1, ?, 'decisions', 'decide-mini', 200, 1, ?, ?, ?)`, fmt.Sprint("old-", i), at.UnixMilli()+int64(i), at.UnixMilli()+60000,
			int64(999999999999999999), int64(999999999999999999), int64(8e18)); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLedgerReportSaysRowsSetAside(t *testing.T) {
	e := newE2E(t)
	if err := os.MkdirAll(e.home, 0o700); err != nil {
		t.Fatal(err)
	}
	// In a ledger that has folded nothing yet, so that the next write
	// folds them.
	writeUnreadableRows(t, e.db(), time.Now().Add(-time.Minute), 3)
	e.mustRun("budget", "add", "--requests", "100", "--window", "day") // folds, setting the rows aside
	r := e.mustRun("ledger", "report", "--format", "json")
	rows := parseJSON(t, r.stdout)
	if len(rows) != 1 || rows[0]["requests"] != float64(3) || rows[0]["total_tokens"] != nil {
		t.Errorf("report = %v, want 3 requests of unknown tokens", rows)
	}
	if !strings.Contains(r.stderr, "3 usage rows") || !strings.Contains(r.stderr, "set aside") {
		t.Errorf("report stderr %q does not say that 3 rows were set aside", r.stderr)
	}
	e.mustRun("bridge", "token", "create", "--label", "still-works")
}

func TestZeroByteLedgerRefusedExitOne(t *testing.T) {
	e := newE2E(t)
	e.mustRun("init")
	if err := os.WriteFile(e.db(), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"budget", "list"}, {"ledger", "report"}, {"budget", "add", "--requests", "5", "--window", "day"}} {
		r := e.run(args...)
		if r.code != 1 || !strings.Contains(r.stderr, e.db()) || !strings.Contains(r.stderr, "empty") {
			t.Errorf("rotor %s on a zero-byte ledger: exit %d, stderr %q; want exit 1 naming %s", strings.Join(args, " "), r.code, r.stderr, e.db())
		}
		if fi, err := os.Stat(e.db()); err != nil || fi.Size() != 0 {
			t.Fatalf("rotor %s re-created the ledger: %v %v", strings.Join(args, " "), fi, err)
		}
	}
}

func TestReportPrintsUnknownTokensNeverZero(t *testing.T) {
	e := newE2E(t)
	e.mustRun("init")
	now := time.Now().UTC()
	s, err := ledger.Open(context.Background(), e.db(), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res := func(id string) {
		if err := s.Reserve(ctx, ledger.Reservation{RequestID: id, Operation: "decisions", Model: "m", Expires: now.Add(time.Hour)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// 200: one answer with full usage, one with only a total; 502: no
	// usage; unsettled: a reservation.
	res("full")
	res("total-only")
	res("no-usage")
	res("open")
	for _, st := range []ledger.Settlement{
		{RequestID: "full", Model: "m", Status: 200, InputTokens: ledger.Known(7), OutputTokens: ledger.Known(3), TotalTokens: ledger.Known(10)},
		{RequestID: "total-only", Model: "m", Status: 200, TotalTokens: ledger.Known(5)},
		{RequestID: "no-usage", Model: "m", Status: 502},
	} {
		if err := s.Settle(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	want := map[string][3]any{ // input, output, total
		"200":       {nil, nil, float64(15)},
		"502":       {nil, nil, nil},
		"unsettled": {nil, nil, nil},
	}
	rows := parseJSON(t, e.mustRun("ledger", "report", "--by", "status", "--format", "json").stdout)
	if len(rows) != 3 {
		t.Fatalf("report = %v, want 3 status rows", rows)
	}
	for _, r := range rows {
		w := want[r["status"].(string)]
		if got := [3]any{r["input_tokens"], r["output_tokens"], r["total_tokens"]}; got != w {
			t.Errorf("status %s: input/output/total = %v, want %v (null when a row of the group has no count)", r["status"], got, w)
		}
	}
	for _, format := range []string{"csv", "table"} {
		out := e.mustRun("ledger", "report", "--by", "status", "--format", format).stdout
		for _, line := range strings.Split(out, "\n") {
			// input, output, total, cost, cached input and reasoning.
			if strings.Contains(line, "unsettled") && strings.Count(line, "unknown") != 6 {
				t.Errorf("%s: unsettled row %q, want its tokens and cost unknown", format, line)
			}
		}
	}
}

func TestBudgetListUsedUnknownWhileFailClosed(t *testing.T) {
	e := newE2E(t)
	e.mustRun("init")
	seedUsage(t, e.db(), time.Now().UTC().Add(-time.Minute), 2) // Decisions rows: cost unknown
	e.mustRun("budget", "add", "--cost", "12.5", "--window", "day", "--name", "spend")
	e.mustRun("budget", "add", "--tokens", "1000", "--window", "day", "--name", "toks")
	list := parseJSON(t, e.mustRun("budget", "list", "--format", "json").stdout)
	csvRows := parseCSV(t, e.mustRun("budget", "list", "--format", "csv").stdout)
	if len(list) != 2 || len(csvRows) != 2 {
		t.Fatalf("budget list: json %v, csv %v", list, csvRows)
	}
	spend, toks := list[0], list[1]
	if spend["state"] != "fail-closed" || spend["used"] != nil || spend["remaining"] != nil || spend["limit"] != float64(12_500_000) {
		t.Errorf("spend = %v, want fail-closed with used and remaining null", spend)
	}
	if toks["used"] != float64(20) || toks["remaining"] != float64(980) {
		t.Errorf("toks = %v, want used 20, remaining 980", toks)
	}
	// csv gives the integers json gives, in the unit column's unit.
	for i, c := range csvRows {
		for _, col := range []string{"limit", "used", "remaining"} {
			want := "unknown"
			if v, ok := list[i][col].(float64); ok {
				want = fmt.Sprint(int64(v))
			}
			if c[col] != want {
				t.Errorf("csv %s %s = %q, json says %v", c["name"], col, c[col], list[i][col])
			}
		}
	}
	if out := e.mustRun("budget", "list").stdout; !strings.Contains(out, "unknown") {
		t.Errorf("table does not print the fail-closed budget's used as unknown:\n%s", out)
	}
}

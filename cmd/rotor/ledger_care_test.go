package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/dburl"
	"github.com/rotorhq/rotor/internal/testutil/pgtest"
	"github.com/rotorhq/rotor/ledger"
	"github.com/rotorhq/rotor/ledger/pgledger"
)

// careLedger writes usage through the real ledger at the fake clock's
// times: three days of priced and Decisions rows, unknown tokens, an error,
// a reservation never settled. It returns the ledger's first day.
func careLedger(t *testing.T, f *Factory) (ledger.Ledger, time.Time) {
	t.Helper()
	ctx := context.Background()
	day0 := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	clk := clock.NewFake(day0)
	f.Clock = clk
	store, err := f.LedgerOrCreate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.PutPrices(ctx, []ledger.Price{{Model: "gpt-x", InputMicros: 2_500_000, OutputMicros: 10_000_000, Source: ledger.SourceSet, Updated: day0}}, false); err != nil {
		t.Fatal(err)
	}
	clk.Set(day0.Add(9*time.Hour + 13*time.Second + 7*time.Millisecond))
	for i := 0; i < 30; i++ {
		op, model := "decisions", "decide-mini"
		if i%3 == 0 {
			op, model = "chat", "gpt-x"
		}
		id := fmt.Sprintf("req-%02d", i)
		if err := store.Reserve(ctx, ledger.Reservation{RequestID: id, Operation: op, Pool: "api", Model: model, Region: "us", Client: "ci", Expires: clk.Now().Add(time.Minute)}, nil); err != nil {
			t.Fatal(err)
		}
		if i != 4 { // req-04 stays unsettled
			st := ledger.Settlement{RequestID: id, Model: model, Credential: "team-a", Region: "us", Attempts: 1 + i%2, Status: 200,
				InputTokens: ledger.Known(int64(100 * i)), OutputTokens: ledger.Known(int64(7 * i)), TotalTokens: ledger.Known(int64(107 * i)),
				CachedInputTokens: ledger.Known(int64(i)), Latency: time.Duration(40+i) * time.Millisecond}
			switch i % 7 {
			case 2:
				st.InputTokens, st.OutputTokens, st.TotalTokens, st.CachedInputTokens = ledger.Count{}, ledger.Count{}, ledger.Count{}, ledger.Count{}
			case 5:
				st.Status, st.ErrorCode = 502, "upstream_error"
			}
			if err := store.Settle(ctx, st); err != nil {
				t.Fatal(err)
			}
		}
		clk.Advance(2*time.Hour + 17*time.Minute + 3*time.Second)
	}
	// Move on a day and write once, so that the fold catches up.
	clk.Set(day0.Add(6*24*time.Hour + 12*time.Hour))
	if err := store.Reserve(ctx, ledger.Reservation{RequestID: "late", Operation: "decisions", Expires: clk.Now().Add(time.Minute)}, nil); err != nil {
		t.Fatal(err)
	}
	if err := store.Settle(ctx, ledger.Settlement{RequestID: "late", Status: 200, Attempts: 1, InputTokens: ledger.Known(1), OutputTokens: ledger.Known(1), TotalTokens: ledger.Known(2)}); err != nil {
		t.Fatal(err)
	}
	return store, day0
}

// runCmd runs the root command with args on f and returns its exit code.
func runCmd(t *testing.T, f *Factory, out, errOut *bytes.Buffer, args ...string) int {
	t.Helper()
	out.Reset()
	errOut.Reset()
	return run(context.Background(), f, args)
}

// parseCount reads an exported count: empty (csv) or null (json) is
// unknown.
func parseCount(t *testing.T, v any) ledger.Count {
	t.Helper()
	switch x := v.(type) {
	case nil:
		return ledger.Count{}
	case string:
		if x == "" {
			return ledger.Count{}
		}
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			t.Fatalf("count %q: %v", x, err)
		}
		return ledger.Known(n)
	case json.Number:
		n, err := x.Int64()
		if err != nil {
			t.Fatalf("count %v: %v", x, err)
		}
		return ledger.Known(n)
	}
	t.Fatalf("count of type %T", v)
	return ledger.Count{}
}

// parseUSD reads an exported cost into micro-USD.
func parseUSD(t *testing.T, v any) ledger.Count {
	t.Helper()
	var s string
	switch x := v.(type) {
	case nil:
		return ledger.Count{}
	case string:
		s = x
	case json.Number:
		s = string(x)
	}
	if s == "" {
		return ledger.Count{}
	}
	whole, frac, _ := strings.Cut(s, ".")
	w, err1 := strconv.ParseInt(whole, 10, 64)
	f, err2 := strconv.ParseInt((frac + "000000")[:6], 10, 64)
	if err1 != nil || err2 != nil || len(frac) > 6 {
		t.Fatalf("cost %q is not USD with at most 6 decimals", s)
	}
	return ledger.Known(w*1_000_000 + f)
}

// rowFrom rebuilds a ledger row from an exported record (csv strings or
// json values).
func rowFrom(t *testing.T, m map[string]any) ledger.Row {
	t.Helper()
	str := func(k string) string {
		switch x := m[k].(type) {
		case string:
			return x
		case json.Number:
			return string(x)
		case bool:
			return strconv.FormatBool(x)
		}
		t.Fatalf("%s: %T", k, m[k])
		return ""
	}
	num := func(k string) int64 {
		n, err := strconv.ParseInt(str(k), 10, 64)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		return n
	}
	tm := func(k string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, str(k))
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		return v.UTC()
	}
	return ledger.Row{RequestID: str("request_id"), Time: tm("time"), Settled: str("settled") == "true", Expires: tm("expires"),
		Operation: str("operation"), Pool: str("pool"), Model: str("model"), Credential: str("credential"), Region: str("region"), Client: str("client"),
		Attempts: int(num("attempts")), Status: int(num("status")), ErrorCode: str("error_code"),
		InputTokens: parseCount(t, m["input_tokens"]), OutputTokens: parseCount(t, m["output_tokens"]), TotalTokens: parseCount(t, m["total_tokens"]),
		CachedInputTokens: parseCount(t, m["cached_input_tokens"]), ReasoningTokens: parseCount(t, m["reasoning_tokens"]),
		CostMicros: parseUSD(t, m["cost_usd"]), Latency: time.Duration(num("latency_ms")) * time.Millisecond}
}

// Issue 18 item 5: ledger rows exports rows another tool reads back equal,
// through csv and jsonl; unknown values are empty and null, never 0.
func TestLedgerRowsRoundTripsCSVAndJSONL(t *testing.T) {
	f, out, errOut := testFactory(t)
	store, day0 := careLedger(t, f)
	want, err := store.Rows(context.Background(), day0, day0.Add(4*24*time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	var unknownTokens, unknownCost, knownCost bool
	for _, r := range want {
		unknownTokens = unknownTokens || !r.TotalTokens.Known
		unknownCost = unknownCost || !r.CostMicros.Known
		knownCost = knownCost || r.CostMicros.Known && r.CostMicros.V > 0
	}
	if len(want) != 30 || !unknownTokens || !unknownCost || !knownCost {
		t.Fatalf("fixture: %d rows (unknown tokens %v, unknown cost %v, known cost %v), want 30 with each", len(want), unknownTokens, unknownCost, knownCost)
	}
	args := []string{"ledger", "rows", "--from", "2026-11-20", "--to", "2026-11-24", "--format"}

	if code := runCmd(t, f, out, errOut, append(args, "csv")...); code != 0 {
		t.Fatalf("rows csv: exit %d: %s", code, errOut)
	}
	recs, err := csv.NewReader(bytes.NewReader(out.Bytes())).ReadAll()
	if err != nil || len(recs) != len(want)+1 {
		t.Fatalf("csv: %v, %d records", err, len(recs))
	}
	var got []ledger.Row
	for _, rec := range recs[1:] {
		m := map[string]any{}
		for i, h := range recs[0] {
			m[h] = rec[i]
		}
		if rec[3] == "0" || strings.Contains(strings.Join(rec, ","), "unknown") {
			t.Errorf("csv row %v prints an unknown value as 0 or unknown", rec)
		}
		got = append(got, rowFrom(t, m))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("csv round trip:\n got %+v\nwant %+v", got, want)
	}

	if code := runCmd(t, f, out, errOut, append(args, "jsonl")...); code != 0 {
		t.Fatalf("rows jsonl: exit %d: %s", code, errOut)
	}
	got = nil
	sc := bufio.NewScanner(bytes.NewReader(out.Bytes()))
	for sc.Scan() {
		dec := json.NewDecoder(strings.NewReader(sc.Text()))
		dec.UseNumber()
		m := map[string]any{}
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("jsonl line %q: %v", sc.Text(), err)
		}
		got = append(got, rowFrom(t, m))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("jsonl round trip:\n got %+v\nwant %+v", got, want)
	}
	if !strings.Contains(out.String(), `"total_tokens":null`) || !strings.Contains(out.String(), `"cost_usd":null`) {
		t.Errorf("jsonl has no null for unknown tokens and cost:\n%s", out)
	}

	// The table says unknown; --request-id finds one row, or exits 2.
	if code := runCmd(t, f, out, errOut, "ledger", "rows", "--request-id", "req-04"); code != 0 || !strings.Contains(out.String(), "unknown") || strings.Count(out.String(), "req-") != 1 {
		t.Errorf("rows --request-id req-04: exit %d\n%s%s", code, out, errOut)
	}
	if code := runCmd(t, f, out, errOut, "ledger", "rows", "--request-id", "nope"); code != ExitUsage || !strings.Contains(errOut.String(), "--request-id") {
		t.Errorf("rows --request-id nope: exit %d %s, want 2 naming --request-id", code, errOut)
	}
	if code := runCmd(t, f, out, errOut, "ledger", "rows", "--format", "xml"); code != ExitUsage || !strings.Contains(errOut.String(), "--format") {
		t.Errorf("rows --format xml: exit %d %s", code, errOut)
	}
}

// Issue 18 item 5: prune keeps day reports and budget windows, says so,
// and refuses to cut inside a budget's window, naming it; on both engines
// (DESIGN: on PostgreSQL "prune works alike").
func TestLedgerPruneKeepsDayReports(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		f, out, errOut := testFactory(t)
		testLedgerPrune(t, f, out, errOut)
	})
	t.Run("postgres", func(t *testing.T) {
		dbURL, _ := pgtest.Schema(t)
		if _, _, err := pgledger.Migrate(context.Background(), dbURL, pgledger.Options{}); err != nil {
			t.Fatal(err)
		}
		// The ledger every command of f uses, opened on the factory's
		// clock, which careLedger sets (a real one would leave times to
		// the database's now()).
		f, out, errOut := testFactory(t)
		f.DBPath = func() (string, error) { return dbURL, nil }
		store, err := pgledger.Open(context.Background(), dbURL, pgledger.Options{Clock: factoryClock{f}})
		if err != nil {
			t.Fatal(err)
		}
		f.store = store
		testLedgerPrune(t, f, out, errOut)
		if !strings.Contains(out.String(), dburl.Mask(dbURL)) {
			t.Errorf("prune printed %q, want the ledger's masked URL", out)
		}
	})
}

// factoryClock is the factory's clock at each call.
type factoryClock struct{ f *Factory }

func (c factoryClock) Now() time.Time                       { return c.f.Clock.Now() }
func (c factoryClock) NewTimer(d time.Duration) clock.Timer { return c.f.Clock.NewTimer(d) }

func testLedgerPrune(t *testing.T, f *Factory, out, errOut *bytes.Buffer) {
	t.Helper()
	store, day0 := careLedger(t, f)
	ctx := context.Background()
	report := []string{"ledger", "report", "--by", "day,model,status", "--from", "2026-11-19", "--to", "2026-11-27", "--format", "json"}
	if code := runCmd(t, f, out, errOut, report...); code != 0 {
		t.Fatalf("report: %d %s", code, errOut)
	}
	before := out.String()
	budgetWindow := func() budgets.Status {
		var st budgets.Status
		if err := store.View(ctx, func(r ledger.WindowReader) error {
			var err error
			st, err = budgets.Evaluate(r, budgets.Budget{Name: "probe", Kind: budgets.KindTokens, Limit: 1 << 40, Window: budgets.Window{Rolling: 10 * 24 * time.Hour}})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return st
	}
	windowBefore := budgetWindow()

	// A weekly budget's window reaches back into the days to prune.
	if code := runCmd(t, f, out, errOut, "budget", "add", "--requests", "100", "--window", "7d", "--name", "weekly"); code != 0 {
		t.Fatal(errOut)
	}
	n := len(mustRowsCmd(t, store, day0))
	if code := runCmd(t, f, out, errOut, "ledger", "prune", "--before", "2026-11-23"); code != ExitUsage || !strings.Contains(errOut.String(), "budget weekly") {
		t.Errorf("prune inside weekly's window: exit %d %q, want 2 naming budget weekly", code, errOut)
	}
	if got := len(mustRowsCmd(t, store, day0)); got != n {
		t.Errorf("refused prune deleted %d rows", n-got)
	}
	if code := runCmd(t, f, out, errOut, "budget", "remove", "weekly"); code != 0 {
		t.Fatal(errOut)
	}

	if code := runCmd(t, f, out, errOut, "ledger", "prune", "--before", "2026-11-23"); code != 0 || !strings.Contains(out.String(), "kept the rollups") ||
		!strings.Contains(out.String(), "kept 1 unsettled rows") {
		t.Fatalf("prune: exit %d\n%s%s", code, out, errOut)
	}
	pruned := out.String()
	if left := mustRowsCmd(t, store, day0); len(left) >= n || len(left) != 1 {
		t.Errorf("rows before the cut after prune: %d of %d (want the unsettled one)", len(left), n)
	}
	if code := runCmd(t, f, out, errOut, report...); code != 0 || out.String() != before {
		t.Errorf("day report after prune (exit %d):\n%s\nbefore:\n%s", code, out, before)
	}
	if got := budgetWindow(); got.Used != windowBefore.Used || got.Used == 0 {
		t.Errorf("a 10-day tokens window: %d used before prune, %d after", windowBefore.Used, got.Used)
	}
	// A cut inside an hour is moved back to its start (the rollups count
	// whole hours), and says so.
	if code := runCmd(t, f, out, errOut, "ledger", "prune", "--before", "2026-11-24T05:17:30.5Z"); code != 0 ||
		!strings.Contains(out.String(), "usage rows before 2026-11-24T05:00:00Z") || !strings.Contains(out.String(), "kept the rows from 2026-11-24T05:00:00Z on: the rollups count whole hours") {
		t.Errorf("prune --before 05:17:30.5: exit %d\n%s%s\nwant the cut at 05:00 and why", code, out, errOut)
	}
	if code := runCmd(t, f, out, errOut, report...); code != 0 || out.String() != before {
		t.Errorf("day report after a prune inside an hour (exit %d):\n%s\nbefore:\n%s", code, out, before)
	}
	if got := budgetWindow(); got.Used != windowBefore.Used {
		t.Errorf("a 10-day tokens window: %d used before prune, %d after a prune inside an hour", windowBefore.Used, got.Used)
	}
	out.Reset()
	out.WriteString(pruned)
}

func mustRowsCmd(t *testing.T, store ledger.Ledger, day0 time.Time) []ledger.Row {
	t.Helper()
	rows, err := store.Rows(context.Background(), day0, time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), 0)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func TestLedgerBackupRefusesExistingFile(t *testing.T) {
	f, out, errOut := testFactory(t)
	careLedger(t, f)
	dir := t.TempDir()
	taken := filepath.Join(dir, "taken.db")
	if err := os.WriteFile(taken, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code := runCmd(t, f, out, errOut, "ledger", "backup", taken); code != ExitUsage || !strings.Contains(errOut.String(), taken) {
		t.Errorf("backup over a file: exit %d %q, want 2 naming it", code, errOut)
	}
	if b, _ := os.ReadFile(taken); string(b) != "keep" {
		t.Error("backup overwrote a file")
	}
	fresh := filepath.Join(dir, "copy.db")
	if code := runCmd(t, f, out, errOut, "ledger", "backup", fresh); code != 0 || !strings.Contains(out.String(), fresh) {
		t.Errorf("backup: exit %d %s%s", code, out, errOut)
	}
}

func TestLedgerBackupOfPostgresSaysPgDump(t *testing.T) {
	f, _, _ := testFactory(t)
	opts := &backupOptions{IO: f.IO, DBPath: func() (string, error) { return "postgres://rotor:s3cret@db.example/rotor", nil },
		Ledger: func(context.Context) (ledger.Ledger, error) { t.Fatal("opened a ledger"); return nil, nil }, File: filepath.Join(t.TempDir(), "x")}
	err := backupRun(context.Background(), opts)
	wantUsageError(t, "backup of a PostgreSQL ledger", err, "pg_dump")
	if strings.Contains(fmt.Sprint(err), "s3cret") {
		t.Errorf("error shows the database password: %v", err)
	}
}

// Issue 18 item 6: --jq on the json form, strings raw, a bad expression
// exits 2 naming --jq.
func TestJQOnRecordCommands(t *testing.T) {
	f, out, errOut := testFactory(t)
	careLedger(t, f)
	for _, add := range [][]string{{"--requests", "10", "--window", "day", "--name", "daily"}, {"--tokens", "5000", "--window", "7d", "--name", "weekly-tokens"}} {
		if code := runCmd(t, f, out, errOut, append([]string{"budget", "add"}, add...)...); code != 0 {
			t.Fatal(errOut)
		}
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"budget", "list", "--jq", ".[].name"}, "daily\nweekly-tokens\n"},
		{[]string{"budget", "list", "--jq", `map(select(.unit == "tokens")) | .[0].limit`}, "5000\n"},
		{[]string{"ledger", "report", "--from", "2026-11-20", "--to", "2026-11-23", "--by", "day", "--jq", `.[] | "\(.day) \(.requests) \(.cost_usd)"`},
			"2026-11-20 7 null\n2026-11-21 11 null\n2026-11-22 10 null\n"},
		{[]string{"ledger", "report", "--from", "2026-11-20", "--to", "2026-11-23", "--by", "operation", "--jq", `.[] | {operation, requests}`},
			"{\"operation\":\"chat\",\"requests\":10}\n{\"operation\":\"decisions\",\"requests\":18}\n"},
		{[]string{"ledger", "rows", "--from", "2026-11-20", "--to", "2026-11-21", "--format", "json", "--jq", `[.[] | select(.total_tokens == null) | .request_id] | join(",")`}, "req-02,req-04\n"},
	}
	for _, tt := range tests {
		if code := runCmd(t, f, out, errOut, tt.args...); code != 0 || out.String() != tt.want {
			t.Errorf("rotor %s: exit %d %s\n got %q\nwant %q", strings.Join(tt.args, " "), code, errOut, out, tt.want)
		}
	}
	for _, args := range [][]string{
		{"budget", "list", "--jq", ".[] |"},
		{"budget", "list", "--jq", ".name"},
		{"ledger", "report", "--jq", ".", "--format", "csv"},
	} {
		if code := runCmd(t, f, out, errOut, args...); code != ExitUsage || !strings.Contains(errOut.String(), "--jq") {
			t.Errorf("rotor %s: exit %d %q, want 2 naming --jq", strings.Join(args, " "), code, errOut)
		}
	}
}

// Issue 18 item 6: completion of budget names, token labels and flag
// values, as the shells ask cobra's __complete.
func TestCompletion(t *testing.T) {
	f, out, errOut := testFactory(t)
	careLedger(t, f)
	for _, add := range [][]string{{"--requests", "10", "--window", "day", "--name", "daily"}, {"--tokens", "5000", "--window", "7d", "--name", "dev-tokens"}} {
		if code := runCmd(t, f, out, errOut, append([]string{"budget", "add"}, add...)...); code != 0 {
			t.Fatal(errOut)
		}
	}
	if code := runCmd(t, f, out, errOut, "bridge", "token", "create", "--label", "laptop"); code != 0 {
		t.Fatal(errOut)
	}
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"budget", "remove", ""}, []string{"daily", "dev-tokens"}},
		{[]string{"budget", "remove", "de"}, []string{"dev-tokens"}},
		{[]string{"budget", "remove", "daily", ""}, nil},
		{[]string{"bridge", "token", "revoke", ""}, []string{"laptop"}},
		{[]string{"ledger", "report", "--format", ""}, []string{"table", "json", "csv"}},
		{[]string{"ledger", "rows", "--format", "j"}, []string{"table", "json", "csv", "jsonl"}}, // the shell filters
		{[]string{"ledger", "report", "--by", "day,c"}, []string{"day,credential", "day,client"}},
		{[]string{"budget", "add", "--window", ""}, windowValues},
	}
	for _, tt := range tests {
		if code := runCmd(t, f, out, errOut, append([]string{"__complete"}, tt.args...)...); code != 0 {
			t.Fatalf("__complete %q: exit %d %s", tt.args, code, errOut)
		}
		var got []string
		for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			if !strings.HasPrefix(line, ":") {
				got = append(got, line)
			}
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("__complete %q = %q, want %q", tt.args, got, tt.want)
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		if code := runCmd(t, f, out, errOut, "completion", shell); code != 0 || !strings.Contains(out.String(), "__complete") {
			t.Errorf("completion %s: exit %d, %d bytes", shell, code, out.Len())
		}
	}
}

// Issue 18 item 7: a day's tokens and known cost as bars; unknown cost is
// marked, never drawn as 0; lines stay within the width.
func TestLedgerReportChart(t *testing.T) {
	t.Setenv("COLUMNS", "72")
	f, out, errOut := testFactory(t)
	careLedger(t, f)
	if code := runCmd(t, f, out, errOut, "ledger", "report", "--by", "day", "--chart", "--from", "2026-11-19", "--to", "2026-11-24"); code != 0 {
		t.Fatalf("chart: exit %d %s", code, errOut)
	}
	if out.String() != wantChart {
		t.Errorf("chart:\n%s\nwant:\n%s", out, wantChart)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if len([]rune(line)) > 72 {
			t.Errorf("line of %d columns, over 72: %q", len([]rune(line)), line)
		}
	}
	for _, args := range [][]string{
		{"ledger", "report", "--chart"},
		{"ledger", "report", "--by", "day", "--chart", "--format", "json"},
		// A line a day: not millions of them.
		{"ledger", "report", "--by", "day", "--chart", "--from", "0001-01-01", "--to", "9999-01-01"},
		{"ledger", "report", "--by", "day", "--chart", "--since", "3661d"},
	} {
		if code := runCmd(t, f, out, errOut, args...); code != ExitUsage || !strings.Contains(errOut.String(), "--chart") {
			t.Errorf("rotor %s: exit %d %q, want 2 naming --chart", strings.Join(args, " "), code, errOut)
		}
	}
}

const wantChart = `tokens per day (UTC), 2026-11-19T00:00:00Z to 2026-11-24T00:00:00Z
2026-11-19                                        0
2026-11-20 ###                                    1605 + 2 rows unknown
2026-11-21 ####################                   11449 + 2 rows unknown
2026-11-22 ###################################### 21614 + 1 row unknown
2026-11-23 ###########                            6099
known cost per day (USD)
2026-11-19                                      0
2026-11-20 ####                                 0.00288 + 4 rows unknown
2026-11-21 ###########                          0.00864 + 9 rows unknown
2026-11-22 #################################### 0.0288 + 6 rows unknown
2026-11-23                                      unknown (2 rows)
`

func init() {
	runFTests["ledger rows"] = func(t *testing.T) {
		f, _, _ := testFactory(t)
		now := f.Clock.Now()
		got := flagsToOptions(t, f, newCmdLedgerRows)
		if got.Format != FormatTable || !got.From.Equal(now.Add(-24*time.Hour)) || !got.To.Equal(now.Add(time.Millisecond)) || got.RequestID != "" {
			t.Errorf("rows defaults: %+v, want the table of the last 24h", got)
		}
		got = flagsToOptions(t, f, newCmdLedgerRows, "--from", "2026-11-01", "--to", "2026-11-02", "--format", "jsonl")
		if got.Format != FormatJSONL || !got.From.Equal(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)) || !got.To.Equal(time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)) {
			t.Errorf("rows --from --to --format jsonl: %+v", got)
		}
		if got := flagsToOptions(t, f, newCmdLedgerRows, "--request-id", "abc", "--jq", ".[0]"); got.RequestID != "abc" || !isJSONFormat(got.Format) {
			t.Errorf("rows --request-id abc --jq: %+v", got)
		}
		refused[rowsOptions](t, f, newCmdLedgerRows, "--request-id", "--request-id", "abc", "--since", "1h")
		refused[rowsOptions](t, f, newCmdLedgerRows, "--since", "--since", "soon")
		refused[rowsOptions](t, f, newCmdLedgerRows, "--format", "--format", "yaml")
		refused[rowsOptions](t, f, newCmdLedgerRows, "--jq", "--jq", ".[")
	}
	runFTests["ledger prune"] = func(t *testing.T) {
		f, _, _ := testFactory(t)
		got := flagsToOptions(t, f, newCmdLedgerPrune, "--before", "2026-11-01")
		if !got.Before.Equal(time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)) {
			t.Errorf("prune --before 2026-11-01: %v", got.Before)
		}
		refused[pruneOptions](t, f, newCmdLedgerPrune, "--before is required")
		refused[pruneOptions](t, f, newCmdLedgerPrune, "--before", "--before", "last week")
		refused[pruneOptions](t, f, newCmdLedgerPrune, "in the future", "--before", "2027-01-01")
	}
	runFTests["ledger backup"] = func(t *testing.T) {
		f, _, _ := testFactory(t)
		if got := flagsToOptions(t, f, newCmdLedgerBackup, "/tmp/x.db"); got.File != "/tmp/x.db" {
			t.Errorf("backup FILE: %+v", got)
		}
	}
}

// ledger rows streams csv and jsonl a page at a time: every row once, in
// order, also when more rows than a page share one millisecond.
func TestLedgerRowsPagesKeepEveryRowOnce(t *testing.T) {
	f, out, errOut := testFactory(t)
	store, day0 := careLedger(t, f)
	ctx := context.Background()
	clk := f.Clock.(*clock.Fake)
	// Seven rows in one millisecond, past a page of three.
	for i := 0; i < 7; i++ {
		id := fmt.Sprintf("same-ms-%d", i)
		if err := store.Reserve(ctx, ledger.Reservation{RequestID: id, Operation: "decisions", Expires: clk.Now().Add(time.Minute)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	defer func(n int) { rowsPage = n }(rowsPage)
	rowsPage = 3
	want, err := store.Rows(ctx, day0, clk.Now().Add(time.Millisecond), 0)
	if err != nil || len(want) != 30+1+7 {
		t.Fatalf("rows: %d %v", len(want), err)
	}
	var got []string
	if err := pageRows(ctx, store, day0, clk.Now().Add(time.Millisecond), func(page []ledger.Row) error {
		for _, r := range page {
			got = append(got, r.RequestID)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range want {
		ids = append(ids, r.RequestID)
	}
	if !reflect.DeepEqual(got, ids) {
		t.Errorf("paged rows:\n got %v\nwant %v", got, ids)
	}
	if code := runCmd(t, f, out, errOut, "ledger", "rows", "--since", "30d", "--format", "csv"); code != 0 {
		t.Fatal(errOut)
	}
	recs, err := csv.NewReader(bytes.NewReader(out.Bytes())).ReadAll()
	if err != nil || len(recs) != len(want)+1 || recs[0][0] != "request_id" || recs[len(recs)-1][0] != want[len(want)-1].RequestID {
		t.Errorf("paged csv: %v, %d records (want one header and %d rows)", err, len(recs), len(want))
	}
	if code := runCmd(t, f, out, errOut, "ledger", "rows", "--from", "2020-01-01", "--to", "2020-01-02", "--format", "csv"); code != 0 || out.String() != strings.Join(rowColumns, ",")+"\n" {
		t.Errorf("empty csv: exit %d %q, want the header alone", code, out)
	}
}

// prune refuses a cut inside a budget's window and accepts one at its
// start, to the instant: the refusal tells the user to "prune at or before"
// the window's start, so exactly that time must pass and any later time,
// even a millisecond, must be refused naming the budget, for calendar and
// rolling windows alike.
func TestPruneCheckRefusesFromTheWindowStartOn(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, b := range []budgets.Budget{
		{Name: "daily", Kind: budgets.KindRequests, Limit: 10, Window: budgets.Window{Calendar: "day"}},
		{Name: "rolling", Kind: budgets.KindTokens, Limit: 10, Window: budgets.Window{Rolling: 90 * time.Minute}},
	} {
		start := b.Window.Start(now)
		recs := []ledger.BudgetRecord{b.Record()}
		if err := pruneCheck(start)(now, recs); err != nil {
			t.Errorf("%s: prune at the window start %s refused: %v", b.Name, start.Format(time.RFC3339), err)
		}
		if err := pruneCheck(start.Add(-time.Hour))(now, recs); err != nil {
			t.Errorf("%s: prune an hour before the window start refused: %v", b.Name, err)
		}
		wantUsageError(t, b.Name+" a millisecond inside", pruneCheck(start.Add(time.Millisecond))(now, recs), "budget "+b.Name)
		wantUsageError(t, b.Name+" at now", pruneCheck(now)(now, recs), "prune at or before "+start.Format(time.RFC3339))
	}
	// Inside both windows: the refusal names both budgets and the earlier
	// start (the day's), where a prune passes them all.
	both := []ledger.BudgetRecord{
		budgets.Budget{Name: "daily", Kind: budgets.KindRequests, Limit: 10, Window: budgets.Window{Calendar: "day"}}.Record(),
		budgets.Budget{Name: "rolling", Kind: budgets.KindTokens, Limit: 10, Window: budgets.Window{Rolling: 90 * time.Minute}}.Record(),
	}
	err := pruneCheck(now)(now, both)
	wantUsageError(t, "both", err, "prune at or before 2026-11-30T00:00:00Z")
	if !strings.Contains(fmt.Sprint(err), "budget daily") || !strings.Contains(fmt.Sprint(err), "budget rolling") {
		t.Errorf("prune inside two windows: %v, want both budgets named", err)
	}
}

// ledger settle refuses a reservation whose request may still be running
// (exit 2, saying until when): settling it would make the request's own
// settlement fail, and its answer or stream with it. The request then
// settles as it would have.
func TestLedgerSettleRefusesARequestInFlight(t *testing.T) {
	f, out, errOut := testFactory(t)
	store, _ := careLedger(t, f)
	ctx := context.Background()
	until := f.Clock.Now().Add(10 * time.Minute)
	if err := store.Reserve(ctx, ledger.Reservation{RequestID: "inflight", Operation: "chat", Pool: "api", Model: "gpt-x", Client: "ci", Expires: until}, nil); err != nil {
		t.Fatal(err)
	}
	if code := runCmd(t, f, out, errOut, "ledger", "settle", "inflight", "--input", "1", "--output", "1"); code != ExitUsage || !strings.Contains(errOut.String(), until.UTC().Format(time.RFC3339)) {
		t.Errorf("ledger settle of a request in flight: exit %d %q; want 2 saying it runs until %s", code, errOut, until.UTC().Format(time.RFC3339))
	}
	if err := store.Settle(ctx, ledger.Settlement{RequestID: "inflight", Model: "gpt-x", Credential: "team-a", Status: 200, Attempts: 1,
		InputTokens: ledger.Known(1200), OutputTokens: ledger.Known(300), TotalTokens: ledger.Known(1500)}); err != nil {
		t.Errorf("the request's own settlement after a refused ledger settle: %v", err)
	}
}

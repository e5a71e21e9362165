package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/ledger"
)

// ledger report prints a group's unknown token counts as unknown (table,
// csv) and null (json), never 0, beside a group whose counts are known.
func TestReportUnknownCountsAreNeverZero(t *testing.T) {
	ctx := context.Background()
	f, out, errOut := testFactory(t)
	store, err := f.LedgerOrCreate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		id, op string
		in     ledger.Count
	}{{"known", "chat", ledger.Known(100)}, {"lost", "responses", ledger.Count{}}} {
		if err := store.Reserve(ctx, ledger.Reservation{RequestID: r.id, Operation: r.op, Pool: "api", Model: "gpt-x", Client: "ci", Expires: f.Clock.Now().Add(time.Minute)}, nil); err != nil {
			t.Fatal(err)
		}
		st := ledger.Settlement{RequestID: r.id, Model: "gpt-x", Status: 200, Attempts: 1}
		if r.in.Known {
			st.InputTokens, st.OutputTokens, st.TotalTokens = r.in, ledger.Known(7), ledger.Known(107)
		}
		if err := store.Settle(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	cols := map[string]int{}
	if code := runCmd(t, f, out, errOut, "ledger", "report", "--by", "operation", "--format", "csv"); code != 0 {
		t.Fatalf("report csv: exit %d: %s", code, errOut)
	}
	recs, err := csv.NewReader(bytes.NewReader(out.Bytes())).ReadAll()
	if err != nil || len(recs) != 3 {
		t.Fatalf("report csv = %q, %v", out, err)
	}
	for i, c := range recs[0] {
		cols[c] = i
	}
	for _, rec := range recs[1:] {
		in, total := rec[cols["input_tokens"]], rec[cols["total_tokens"]]
		switch rec[cols["operation"]] {
		case "chat":
			if in != "100" || total != "107" {
				t.Errorf("csv chat tokens %s/%s, want 100/107", in, total)
			}
		case "responses":
			if in != "unknown" || total != "unknown" {
				t.Errorf("csv responses tokens %q/%q, want unknown", in, total)
			}
		}
	}
	if code := runCmd(t, f, out, errOut, "ledger", "report", "--by", "operation", "--format", "json"); code != 0 {
		t.Fatalf("report json: exit %d: %s", code, errOut)
	}
	var rows []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil || len(rows) != 2 {
		t.Fatalf("report json = %s, %v", out, err)
	}
	for _, r := range rows {
		if r["operation"] == "responses" && (r["input_tokens"] != nil || r["output_tokens"] != nil || r["total_tokens"] != nil) {
			t.Errorf("json responses tokens %v/%v/%v, want null", r["input_tokens"], r["output_tokens"], r["total_tokens"])
		}
		if r["operation"] == "chat" && r["input_tokens"] != 100.0 {
			t.Errorf("json chat input_tokens %v, want 100", r["input_tokens"])
		}
	}
	if code := runCmd(t, f, out, errOut, "ledger", "report", "--by", "operation"); code != 0 {
		t.Fatalf("report table: exit %d: %s", code, errOut)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "responses") && strings.Count(line, "unknown") < 3 {
			t.Errorf("table line %q: want its input, output and total tokens unknown", line)
		}
	}
}

// The json form of an empty list is [] on one line, as scripts expect.
func TestRecordsEmptyJSON(t *testing.T) {
	recs := records{Columns: []string{"model", "input_usd_per_1m"}}
	var b strings.Builder
	if err := recs.write(&b, FormatJSON); err != nil {
		t.Fatal(err)
	}
	if b.String() != "[]\n" {
		t.Errorf("empty json = %q, want \"[]\\n\"", b.String())
	}
}

// A cell with a CSV form prints it in csv (budget list's micro-USD
// amounts: the number json gives), its Text in the table.
func TestCSVPrintsTheCellsCSVForm(t *testing.T) {
	recs := records{Columns: []string{"limit"}, Rows: [][]cell{{{JSON: int64(2500000), Text: "$2.5", CSV: "2500000"}}}}
	var b strings.Builder
	if err := recs.write(&b, FormatCSV); err != nil {
		t.Fatal(err)
	}
	if b.String() != "limit\n2500000\n" {
		t.Errorf("csv = %q, want the CSV form", b.String())
	}
}

// --jq: integers compare and add exactly, decimals stay decimals, results
// printed before an error() stay printed (then exit 2), and halt_error
// with a message is an error while halt just stops.
func TestJQResults(t *testing.T) {
	recs := records{Columns: []string{"name", "used", "cost"}, Rows: [][]cell{
		{textCell("a"), intCell(9007199254740993), usdCell(1_500_000)},
		{textCell("b"), intCell(2), usdCell(250_000)},
	}}
	for _, tc := range []struct {
		expr, want string
		exit       int
	}{
		{`.[0].used + 1`, "9007199254740994\n", 0},
		{`.[] | .cost`, "1.5\n0.25\n", 0},
		{`.[] | .cost * 2`, "3\n0.5\n", 0},
		{`.[] | if .name == "b" then error("boom") else .name end`, "a\n", ExitUsage},
		{`.[] | .name, halt`, "a\n", 0},
		{`"stop" | halt_error`, "", ExitUsage},
	} {
		var b strings.Builder
		err := recs.write(&b, jqMark+tc.expr)
		if got := exitCode(err); got != tc.exit || b.String() != tc.want {
			t.Errorf("--jq %s: printed %q, exit %d (%v); want %q, exit %d", tc.expr, b.String(), got, err, tc.want, tc.exit)
		}
	}
}

// A server's answer in an error is trimmed, cut at 512 bytes on a
// character boundary, and made visible: no escape or bidi control, DEL or
// C1 control reaches the terminal.
func TestServerSaysAndVisible(t *testing.T) {
	if got := serverSays([]byte("  not a bridge\n")); got != "not a bridge" {
		t.Errorf("serverSays trims to %q, want %q", got, "not a bridge")
	}
	if got := serverSays([]byte(strings.Repeat("a", 512))); got != strings.Repeat("a", 512) {
		t.Errorf("512 bytes cut: %q", got)
	}
	if got := serverSays([]byte(strings.Repeat("a", 513))); got != strings.Repeat("a", 512)+" …" {
		t.Errorf("513 bytes: %q, want 512 and an ellipsis", got)
	}
	// "é" is two bytes: the 512th byte is the first half of one.
	if got := serverSays([]byte(strings.Repeat("a", 511) + "éé")); got != strings.Repeat("a", 511)+" …" {
		t.Errorf("cut inside a character: %q", got)
	}
	for _, s := range []string{"a\x7fb", "a\u009b31mb", "a\u202eb", "a\u200bb", "a\u2028b"} {
		got := visible(s)
		if got == s || !strings.HasPrefix(got, "a") || !strings.HasSuffix(got, "b") || !strings.Contains(got, `\`) {
			t.Errorf("visible(%q) = %q, want the control escaped", s, got)
		}
	}
	for _, s := range []string{"gpt-4o·mini", "café", "team a"} {
		if got := visible(s); got != s {
			t.Errorf("visible(%q) = %q, want it unchanged", s, got)
		}
	}
}

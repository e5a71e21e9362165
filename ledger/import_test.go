package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/testutil/ledgertest"
	"github.com/rotorhq/rotor/ledger"
)

// write reserves and settles n rows of model m a minute apart from clk's
// time, the first ones settled with known usage, the last left open.
func write(t *testing.T, s *ledger.Store, clk *clock.Fake, prefix, model string, n int) {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if err := s.Reserve(ctx, ledger.Reservation{RequestID: id, Operation: "responses", Pool: "api", Model: model, Client: "ci", Expires: clk.Now().Add(time.Minute)}, nil); err != nil {
			t.Fatal(err)
		}
		if i < n-1 {
			if err := s.Settle(ctx, ledger.Settlement{RequestID: id, Model: model, Credential: "a", Status: 200, Attempts: 1,
				InputTokens: ledger.Known(10), OutputTokens: ledger.Known(5), TotalTokens: ledger.Known(15)}); err != nil {
				t.Fatal(err)
			}
		}
		clk.Advance(time.Minute)
	}
}

func allRows(t *testing.T, s *ledger.Store) []ledger.Row {
	t.Helper()
	rows, err := s.Rows(context.Background(), time.UnixMilli(0), time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC), 0)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

func windowTotals(t *testing.T, s *ledger.Store, w ledger.Window) ledger.Totals {
	t.Helper()
	var got ledger.Totals
	if err := s.View(context.Background(), func(r ledger.WindowReader) (err error) { got, err = r.Totals(w); return err }); err != nil {
		t.Fatal(err)
	}
	return got
}

func report(t *testing.T, s *ledger.Store, from, to time.Time) []ledger.ReportRow {
	t.Helper()
	rows, err := s.Report(context.Background(), ledger.ReportQuery{From: from, To: to, By: []string{"model", "status"}})
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// Rows imported behind the target's fold frontier count in its windows and
// reports exactly as if they had been written there, and a second import
// adds nothing.
func TestImportRowsCountsOnceInWindowsAndReports(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	srcClk, dstClk := clock.NewFake(t0), clock.NewFake(t0.Add(30*time.Second))
	src := ledgertest.Open(t, ledger.Options{Clock: srcClk})
	dst := ledgertest.Open(t, ledger.Options{Clock: dstClk})
	write(t, src, srcClk, "src", "m-src", 90) // 09:00 .. 10:29, across the hour
	// The target's own rows interleave with the source's, and its clock
	// runs hours ahead, so its fold and hour frontiers pass the source's
	// times before the import.
	write(t, dst, dstClk, "dst", "m-dst", 30)
	dstClk.Set(t0.Add(5 * time.Hour))
	write(t, dst, dstClk, "late", "m-dst", 3)

	whole := ledger.Window{From: t0.Add(-time.Hour), To: t0.Add(6 * time.Hour)}
	early := ledger.Window{From: t0, To: t0.Add(45 * time.Minute)}
	srcWhole, srcEarly := windowTotals(t, src, whole), windowTotals(t, src, early)
	dstWhole, dstEarly := windowTotals(t, dst, whole), windowTotals(t, dst, early)

	rows := allRows(t, src)
	n, err := dst.ImportRows(ctx, rows)
	if err != nil || n != len(rows) {
		t.Fatalf("import: %d, %v; want %d rows added", n, err, len(rows))
	}
	for _, tc := range []struct {
		w                ledger.Window
		srcT, dstT, name string
		a, b             ledger.Totals
	}{{whole, "", "", "whole", srcWhole, dstWhole}, {early, "", "", "09:00-09:45", srcEarly, dstEarly}} {
		got := windowTotals(t, dst, tc.w)
		want := tc.a
		want.Requests += tc.b.Requests
		want.Tokens += tc.b.Tokens
		want.TokensUnknown += tc.b.TokensUnknown
		want.CostMicros += tc.b.CostMicros
		want.CostUnknown += tc.b.CostUnknown
		if got != want {
			t.Errorf("window %s after import = %+v, want %+v", tc.name, got, want)
		}
	}
	// The report by model of the target now holds the source's groups as
	// the source reports them.
	from, to := t0.Add(-time.Hour), t0.Add(6*time.Hour)
	srcRep := report(t, src, from, to)
	var got []ledger.ReportRow
	for _, r := range report(t, dst, from, to) {
		if r.Keys[0] == "m-src" {
			got = append(got, r)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(srcRep) {
		t.Errorf("target's report of the imported rows = %+v, want the source's %+v", got, srcRep)
	}

	before := windowTotals(t, dst, whole)
	if n, err := dst.ImportRows(ctx, rows); err != nil || n != 0 {
		t.Errorf("second import: %d, %v; want 0 added", n, err)
	}
	if after := windowTotals(t, dst, whole); after != before {
		t.Errorf("a second import changed the window: %+v, then %+v", before, after)
	}
	if got, want := len(allRows(t, dst)), len(rows)+33; got != want {
		t.Errorf("target holds %d rows, want %d", got, want)
	}
}

func TestImportLearnedKeepsRecordsOnce(t *testing.T) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))
	src := ledgertest.Open(t, ledger.Options{Clock: clk})
	dst := ledgertest.Open(t, ledger.Options{Clock: clk})
	for i, id := range []string{"a", "b"} {
		if _, err := src.PutLearned(ctx, id, []byte(fmt.Sprintf(`{"n":%d}`, i)), 0, clk.Now(), 10, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dst.PutLearned(ctx, "b", []byte(`{"theirs":1}`), 0, clk.Now(), 10, time.Hour); err != nil {
		t.Fatal(err)
	}
	recs, err := src.LearnedRecords(ctx)
	if err != nil || len(recs) != 2 {
		t.Fatalf("LearnedRecords = %+v, %v", recs, err)
	}
	if n, err := dst.ImportLearned(ctx, recs, clk.Now(), 10, time.Hour); err != nil || n != 1 {
		t.Fatalf("ImportLearned = %d, %v; want 1 (b is there)", n, err)
	}
	a, ok, err := dst.GetLearned(ctx, "a", clk.Now())
	if err != nil || !ok || string(a.State) != `{"n":0}` || !a.ExpiresAt.Equal(recs[0].ExpiresAt) {
		t.Errorf("a = %+v %v %v, want the source's record", a, ok, err)
	}
	if b, _, _ := dst.GetLearned(ctx, "b", clk.Now()); string(b.State) != `{"theirs":1}` {
		t.Errorf("b = %s, want the target's own record kept", b.State)
	}
	if n, err := dst.ImportLearned(ctx, recs, clk.Now(), 10, time.Hour); err != nil || n != 0 {
		t.Errorf("second ImportLearned = %d, %v; want 0", n, err)
	}
}

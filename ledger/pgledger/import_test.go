package pgledger

import (
	"context"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/testutil/ledgertest"
	"github.com/rotorhq/rotor/ledger"
)

// TestImportRowsFromSQLiteCountsOnce: rows copied from a SQLite ledger
// (settled, open, of unknown usage, across hours) read the same in
// windows, reports and Rows as in the source, and a second copy adds
// nothing; learned records too.
func TestImportRowsFromSQLiteCountsOnce(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	src := ledgertest.Open(t, ledger.Options{Clock: clk})
	for i := range 90 {
		id := fmt.Sprintf("r-%d", i)
		if err := src.Reserve(ctx, ledger.Reservation{RequestID: id, Operation: "responses", Model: fmt.Sprintf("m%d", i%2), Client: "ci", Expires: clk.Now().Add(time.Minute)}, nil); err != nil {
			t.Fatal(err)
		}
		switch i % 3 {
		case 0:
			err := src.Settle(ctx, ledger.Settlement{RequestID: id, Model: "m0", Credential: "a", Status: 200, InputTokens: ledger.Known(10), OutputTokens: ledger.Known(5), TotalTokens: ledger.Known(15)})
			if err != nil {
				t.Fatal(err)
			}
		case 1:
			if err := src.Settle(ctx, ledger.Settlement{RequestID: id, Model: "m1", Status: 502, ErrorCode: "upstream"}); err != nil {
				t.Fatal(err)
			}
		}
		clk.Advance(time.Minute)
	}
	if _, err := src.PutLearned(ctx, "id1", []byte("state"), 0, t0, 10, 24*time.Hour); err != nil {
		t.Fatal(err)
	}
	dst, _ := open(t, Options{Clock: clk})
	far := time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)
	rows, err := src.Rows(ctx, time.UnixMilli(0), far, 0)
	if err != nil {
		t.Fatal(err)
	}
	for pass, want := range []int{90, 0} {
		if n, err := dst.ImportRows(ctx, rows); err != nil || n != want {
			t.Fatalf("import pass %d = %d, %v; want %d", pass, n, err, want)
		}
	}
	recs, err := src.LearnedRecords(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for pass, want := range []int{1, 0} {
		if n, err := dst.ImportLearned(ctx, recs, t0, 10, 24*time.Hour); err != nil || n != want {
			t.Fatalf("import learned pass %d = %d, %v; want %d", pass, n, err, want)
		}
	}
	if got, err := dst.LearnedRecords(ctx); err != nil || !reflect.DeepEqual(got, recs) {
		t.Fatalf("learned records = %+v, %v; want %+v", got, err, recs)
	}
	got, err := dst.Rows(ctx, time.UnixMilli(0), far, 0)
	if err != nil || !reflect.DeepEqual(got, rows) {
		t.Fatalf("rows differ after import: %v\n got %+v\nwant %+v", err, got, rows)
	}
	for _, w := range []ledger.Window{
		{From: t0.Add(-time.Hour), To: t0.Add(3 * time.Hour)},
		{From: t0.Add(10*time.Minute + 30*time.Second), To: t0.Add(75 * time.Minute)},
	} {
		var a, b ledger.Totals
		if err := src.View(ctx, func(r ledger.WindowReader) (err error) { a, err = r.Totals(w); return err }); err != nil {
			t.Fatal(err)
		}
		if err := dst.View(ctx, func(r ledger.WindowReader) (err error) { b, err = r.Totals(w); return err }); err != nil {
			t.Fatal(err)
		}
		if a != b {
			t.Errorf("Totals(%v): PostgreSQL %+v, SQLite %+v", w, b, a)
		}
		q := ledger.ReportQuery{From: w.From, To: w.To, By: []string{ledger.KeyModel, ledger.KeyStatus, ledger.KeyCredential}}
		ra, err := src.Report(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		rb, err := dst.Report(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ra, rb) {
			t.Errorf("Report(%v): PostgreSQL %+v, SQLite %+v", w, rb, ra)
		}
	}
}

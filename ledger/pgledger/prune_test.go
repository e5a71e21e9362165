package pgledger

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/ledger"
)

// A prune of more than one chunk cuts where its first chunk did, even
// when the clock passes the next hour between two chunks (`prune --before`
// a later date at 23:59: the cut is now's hour): the later chunks delete
// nothing after the pruned_until the first one recorded, and the cut it
// reports is that one. Before, each chunk cut at its own now's hour, so
// the second deleted the rows of 23:00-00:00, which reads still take from
// the rows (they start at pruned_until, 23:00).
func TestPruneCutStaysWhereTheFirstChunkPutIt(t *testing.T) {
	ctx := context.Background()
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	midnight := day.Add(24 * time.Hour)
	clk := clock.NewFake(day.Add(23*time.Hour + 30*time.Minute))
	s, _ := open(t, Options{Clock: clk})
	old := make([]ledger.Row, ledger.PruneChunk+1000)
	for i := range old {
		at := day.Add(22*time.Hour + time.Duration(i)*500*time.Millisecond)
		old[i] = ledger.Row{RequestID: fmt.Sprint("old", i), Time: at, Expires: at.Add(time.Minute), Settled: true, Operation: "chat", Model: "m",
			Attempts: 1, Status: 200, InputTokens: ledger.Known(1), OutputTokens: ledger.Known(1), TotalTokens: ledger.Known(2)}
	}
	if _, err := s.ImportRows(ctx, old); err != nil {
		t.Fatal(err)
	}
	report := func() (requests, tokens int64) {
		t.Helper()
		rows, err := s.Report(ctx, ledger.ReportQuery{From: day.Add(23*time.Hour + 30*time.Minute), To: midnight.Add(time.Minute)})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			requests += r.Requests
			tokens += r.TotalTokens
		}
		return requests, tokens
	}
	for i := range 10 {
		clk.Set(day.Add(23*time.Hour + 30*time.Minute + time.Duration(i)*time.Minute))
		if err := reserveSettle(t, s, nil, fmt.Sprint("late", i), clk.Now().Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	clk.Set(midnight.Add(-10 * time.Second))
	reqBefore, tokBefore := report()

	req := ledger.PruneRequest{Before: midnight.Add(24 * time.Hour)}
	calls := 0
	res, err := ledger.PruneInChunks(func(first bool, cut int64) (int64, int64, error) {
		if calls == 1 {
			clk.Set(midnight.Add(30 * time.Second))
			if err := reserveSettle(t, s, nil, "new", clk.Now().Add(time.Minute)); err != nil {
				t.Fatal(err)
			}
		}
		calls++
		return s.pruneChunk(ctx, req, first, cut)
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls < 2 {
		t.Fatalf("the prune ran %d chunk(s), want at least 2", calls)
	}
	var until int64
	if err := s.pool.QueryRow(ctx, `SELECT `+qPrunedUntil).Scan(&until); err != nil {
		t.Fatal(err)
	}
	if res.Until.UnixMilli() != until || until != day.Add(23*time.Hour).UnixMilli() {
		t.Errorf("prune says it cut at %v, pruned_until is %v; want both 23:00", res.Until, time.UnixMilli(until).UTC())
	}
	if req, tok := report(); req != reqBefore+1 || tok != tokBefore+2 {
		t.Errorf("report [23:30, 00:01) after the prune: %d requests, %d tokens; want %d and %d (before, plus the new request)", req, tok, reqBefore+1, tokBefore+2)
	}
	rows, err := s.Rows(ctx, day.Add(23*time.Hour), midnight, 0)
	if err != nil || len(rows) != 10 {
		t.Errorf("rows in [pruned_until, 00:00): %d (%v), want the 10 written there kept", len(rows), err)
	}
}

package ledger

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
)

// A prune goes on while a chunk deletes a full PruneChunk rows and stops
// at the first short one, summing the deletions; the cut is the first
// chunk's, given to every later chunk; an error stops it at once.
func TestPruneInChunksRunsUntilAShortChunk(t *testing.T) {
	cut := time.Date(2026, 11, 24, 5, 0, 0, 0, time.UTC).UnixMilli()
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		chunks  []int64
		failAt  int // call that fails, -1 for none
		calls   int
		deleted int64
	}{
		{"nothing to delete", []int64{0}, -1, 1, 0},
		{"one short chunk", []int64{17}, -1, 1, 17},
		{"full chunks then a short one", []int64{PruneChunk, PruneChunk, 3}, -1, 3, 2*PruneChunk + 3},
		{"full chunk then an empty one", []int64{PruneChunk, 0}, -1, 2, PruneChunk},
		{"error stops it", []int64{PruneChunk, PruneChunk, PruneChunk}, 1, 2, PruneChunk},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			res, err := PruneInChunks(func(first bool, got int64) (int64, int64, error) {
				if first != (calls == 0) {
					t.Errorf("call %d: first = %v", calls, first)
				}
				if !first && got != cut {
					t.Errorf("call %d: cut = %d, want the first chunk's %d", calls, got, cut)
				}
				i := calls
				calls++
				if i == tc.failAt {
					return 0, 0, boom
				}
				if !first {
					// A later chunk's own idea of the cut is not taken.
					return tc.chunks[i], cut + hourMS, nil
				}
				return tc.chunks[i], cut, nil
			})
			if calls != tc.calls || res.Deleted != tc.deleted {
				t.Errorf("calls %d deleted %d, want %d and %d", calls, res.Deleted, tc.calls, tc.deleted)
			}
			if tc.failAt >= 0 {
				if !errors.Is(err, boom) {
					t.Errorf("err = %v, want boom", err)
				}
				return
			}
			if err != nil || !res.Until.Equal(time.UnixMilli(cut)) {
				t.Errorf("err %v, until %v", err, res.Until)
			}
		})
	}
}

// reportTotals sums a report's requests and total tokens.
func reportTotals(t *testing.T, s *Store, from, to time.Time) (requests, tokens int64) {
	t.Helper()
	rows, err := s.Report(ctx, ReportQuery{From: from, To: to})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		requests += r.Requests
		tokens += r.TotalTokens
	}
	return requests, tokens
}

// A prune of more than one chunk cuts where its first chunk did, even
// when a bridge folds past the next hour between two chunks (a midnight
// `prune --before today` while the bridge serves): the later chunks
// delete nothing after the pruned_until the first one recorded, and the
// cut it reports is that one. Before, each chunk took its cut from the
// fold frontier of its own time, so the second deleted the rows of
// 23:00-00:00, which reads still take from the rows (they start at
// pruned_until, 23:00): a report over 23:30-00:01 lost them.
func TestPruneCutStaysWhereTheFirstChunkPutIt(t *testing.T) {
	day := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	midnight := day.Add(24 * time.Hour)
	clk := clock.NewFake(day.Add(21 * time.Hour))
	s, path := openTest(t, clk)
	s.w.foldChunk = 1 << 20 // fold the raw rows below in one batch
	reserve(t, s, "first")  // folds the empty ledger up to 21:00
	settle(t, s, "first", 10, 200)

	// More than a chunk of old rows, in 22:00-23:00, written raw.
	db := openRaw(t, path)
	hour22 := day.Add(22 * time.Hour).UnixMilli()
	if _, err := db.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)
INSERT INTO usage (request_id, ts_ms, state, expires_ms, operation, pool, model, credential, client, attempts, status, input_tokens, output_tokens, total_tokens)
SELECT 'old' || i, ? + i * 500, 1, ? + i * 500 + 60000, 'decisions', 'api', 'm', 'team-a', 'ci', 1, 200, 1, 1, 2 FROM n`,
		PruneChunk+1000, hour22, hour22); err != nil {
		t.Fatal(err)
	}
	// Requests at 23:30-23:39, folded at 23:59:50.
	for i := range 10 {
		clk.Set(day.Add(23*time.Hour + 30*time.Minute + time.Duration(i)*time.Minute))
		id := fmt.Sprint("late", i)
		reserve(t, s, id)
		settle(t, s, id, 10, 200)
	}
	clk.Set(midnight.Add(-10 * time.Second))
	reserve(t, s, "fold")
	settle(t, s, "fold", 10, 200)
	if f := foldFrontier(t, db); f != clk.Now().UnixMilli() {
		t.Fatalf("fold_until = %v, want 23:59:50", time.UnixMilli(f).UTC())
	}

	from, to := day.Add(23*time.Hour+30*time.Minute), midnight.Add(time.Minute)
	reqBefore, tokBefore := reportTotals(t, s, from, to)

	req := PruneRequest{Before: midnight}
	calls := 0
	res, err := PruneInChunks(func(first bool, cut int64) (int64, int64, error) {
		if calls == 1 {
			// Between the chunks the clock passes midnight and the bridge
			// serves a request, folding past midnight.
			clk.Set(midnight.Add(30 * time.Second))
			reserve(t, s, "new")
			settle(t, s, "new", 10, 200)
			if f := foldFrontier(t, db); f < midnight.UnixMilli() {
				t.Fatalf("fold_until = %v, want past midnight", time.UnixMilli(f).UTC())
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
	until, err := s.PrunedUntil(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Until.Equal(until) {
		t.Errorf("prune says it cut at %v, pruned_until is %v", res.Until, until)
	}
	if !until.Equal(day.Add(23 * time.Hour)) {
		t.Errorf("pruned_until = %v, want 23:00 (the fold frontier's hour at the first chunk)", until)
	}
	if req, tok := reportTotals(t, s, from, to); req != reqBefore+1 || tok != tokBefore+10 {
		t.Errorf("report [23:30, 00:01) after the prune: %d requests, %d tokens; want %d and %d (before, plus the new request)", req, tok, reqBefore+1, tokBefore+10)
	}
	if got := len(mustRows(t, s, until, midnight)); got != 11 {
		t.Errorf("rows in [pruned_until, 00:00): %d, want the 11 written there kept", got)
	}
}

package ledger

import (
	"errors"
	"testing"
	"time"
)

// A prune goes on while a chunk deletes a full PruneChunk rows and stops
// at the first short one, summing the deletions; the cut is the last
// chunk's; an error stops it at once.
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
			res, err := PruneInChunks(func(first bool) (int64, int64, error) {
				if first != (calls == 0) {
					t.Errorf("call %d: first = %v", calls, first)
				}
				i := calls
				calls++
				if i == tc.failAt {
					return 0, 0, boom
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

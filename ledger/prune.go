package ledger

// Pruning (`rotor ledger prune`): usage rows before a cut are deleted, the
// rollups are kept, so that every read over pruned time still answers.
//
// Only settled rows already behind the fold frontier are deleted: they are
// counted in usage_minute (and usage_hour, written from it) and in
// usage_hour_dims. The cut is moved back to the start of its hour (UTC),
// and to the fold frontier's hour when that is earlier, so pruned time is
// whole hours that only rollups describe: the rollups count whole minutes
// and hours, so no read could tell the kept rows of a partly pruned hour
// (or minute) from the pruned ones. A cut inside an hour (`--before
// 10:17:30`) read the raw rows of that hour's kept part as all of it, and
// a report or window ending just after the cut lost the rows deleted
// before it. Unsettled rows stay (they are needed by `ledger settle`, and
// a report reads them raw, see unsettledHours). meta pruned_until (unix
// ms, absent = 0) records the latest cut; the reads round a range that
// starts (or ends) in pruned time out to the rollups' buckets there (see
// view.segs and Report): a window over pruned time then counts whole
// minutes, a report whole hours, never less than the rows it covers. A
// frontier inside an hour, stored by a rotor that did not move the cut
// back, makes its partly pruned minute (and hour) count as pruned, as on
// PostgreSQL (pgledger's view.round).

import (
	"context"
	"fmt"
	"time"
)

// qPrunedUntil reads the prune frontier: rows before it may be gone.
const qPrunedUntil = `SELECT COALESCE((SELECT value FROM meta WHERE key = 'pruned_until'), 0)`

// PruneChunk bounds the rows one transaction deletes, so that a bridge on
// the same database waits for one short transaction at a time.
const PruneChunk = 5000

// PruneInChunks calls chunk until it deletes fewer than PruneChunk rows
// and sums what the chunks did: chunk deletes at most PruneChunk rows in
// one transaction and returns how many it deleted and the cut it applied
// (Unix milliseconds). The first call (first true) decides the cut and
// records it as pruned_until; every later call gets that cut and deletes
// before it, never a cut of its own: the fold frontier (SQLite) or the
// clock (PostgreSQL) may pass the next hour between two chunks, and a
// chunk cutting there would delete rows after pruned_until, which every
// read takes from the rows. Both engines prune this way, so that no
// transaction holds the admission lock long.
func PruneInChunks(chunk func(first bool, cut int64) (deleted, until int64, err error)) (PruneResult, error) {
	var res PruneResult
	var cut int64
	for first := true; ; first = false {
		n, until, err := chunk(first, cut)
		if err != nil {
			return res, err
		}
		if first {
			cut = until
		}
		res.Deleted += n
		res.Until = time.UnixMilli(cut).UTC()
		if n < PruneChunk {
			return res, nil
		}
	}
}

// PruneRequest asks Prune to delete the usage rows before Before.
type PruneRequest struct {
	Before time.Time
	// Check, when set, is called inside each deleting transaction with
	// the stored budgets and the ledger's clock: an error refuses the
	// prune (package budgets knows the windows, the ledger does not).
	Check func(now time.Time, budgets []BudgetRecord) error
}

// PruneResult says what Prune did.
type PruneResult struct {
	// Deleted counts the rows deleted.
	Deleted int64
	// Until is the cut applied, always a whole hour (UTC): the start of
	// Before's hour, since the rollups cannot split an hour into pruned
	// and kept rows; or earlier when rows before it were not yet folded
	// into the rollups (SQLite: the fold frontier's hour; PostgreSQL
	// folds every row as it is written, so only a Before later than the
	// ledger's now moves it further).
	Until time.Time
	// KeptUnsettled counts the unsettled rows before Until that were
	// kept.
	KeptUnsettled int64
}

// Pruner deletes old usage rows while keeping every read over them
// answered from rollups. The SQLite Store and the PostgreSQL one
// (ledger/pgledger) implement it; the conformance suite tests both.
type Pruner interface {
	Prune(ctx context.Context, req PruneRequest) (PruneResult, error)
	// PrunedUntil returns the prune frontier: settled rows before it may
	// have been deleted (their usage is only in the rollups); zero when
	// never pruned.
	PrunedUntil(ctx context.Context) (time.Time, error)
}

var _ Pruner = (*Store)(nil)

// Prune deletes the settled usage rows before the start of req.Before's
// hour (moved back to the fold frontier's hour when needed), keeping the
// rollups; see the comment at the top of prune.go.
func (s *Store) Prune(ctx context.Context, req PruneRequest) (PruneResult, error) {
	if s.readOnly {
		return PruneResult{}, ErrReadOnly
	}
	res, err := PruneInChunks(func(first bool, cut int64) (int64, int64, error) { return s.pruneChunk(ctx, req, first, cut) })
	if err != nil {
		return res, err
	}
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM usage WHERE ts_ms < ? AND state = 0`, res.Until.UnixMilli()).Scan(&res.KeptUnsettled); err != nil {
		return res, fmt.Errorf("prune: %w", err)
	}
	return res, nil
}

// pruneChunk runs one immediate transaction: it checks the budgets, decides
// the cut and moves pruned_until to it (first), or takes the first
// chunk's cut, and deletes at most PruneChunk rows before it. Running on its
// own connection, it moves the writer's data_version, so the writer drops
// its window cache and rereads the frontiers.
func (s *Store) pruneChunk(ctx context.Context, req PruneRequest, first bool, until int64) (int64, int64, error) {
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return 0, 0, fmt.Errorf("prune: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return 0, 0, fmt.Errorf("prune: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	if req.Check != nil {
		bs, err := listBudgets(ctx, conn)
		if err != nil {
			return 0, 0, err
		}
		if err := req.Check(s.clk.Now(), bs); err != nil {
			return 0, 0, err
		}
	}
	if first {
		var foldUntil int64
		if err := conn.QueryRowContext(ctx, qFoldUntil).Scan(&foldUntil); err != nil {
			return 0, 0, fmt.Errorf("prune: %w", err)
		}
		until = FloorTo(min(req.Before.UnixMilli(), foldUntil), hourMS)
		if _, err := conn.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('pruned_until', ?)
ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)`, until); err != nil {
			return 0, 0, fmt.Errorf("prune: %w", err)
		}
	}
	r, err := conn.ExecContext(ctx, `DELETE FROM usage WHERE (ts_ms, request_id) IN (SELECT ts_ms, request_id FROM usage WHERE ts_ms < ? AND state = 1 LIMIT ?)`, until, PruneChunk)
	if err != nil {
		return 0, 0, fmt.Errorf("prune: %w", err)
	}
	n, _ := r.RowsAffected()
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return 0, 0, fmt.Errorf("prune: %w", err)
	}
	committed = true
	return n, until, nil
}

// PrunedUntil returns the prune frontier: usage rows before it may have
// been deleted (their usage is in the rollups); zero when never pruned.
func (s *Store) PrunedUntil(ctx context.Context) (time.Time, error) {
	var ms int64
	if err := s.db.QueryRowContext(ctx, qPrunedUntil).Scan(&ms); err != nil {
		return time.Time{}, fmt.Errorf("ledger %s: %w", s.path, err)
	}
	if ms == 0 {
		return time.Time{}, nil
	}
	return time.UnixMilli(ms).UTC(), nil
}

// prunedTo is the end of pruned time for windows: the prune frontier, or
// the end of its minute for a frontier inside one (stored by a rotor that
// did not move the cut back to its hour), whose rows before the frontier
// are gone and whose rollup row cannot be split.
func (v *view) prunedTo() int64 { return CeilTo(v.prunedUntil, minuteMS) }

// segs is segments for this view, with a range that starts or ends in
// pruned time moved out to whole minutes there (only the rollups describe
// pruned time; a window then counts whole minutes, never less).
func (v *view) segs(f, t int64) []segment {
	p := v.prunedTo()
	if f < p {
		f = FloorTo(f, minuteMS)
	}
	if t < p {
		t = CeilTo(t, minuteMS)
	}
	return segments(f, t, v.hourUntil, v.foldUntil)
}

// prunedMinute reports whether the raw range [lo, hi) lies in pruned time:
// a whole minute there, whose rows only its rollup row describes.
func (v *view) prunedMinute(lo, hi int64) bool { return hi <= v.prunedTo() }

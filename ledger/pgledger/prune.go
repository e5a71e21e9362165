package pgledger

// Pruning (`rotor ledger prune`) on PostgreSQL, as on SQLite: the settled
// usage rows before the cut are deleted, the rollups are kept, so that every
// read over pruned time still answers.
//
// The rollups here count every row in the transaction that writes it (no
// fold frontier), so any settled row before the cut may go at once. The
// cut is moved back to the start of its hour (UTC), as on SQLite: the
// rollups count whole minutes and hours, so a cut inside an hour would
// leave an hour whose kept rows no read can tell from its pruned ones,
// and a report (or window) starting after the cut in that hour would
// count the whole hour, rows before the cut included.
// Unsettled rows stay (`ledger settle` resolves them; InFlight reads them).
// meta pruned_until (unix ms, absent = 0) records the latest cut; every
// read rounds a range that starts or ends before it out to the rollups'
// buckets there (view.round, Report): a window then counts whole minutes
// and a report whole hours, never less than the rows they cover, and no
// read ever reads a raw row of pruned time. The partly pruned minute (and
// hour) of a frontier that is not on one (stored before the cut was moved
// back to its hour) counts as pruned.

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotorhq/rotor/ledger"
)

// qPrunedUntil reads the prune frontier: settled rows before it may be
// gone.
const qPrunedUntil = `COALESCE((SELECT value FROM meta WHERE key = 'pruned_until'), 0)`

var _ ledger.Pruner = (*Store)(nil)

// Prune deletes the settled usage rows before the start of the hour of
// req.Before (or of the ledger's now, when earlier), keeping the rollups; see the comment at the top of
// prune.go. Each chunk is one transaction under the admission lock that
// first calls req.Check with the stored budgets and the ledger's clock.
func (s *Store) Prune(ctx context.Context, req ledger.PruneRequest) (ledger.PruneResult, error) {
	if err := s.checkOpen(); err != nil {
		return ledger.PruneResult{}, err
	}
	res, err := ledger.PruneInChunks(func(first bool, cut int64) (int64, int64, error) { return s.pruneChunk(ctx, req, first, cut) })
	if err != nil {
		return res, err
	}
	rctx, cancel := readCtx(ctx)
	defer cancel()
	if err := s.pool.QueryRow(rctx, `SELECT COUNT(*) FROM usage WHERE ts_ms < $1 AND state = 0`, res.Until.UnixMilli()).Scan(&res.KeptUnsettled); err != nil {
		return res, s.wrap("prune", err)
	}
	return res, nil
}

// PrunedUntil returns the prune frontier: settled rows before it may have
// been deleted (their usage is only in the rollups); zero when never
// pruned.
func (s *Store) PrunedUntil(ctx context.Context) (time.Time, error) {
	if err := s.checkOpen(); err != nil {
		return time.Time{}, err
	}
	rctx, cancel := readCtx(ctx)
	defer cancel()
	var ms int64
	if err := s.pool.QueryRow(rctx, `SELECT `+qPrunedUntil).Scan(&ms); err != nil {
		return time.Time{}, s.wrap("prune frontier", err)
	}
	if ms == 0 {
		return time.Time{}, nil
	}
	return time.UnixMilli(ms).UTC(), nil
}

// pruneChunk runs one transaction: the admission lock (so that a batch
// reads the frontier and the rows of one state), the budgets' check, the
// cut and the frontier (first; later chunks take the first one's cut, as
// the clock may pass an hour between them) and at most ledger.PruneChunk
// deletions before the cut. A batch that begins
// after it reads the new frontier in its first statement after the lock.
func (s *Store) pruneChunk(ctx context.Context, req ledger.PruneRequest, first bool, cut int64) (int64, int64, error) {
	var n int64
	until := cut
	err := s.change(ctx, "prune", false, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, s.lockKey); err != nil {
			return err
		}
		var nowMS int64
		if err := tx.QueryRow(ctx, `SELECT `+msNow).Scan(&nowMS); err != nil {
			return err
		}
		now := time.UnixMilli(nowMS).UTC()
		if s.clk != nil {
			now = s.clk.Now()
		}
		if req.Check != nil {
			bs, err := listBudgets(ctx, tx)
			if err != nil {
				return err
			}
			if err := req.Check(now, bs); err != nil {
				return &refusal{err}
			}
		}
		if first {
			until = ledger.FloorTo(min(req.Before.UnixMilli(), now.UnixMilli()), hourMS)
			if _, err := tx.Exec(ctx, `INSERT INTO meta (key, value) VALUES ('pruned_until', $1)
ON CONFLICT (key) DO UPDATE SET value = GREATEST(meta.value, excluded.value)`, until); err != nil {
				return err
			}
		}
		tag, err := tx.Exec(ctx, `DELETE FROM usage WHERE request_id IN (SELECT request_id FROM usage WHERE ts_ms < $1 AND state = 1 LIMIT $2)`, until, ledger.PruneChunk)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, bumpUsageVersion); err != nil {
			return err
		}
		n = tag.RowsAffected()
		return nil
	})
	return n, until, err
}

// round moves a range [f, t) that starts or ends in pruned time out to
// whole minutes there: only the rollups describe that time (prune.go).
func (v *view) round(f, t int64) (int64, int64) {
	p := ledger.CeilTo(v.prunedUntil, minuteMS)
	if f < p {
		f = ledger.FloorTo(f, minuteMS)
	}
	if t < p {
		t = ledger.CeilTo(t, minuteMS)
	}
	return f, t
}

// prunedMinute reports whether the raw range [lo, hi), inside one minute,
// lies in pruned time: only the minute's rollup row describes its rows.
func (v *view) prunedMinute(hi int64) bool { return hi <= ledger.CeilTo(v.prunedUntil, minuteMS) }

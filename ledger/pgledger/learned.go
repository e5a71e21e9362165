package pgledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotorhq/rotor/ledger"
)

// GetLearned returns the live learned record id (expiry after now).
func (s *Store) GetLearned(ctx context.Context, id string, now time.Time) (ledger.LearnedRecord, bool, error) {
	if err := s.checkOpen(); err != nil {
		return ledger.LearnedRecord{}, false, err
	}
	ctx, cancel := readCtx(ctx)
	defer cancel()
	var r ledger.LearnedRecord
	var created, expires int64
	err := s.pool.QueryRow(ctx, `SELECT id, state, revision, created_ms, expires_ms FROM learned_cooldown WHERE id = $1 AND expires_ms > $2`, id, now.UnixMilli()).
		Scan(&r.ID, &r.State, &r.Revision, &created, &expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return ledger.LearnedRecord{}, false, nil
	}
	if err != nil {
		return ledger.LearnedRecord{}, false, fmt.Errorf("learned state %s: %w: %v", s.Location(), ledger.ErrUnavailable, err)
	}
	r.CreatedAt, r.ExpiresAt = time.UnixMilli(created).UTC(), time.UnixMilli(expires).UTC()
	return r, true, nil
}

// PutLearned stores state under id when the live record's revision is
// expected (0: none may exist), in one transaction under the schema's
// learned-state lock that first reclaims expired rows and, for a new
// record, checks the capacity. It returns the new revision.
func (s *Store) PutLearned(ctx context.Context, id string, state []byte, expected int64, now time.Time, capacity int, retention time.Duration) (int64, error) {
	var rev int64
	err := s.change(ctx, "learned state", false, func(ctx context.Context, tx pgx.Tx) error {
		nowMS := now.UnixMilli()
		if err := s.reclaimLearned(ctx, tx, nowMS); err != nil {
			return err
		}
		var cur int64
		err := tx.QueryRow(ctx, `SELECT revision FROM learned_cooldown WHERE id = $1`, id).Scan(&cur)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if cur != expected {
			return &refusal{fmt.Errorf("learned state: have revision %d, expected %d: %w", cur, expected, ledger.ErrStaleRevision)}
		}
		if cur == 0 {
			var n int
			if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM learned_cooldown`).Scan(&n); err != nil {
				return err
			}
			if n >= capacity {
				return &refusal{fmt.Errorf("learned state: %d records: %w", n, ledger.ErrCapacity)}
			}
			if _, err := tx.Exec(ctx, `INSERT INTO learned_cooldown (id, state, revision, created_ms, expires_ms) VALUES ($1, $2, 1, $3, $4)`,
				id, state, nowMS, now.Add(retention).UnixMilli()); err != nil {
				return err
			}
			rev = 1
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE learned_cooldown SET state = $1, revision = $2 WHERE id = $3`, state, cur+1, id); err != nil {
			return err
		}
		rev = cur + 1
		return nil
	})
	return rev, err
}

// LearnedRecords returns every stored learned-cooldown record.
func (s *Store) LearnedRecords(ctx context.Context) ([]ledger.LearnedRecord, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	ctx, cancel := readCtx(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, `SELECT id, state, revision, created_ms, expires_ms FROM learned_cooldown ORDER BY id`)
	if err != nil {
		return nil, s.wrap("learned records", err)
	}
	defer rows.Close()
	var out []ledger.LearnedRecord
	for rows.Next() {
		var r ledger.LearnedRecord
		var c, e int64
		if err := rows.Scan(&r.ID, &r.State, &r.Revision, &c, &e); err != nil {
			return nil, s.wrap("learned records", err)
		}
		r.CreatedAt, r.ExpiresAt = time.UnixMilli(c).UTC(), time.UnixMilli(e).UTC()
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, s.wrap("learned records", err)
	}
	return out, nil
}

// ImportLearned writes the records whose id is not stored yet, and
// returns how many it added, within PutLearned's bounds at now, under the
// same lock: expired rows are reclaimed first, a record already expired is
// skipped, none is added past capacity live records, and none lives past
// its creation plus retention.
func (s *Store) ImportLearned(ctx context.Context, recs []ledger.LearnedRecord, now time.Time, capacity int, retention time.Duration) (int, error) {
	added := 0
	err := s.change(ctx, "import learned state", false, func(ctx context.Context, tx pgx.Tx) error {
		added = 0
		nowMS := now.UnixMilli()
		if err := s.reclaimLearned(ctx, tx, nowMS); err != nil {
			return err
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM learned_cooldown`).Scan(&n); err != nil {
			return err
		}
		for _, r := range recs {
			if ex := r.CreatedAt.Add(retention); r.ExpiresAt.After(ex) {
				r.ExpiresAt = ex
			}
			if n >= capacity || r.ExpiresAt.UnixMilli() <= nowMS {
				continue // full, or expired: what PutLearned would refuse
			}
			tag, err := tx.Exec(ctx, `INSERT INTO learned_cooldown (id, state, revision, created_ms, expires_ms) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING`,
				r.ID, r.State, max(r.Revision, 1), r.CreatedAt.UnixMilli(), r.ExpiresAt.UnixMilli())
			if err != nil {
				return err
			}
			added += int(tag.RowsAffected())
			n += int(tag.RowsAffected())
		}
		return nil
	})
	return added, err
}

// reclaimLearned takes the schema's learned-state lock for tx and deletes
// the records expired at nowMS: how every write of learned state begins.
func (s *Store) reclaimLearned(ctx context.Context, tx pgx.Tx, nowMS int64) error {
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, s.learnedKey); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `DELETE FROM learned_cooldown WHERE expires_ms <= $1`, nowMS)
	return err
}

package ledger

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// Learned-state errors.
var (
	// ErrStaleRevision: the stored revision is not the expected one.
	ErrStaleRevision = errors.New("stale revision")
	// ErrCapacity: creating a record would pass the capacity.
	ErrCapacity = errors.New("learned state capacity reached")
)

// LearnedRecord is one learned-cooldown state row.
type LearnedRecord struct {
	ID        string
	State     []byte
	Revision  int64
	CreatedAt time.Time
	ExpiresAt time.Time
}

// refusal marks an error a write function returns before writing
// anything: the batch goes on and the caller gets the error as is.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

func refuse(err error) error { return &refusal{err} }

// GetLearned returns the live learned record id (one whose expiry is after
// now).
func (s *Store) GetLearned(ctx context.Context, id string, now time.Time) (LearnedRecord, bool, error) {
	var r LearnedRecord
	var created, expires int64
	err := s.db.QueryRowContext(ctx, `SELECT id, state, revision, created_ms, expires_ms FROM learned_cooldown WHERE id = ? AND expires_ms > ?`, id, now.UnixMilli()).
		Scan(&r.ID, &r.State, &r.Revision, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return LearnedRecord{}, false, nil
	}
	if err != nil {
		return LearnedRecord{}, false, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	r.CreatedAt, r.ExpiresAt = time.UnixMilli(created).UTC(), time.UnixMilli(expires).UTC()
	return r, true, nil
}

// PutLearned stores state under id when the live record's revision is
// expected (0: none may exist), in one immediate transaction that first
// reclaims expired rows and, for a new record, checks that at most capacity
// live rows remain. A new record expires retention after now; an update
// keeps its creation and expiry. It returns the new revision.
//
// It is a write on the request path, bounded by ctx (the learner's store
// timeout): while another process holds the database's lock, it is given
// up once ctx ends, as a reservation is, where other writes wait out
// busy_timeout.
func (s *Store) PutLearned(ctx context.Context, id string, state []byte, expected int64, now time.Time, capacity int, retention time.Duration) (int64, error) {
	var rev int64
	err := s.w.submit(ctx, &op{kind: opFunc, fn: func(ctx context.Context, q execQuerier) error {
		nowMS := now.UnixMilli()
		if _, err := q.ExecContext(ctx, `DELETE FROM learned_cooldown WHERE expires_ms <= ?`, nowMS); err != nil {
			return err
		}
		var cur int64
		err := q.QueryRowContext(ctx, `SELECT revision FROM learned_cooldown WHERE id = ?`, id).Scan(&cur)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if cur != expected {
			return refuse(fmt.Errorf("learned state: have revision %d, expected %d: %w", cur, expected, ErrStaleRevision))
		}
		if cur == 0 {
			var n int
			if err := q.QueryRowContext(ctx, `SELECT COUNT(*) FROM learned_cooldown`).Scan(&n); err != nil {
				return err
			}
			if n >= capacity {
				return refuse(fmt.Errorf("learned state: %d records: %w", n, ErrCapacity))
			}
			if _, err := q.ExecContext(ctx, `INSERT INTO learned_cooldown (id, state, revision, created_ms, expires_ms) VALUES (?, ?, 1, ?, ?)`,
				id, state, nowMS, now.Add(retention).UnixMilli()); err != nil {
				return err
			}
			rev = 1
			return nil
		}
		if _, err := q.ExecContext(ctx, `UPDATE learned_cooldown SET state = ?, revision = ? WHERE id = ?`, state, cur+1, id); err != nil {
			return err
		}
		rev = cur + 1
		return nil
	}})
	return rev, err
}

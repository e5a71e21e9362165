// Package learnedstore adapts the ledger's learned_cooldown table to
// learned.Store: the spec's private storage domain backed by SQLite
// (INTELLIGENCE_STORAGE_BACKEND=sqlite, alias d1), shared by every rotor
// process on the database.
//
// It imports ledger and learned; neither imports the other.
package learnedstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rotorhq/rotor/learned"
	"github.com/rotorhq/rotor/ledger"
)

// Store is a learned.Store over a ledger.
type Store struct{ l ledger.Ledger }

// New returns the SQLite learned store of l.
func New(l ledger.Ledger) *Store { return &Store{l: l} }

var _ learned.Store = (*Store)(nil)

// Get implements learned.Store.
func (s *Store) Get(ctx context.Context, id string, now time.Time) (learned.Record, bool, error) {
	r, ok, err := s.l.GetLearned(ctx, id, now)
	if err != nil {
		return learned.Record{}, false, fmt.Errorf("%w: %v", learned.ErrUnavailable, err)
	}
	if !ok {
		return learned.Record{}, false, nil
	}
	return learned.Record{ID: r.ID, State: r.State, Revision: r.Revision, CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt}, true, nil
}

// Put implements learned.Store.
func (s *Store) Put(ctx context.Context, rec learned.Record, expected int64, now time.Time) (int64, error) {
	if err := learned.ValidateRecord(rec, expected); err != nil {
		return 0, err
	}
	rev, err := s.l.PutLearned(ctx, rec.ID, rec.State, expected, now, learned.StoreCapacity, learned.Retention)
	switch {
	case err == nil:
		return rev, nil
	case errors.Is(err, ledger.ErrStaleRevision):
		return 0, fmt.Errorf("%w: %v", learned.ErrStaleRevision, err)
	case errors.Is(err, ledger.ErrCapacity):
		return 0, fmt.Errorf("%w: %v", learned.ErrCapacity, err)
	}
	return 0, fmt.Errorf("%w: %v", learned.ErrUnavailable, err)
}

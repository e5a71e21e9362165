package learned

import (
	"context"
	"sync"
	"time"
)

// MemoryStore is the process-local Store: bounded, expiring, and reset when
// the process restarts. It is not a distributed quota authority. The zero
// value is not ready; use NewMemoryStore.
type MemoryStore struct {
	mu    sync.Mutex
	limit int
	recs  map[string]*Record
	// nextExpiry is the earliest ExpiresAt held (zero when empty), so that
	// a write reclaims expired records without scanning when none can be.
	nextExpiry time.Time
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty store of at most limit live records;
// limit <= 0 means StoreCapacity.
func NewMemoryStore(limit int) *MemoryStore {
	if limit <= 0 {
		limit = StoreCapacity
	}
	return &MemoryStore{limit: limit, recs: make(map[string]*Record)}
}

// Get returns the live record id; expired records read as absent.
func (m *MemoryStore) Get(_ context.Context, id string, now time.Time) (Record, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.recs[id]
	if !ok || !now.Before(r.ExpiresAt) {
		return Record{}, false, nil
	}
	out := *r
	out.State = append([]byte(nil), r.State...)
	return out, true, nil
}

// Put stores rec as the Store interface says: revision check, capacity
// check and reclaiming of expired records happen under one lock.
func (m *MemoryStore) Put(_ context.Context, rec Record, expectedRevision int64, now time.Time) (int64, error) {
	if err := ValidateRecord(rec, expectedRevision); err != nil {
		return 0, err
	}
	now = time.UnixMilli(now.UnixMilli())
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reclaim(now)
	state := append([]byte(nil), rec.State...)
	if cur, ok := m.recs[rec.ID]; ok {
		if cur.Revision != expectedRevision {
			return 0, ErrStaleRevision
		}
		cur.State = state
		cur.Revision++
		return cur.Revision, nil
	}
	if expectedRevision != 0 {
		return 0, ErrStaleRevision
	}
	if len(m.recs) >= m.limit {
		return 0, ErrCapacity
	}
	r := &Record{ID: rec.ID, State: state, Revision: 1, CreatedAt: now, ExpiresAt: now.Add(Retention)}
	m.recs[rec.ID] = r
	if m.nextExpiry.IsZero() || r.ExpiresAt.Before(m.nextExpiry) {
		m.nextExpiry = r.ExpiresAt
	}
	return r.Revision, nil
}

// Len reports the live records at now.
func (m *MemoryStore) Len(now time.Time) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, r := range m.recs {
		if now.Before(r.ExpiresAt) {
			n++
		}
	}
	return n
}

// reclaim deletes expired records. m.mu is held.
func (m *MemoryStore) reclaim(now time.Time) {
	if m.nextExpiry.IsZero() || now.Before(m.nextExpiry) {
		return
	}
	m.nextExpiry = time.Time{}
	for id, r := range m.recs {
		if !now.Before(r.ExpiresAt) {
			delete(m.recs, id)
			continue
		}
		if m.nextExpiry.IsZero() || r.ExpiresAt.Before(m.nextExpiry) {
			m.nextExpiry = r.ExpiresAt
		}
	}
}

package learnedstore

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/testutil/ledgertest"
	"github.com/rotorhq/rotor/learned"
	"github.com/rotorhq/rotor/learned/storetest"
)

// The SQLite store follows every rule the memory store does.
func TestSQLiteStoreConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) learned.Store {
		return New(ledgertest.Open(t))
	})
}

// Two rotor processes sharing the database see each other's learned
// state, and a stale revision from one is refused for the other.
func TestTwoStoresShareStateAndRefuseStaleRevision(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rotor.db")
	ctx := context.Background()
	open := func() *Store {
		return New(ledgertest.OpenAt(t, path))
	}
	a, b := open(), open()
	now := time.Now()
	id := storetest.ID(1)
	rev, err := a.Put(ctx, learned.Record{ID: id, State: []byte("s1")}, 0, now)
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := b.Get(ctx, id, now)
	if err != nil || !ok || string(got.State) != "s1" || got.Revision != rev {
		t.Fatalf("other process reads %+v, %v, %v", got, ok, err)
	}
	if _, err := b.Put(ctx, learned.Record{ID: id, State: []byte("s2")}, rev, now); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Put(ctx, learned.Record{ID: id, State: []byte("stale")}, rev, now); !errors.Is(err, learned.ErrStaleRevision) {
		t.Errorf("stale put = %v, want ErrStaleRevision", err)
	}
}

// A missing table (a database from before the migration, or damaged)
// answers ErrUnavailable, which the learner treats as "use the existing
// cooldown".
func TestMissingTableIsUnavailable(t *testing.T) {
	l := ledgertest.Open(t)
	if _, err := ledgertest.DB(t, l.Path()).Exec(`DROP TABLE learned_cooldown`); err != nil {
		t.Fatal(err)
	}
	s := New(l)
	if _, _, err := s.Get(context.Background(), storetest.ID(1), time.Now()); !errors.Is(err, learned.ErrUnavailable) {
		t.Errorf("Get = %v, want ErrUnavailable", err)
	}
	if _, err := s.Put(context.Background(), learned.Record{ID: storetest.ID(1), State: []byte("x")}, 0, time.Now()); !errors.Is(err, learned.ErrUnavailable) {
		t.Errorf("Put = %v, want ErrUnavailable", err)
	}
}

package learnedstore

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/secret"
	"github.com/rotorhq/rotor/internal/testutil/ledgertest"
	"github.com/rotorhq/rotor/learned"
	"github.com/rotorhq/rotor/learned/storetest"
	"github.com/rotorhq/rotor/ledger"
	"github.com/rotorhq/rotor/pool"
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

// A learned-state write is on the request path and bounded by the
// learner's store timeout: while another process holds the database's
// lock, a throttle's Record gives the write up and the pool rests the
// credential for the existing cooldown, instead of holding the request
// for busy_timeout (here an hour) per write.
func TestWriteGivesUpAtTheStoreTimeout(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rotor.db")
	lg := ledgertest.OpenAt(t, path, ledger.Options{BusyTimeout: time.Hour})
	policy, err := learned.ParsePolicy(`{"buckets":[{"provider":"api","model":"m","quota_bucket":null}]}`)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	l := learned.New(learned.Config{Mode: learned.ModeApply, Policy: policy, Store: New(lg), StoreTimeout: 100 * time.Millisecond, Clock: clk})
	p := pool.New(pool.Config{Options: pool.Options{Name: "api"}, Credentials: []pool.Credential{{Name: "a", Key: secret.New("sk-test-aaaaaaaaaaaaaaaa")}},
		Settings: pool.Settings{ModelCooldownEnabled: true}, Learner: l, Clock: clk})

	other, err := ledgertest.DB(t, path).Conn(context.Background()) // another process's lock
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if _, err := other.ExecContext(context.Background(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	defer other.ExecContext(context.Background(), `ROLLBACK`)

	m := pool.Scope{Model: "m"}
	done := make(chan struct{})
	go func() {
		p.Record("a", pool.Observation{Scope: m, Status: 429})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second): // a failure bound, not a speed check: unfixed, it waits an hour
		t.Fatal("Record of one 429 still waits for the database's lock; the store timeout is 100 ms")
	}
	if d, ok := p.NextRelease(m, []string{"a"}); !ok || d != pool.ThrottleRest {
		t.Errorf("a rests %v (cooling %v), want the existing cooldown %v", d, ok, pool.ThrottleRest)
	}
}

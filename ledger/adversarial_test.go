package ledger

import (
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/testutil"
)

// Issue 8, case 10: the SQLite write lock held by another connection.

// holdWriteLock opens a second, independent connection to path and takes
// the write lock with BEGIN IMMEDIATE, as another rotor process (or a
// sqlite3 shell) would. The returned func commits and releases it.
func holdWriteLock(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(0)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	return testutil.HoldWriteLock(t, db, db.Close)
}

func reserveAll(s *Store, n int, prefix string) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Reserve(ctx, Reservation{RequestID: fmt.Sprintf("%s-%d", prefix, i), Operation: "decisions", Expires: t0.Add(time.Hour)}, nil)
		}()
	}
	wg.Wait()
	return errs
}

func TestAdversarialLockHeldWithinBusyTimeoutAdmissionsWaitAndSucceed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rotor.db")
	s := openWith(t, path, Options{Clock: clock.NewFake(t0), BusyTimeout: 5 * time.Second})
	release := holdWriteLock(t, path)
	const hold = 400 * time.Millisecond
	var done atomic.Int32
	result := make(chan []error, 1)
	go func() {
		errs := reserveAll(s, 20, "wait")
		done.Add(1)
		result <- errs
	}()
	// The lock is held for a while on purpose: the admissions must wait
	// for it, not fail and not slip past it.
	time.Sleep(hold)
	if done.Load() != 0 {
		t.Fatal("admissions finished while another connection held the write lock")
	}
	release()
	select {
	case errs := <-result:
		for i, err := range errs {
			if err != nil {
				t.Errorf("admission %d: %v, want it to wait for the lock and succeed", i, err)
			}
		}
	case <-time.After(10 * time.Second):
		t.Fatal("admissions did not finish after the lock was released")
	}
	rows, _ := s.Rows(ctx, t0.Add(-time.Hour), t0.Add(time.Hour), 0)
	if len(rows) != 20 {
		t.Errorf("%d reservations, want 20", len(rows))
	}
}

// Beyond busy_timeout every waiting admission fails closed with
// ErrUnavailable, each within about one busy_timeout (not one per queued
// write), and nothing is written; once the lock is released the ledger
// serves again.
func TestAdversarialLockHeldBeyondBusyTimeoutFailsClosedPromptly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rotor.db")
	const busy = 300 * time.Millisecond
	s := openWith(t, path, Options{Clock: clock.NewFake(t0), BusyTimeout: busy})
	release := holdWriteLock(t, path)
	const n = 16
	start := time.Now()
	errs := reserveAll(s, n, "busy")
	took := time.Since(start)
	for i, err := range errs {
		if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "ledger.busy_timeout") {
			t.Errorf("admission %d = %v, want ErrUnavailable naming ledger.busy_timeout", i, err)
		}
	}
	// One busy_timeout for the batch, a second one at most for writes that
	// queued behind it; never one per write.
	if took < busy || took > 3*busy+time.Second {
		t.Errorf("%d admissions failed after %v, want between %v and %v", n, took, busy, 3*busy+time.Second)
	}
	release()
	reserve(t, s, "after")
	rows, _ := s.Rows(ctx, t0.Add(-time.Hour), t0.Add(time.Hour), 0)
	if len(rows) != 1 || rows[0].RequestID != "after" {
		t.Errorf("rows = %+v, want only the admission made after the lock was released", rows)
	}
}

// Every pooled connection, the writer's own included, carries the
// documented pragmas, for the defaults and for configured values; and
// transactions begin IMMEDIATE (a second writer waits for the lock rather
// than failing later on an upgrade).
func TestAdversarialEveryConnectionCarriesConfiguredPragmas(t *testing.T) {
	tests := []struct {
		name string
		opts Options
		want map[string]string
	}{
		{"defaults", Options{}, map[string]string{"journal_mode": "wal", "synchronous": "1", "busy_timeout": "5000", "foreign_keys": "1"}},
		{"full, 1.5s", Options{Synchronous: "full", BusyTimeout: 1500 * time.Millisecond}, map[string]string{"journal_mode": "wal", "synchronous": "2", "busy_timeout": "1500", "foreign_keys": "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Clock = clock.NewFake(t0)
			s := openWith(t, filepath.Join(t.TempDir(), "rotor.db"), tt.opts)
			check := func(what string, c *sql.Conn) {
				t.Helper()
				p, err := s.Pragmas(ctx, c)
				if err != nil {
					t.Fatal(err)
				}
				for k, v := range tt.want {
					if p[k] != v {
						t.Errorf("%s: %s = %q, want %q", what, k, p[k], v)
					}
				}
			}
			check("writer connection", s.w.conn)
			// Every other connection the pool may open.
			free := s.DB().Stats().MaxOpenConnections - s.DB().Stats().InUse
			var conns []*sql.Conn
			for i := range free {
				c, err := s.DB().Conn(ctx)
				if err != nil {
					t.Fatal(err)
				}
				conns = append(conns, c)
				check(fmt.Sprintf("pooled connection %d", i), c)
			}
			for _, c := range conns {
				c.Close()
			}
			if free < 4 {
				t.Errorf("only %d pooled connections checked", free)
			}
		})
	}
	t.Run("transactions begin immediate", func(t *testing.T) {
		s := openWith(t, filepath.Join(t.TempDir(), "rotor.db"), Options{Clock: clock.NewFake(t0), BusyTimeout: 100 * time.Millisecond})
		tx1, err := s.DB().BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer tx1.Rollback()
		tx2, err := s.DB().BeginTx(ctx, nil)
		if err == nil {
			tx2.Rollback()
			t.Fatal("a second transaction began while the first held the write lock: BEGIN is deferred, want IMMEDIATE")
		}
	})
}

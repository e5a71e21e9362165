package ledger

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
)

// Issue 14, item 5: admission under a lock held by another process.

// waitUntil polls cond (a condition on the writer's state, not a time).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting until %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// queued reports whether the writer leads a batch with n ops queued
// behind it.
func queued(w *writer, n int) func() bool {
	return func() bool {
		w.q.mu.Lock()
		defer w.q.mu.Unlock()
		return w.q.leading && len(w.q.queue) == n
	}
}

// lockedLedger opens a ledger whose write lock another connection holds
// until release is called (or the test ends).
func lockedLedger(t *testing.T, busy time.Duration) (s *Store, release func()) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rotor.db")
	s = openWith(t, path, Options{Clock: clock.NewFake(t0), BusyTimeout: busy})
	reserve(t, s, "before") // the writer's connection is set up
	release = holdWriteLock(t, path)
	t.Cleanup(release)
	return s, release
}

func reserveAsync(s *Store, c context.Context, id string) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- s.Reserve(c, Reservation{RequestID: id, Operation: "decisions", Expires: t0.Add(time.Hour)}, nil)
	}()
	return done
}

func TestAdmissionHonoursDeadlineAndWaitsBusyTimeoutOnce(t *testing.T) {
	t.Run("request deadline", func(t *testing.T) {
		s, _ := lockedLedger(t, time.Minute)
		c, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := s.Reserve(c, Reservation{RequestID: "late", Operation: "decisions", Expires: t0.Add(time.Hour)}, nil)
		if !errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrUnavailable) {
			t.Errorf("Reserve past its deadline = %v, want context.DeadlineExceeded", err)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("Reserve waited %s, past its 100ms deadline, for the one-minute busy_timeout", d)
		}
	})

	t.Run("caller cancels", func(t *testing.T) {
		s, release := lockedLedger(t, time.Minute)
		ca, cancelA := context.WithCancel(ctx)
		cb, cancelB := context.WithCancel(ctx)
		defer cancelA()
		defer cancelB()
		a := reserveAsync(s, ca, "a")
		waitUntil(t, "a waits for the lock", queued(s.w, 0))
		b := reserveAsync(s, cb, "b")
		waitUntil(t, "b is queued behind a", queued(s.w, 1))
		cancelB() // queued: leaves the queue
		if err := <-b; !errors.Is(err, context.Canceled) {
			t.Errorf("queued Reserve cancelled = %v, want context.Canceled", err)
		}
		cancelA() // waiting for the lock: the wait is given up
		cancelled := time.Now()
		if err := <-a; !errors.Is(err, context.Canceled) {
			t.Errorf("Reserve cancelled while waiting for the lock = %v, want context.Canceled", err)
		}
		// At once, not after the one-minute busy_timeout: the writer is
		// free for the next request.
		if d := time.Since(cancelled); d > 30*time.Second {
			t.Errorf("Reserve returned %s after its caller cancelled, want at once, not the one-minute busy_timeout", d)
		}
		release()
		reserve(t, s, "after") // the interrupted wait left the writer usable
		if rows, err := s.Rows(ctx, t0.Add(-time.Hour), t0.Add(time.Hour), 0); err != nil || len(rows) != 2 {
			t.Errorf("rows = %d, %v; want before and after only, nothing of a or b", len(rows), err)
		}
	})

	t.Run("busy_timeout once", func(t *testing.T) {
		// Long enough that once (busy) and twice (2*busy) stay apart by
		// more than a loaded machine's scheduling delay: the bound below
		// leaves 2.5 s either way.
		const busy = 5 * time.Second
		s, _ := lockedLedger(t, busy)
		a := reserveAsync(s, ctx, "a")
		waitUntil(t, "a waits for the lock", queued(s.w, 0))
		start := time.Now()
		err := s.Reserve(ctx, Reservation{RequestID: "b", Operation: "decisions", Expires: t0.Add(time.Hour)}, nil)
		waited := time.Since(start)
		if !errors.Is(err, ErrUnavailable) {
			t.Errorf("Reserve under a held lock = %v, want ErrUnavailable", err)
		}
		// Queued behind a's batch, b used to wait for it and then for its
		// own batch: up to twice busy_timeout.
		if waited < busy*3/4 || waited > busy*3/2 {
			t.Errorf("b waited %s under a held lock, want busy_timeout (%s), once", waited, busy)
		}
		if err := <-a; !errors.Is(err, ErrUnavailable) {
			t.Errorf("a = %v, want ErrUnavailable", err)
		}
	})
}

// Close while a batch waits for another process's lock: it waits for that
// batch too, whose write then commits; it does not close the connection
// under it (a bridge's shutdown would lose the settlements in flight).
func TestCloseWaitsForTheRunningBatch(t *testing.T) {
	s, release := lockedLedger(t, time.Minute)
	a := reserveAsync(s, ctx, "a")
	waitUntil(t, "a waits for the lock", queued(s.w, 0))
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	waitUntil(t, "Close refuses new writes", func() bool {
		s.w.q.mu.Lock()
		defer s.w.q.mu.Unlock()
		return s.w.q.closed
	})
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a's batch still waited for the lock", err)
	default:
	}
	release()
	select {
	case err := <-a:
		if err != nil {
			t.Errorf("Reserve in the batch Close waited for = %v, want it committed", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Reserve in the batch Close waited for did not return once the lock was free")
	}
	if err := <-closed; err != nil {
		t.Errorf("Close: %v", err)
	}
	s2 := openAt(t, s.Path(), clock.NewFake(t0))
	if _, ok, err := s2.RowByID(ctx, "a"); !ok || err != nil {
		t.Errorf("row a after Close = %v, %v; want it stored", ok, err)
	}
}

// InFlight during admission answers from this process's open reservations
// when it can: those count as the SQL does, so a reservation at its expiry
// or settled earlier in the same batch is no request in flight, and a cost
// budget does not take a row of unknown cost for one.
func TestAdmissionInFlightCountsAsTheRows(t *testing.T) {
	s, release := lockedLedger(t, time.Minute)
	clk := s.clk.(*clock.Fake)
	inFlight := func(r WindowReader) (int64, error) {
		return r.InFlight(Window{From: t0.Add(-time.Hour), To: r.Now().Add(time.Millisecond)}, 3)
	}
	release()
	for id, exp := range map[string]time.Duration{"expiring": time.Minute, "settled": time.Hour} {
		if err := s.Reserve(ctx, Reservation{RequestID: id, Operation: "chat", Model: "m", Expires: t0.Add(exp)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Minute) // "expiring" is at its expiry: no longer in flight
	release = holdWriteLock(t, s.Path())
	lead := reserveAsync(s, ctx, "lead") // open after its batch, expiring in an hour
	waitUntil(t, "lead waits for the lock", queued(s.w, 0))
	settled := make(chan error, 1)
	go func() {
		settled <- s.Settle(ctx, Settlement{RequestID: "settled", Model: "m", Status: 200, InputTokens: Known(1), OutputTokens: Known(1), TotalTokens: Known(2)})
	}()
	waitUntil(t, "the settlement is queued behind lead", queued(s.w, 1))
	var got int64
	probe := make(chan error, 1)
	go func() {
		probe <- s.Reserve(ctx, Reservation{RequestID: "probe", Operation: "chat", Model: "m", Expires: t0.Add(time.Hour)}, AdmitFunc(func(r WindowReader, _ Reservation) error {
			var err error
			got, err = inFlight(r)
			return err
		}))
	}()
	waitUntil(t, "the probe is queued with the settlement", queued(s.w, 2))
	release()
	for what, c := range map[string]<-chan error{"lead": lead, "settlement": settled, "probe": probe} {
		if err := <-c; err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	if got != 2 {
		t.Errorf("InFlight at the probe's admission = %d, want 2 (before and lead): not the reservation at its expiry, nor the one settled in the probe's batch", got)
	}
}

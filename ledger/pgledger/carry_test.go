package pgledger

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/ledger"
)

// reserveSettle reserves id on s under admit and, when admitted, settles
// it; it returns Reserve's error.
func reserveSettle(t *testing.T, s *Store, admit ledger.Admitter, id string, exp time.Time) error {
	t.Helper()
	ctx := context.Background()
	err := s.Reserve(ctx, ledger.Reservation{RequestID: id, Expires: exp, Operation: "chat", Model: "m"}, admit)
	if err != nil {
		return err
	}
	if err := s.Settle(ctx, ledger.Settlement{RequestID: id, Model: "m", Status: 200, InputTokens: ledger.Known(1), OutputTokens: ledger.Known(1), TotalTokens: ledger.Known(2)}); err != nil {
		t.Fatalf("settle %s: %v", id, err)
	}
	return nil
}

func wantAdmitted(t *testing.T, err error, id string, want bool) {
	t.Helper()
	var ee *budgets.ExceededError
	switch {
	case want && err != nil:
		t.Fatalf("%s: %v, want admitted", id, err)
	case !want && !errors.As(err, &ee):
		t.Fatalf("%s: %v, want refused by the budget", id, err)
	}
}

// A lone process's admission batches, once the carry holds, take one
// round trip: they decide against the carried windows and send the lock,
// the guard, the writes and COMMIT together.
func TestOneRoundTripAdmissionWhenAlone(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t, Options{})
	if err := s.PutBudget(ctx, ledger.BudgetRecord{Name: "r", Kind: "requests", Limit: 1000, Window: "24h"}, false); err != nil {
		t.Fatal(err)
	}
	admit := budgets.NewAdmitter()
	exp := time.Now().Add(time.Hour)
	for i := range 6 {
		wantAdmitted(t, reserveSettle(t, s, admit, fmt.Sprint("r", i), exp), fmt.Sprint("r", i), true)
	}
	// The first admission reads; the five after it are carried.
	if got := s.w.carried.Load(); got != 5 {
		t.Fatalf("%d admission batches in one round trip, want 5", got)
	}
	rows, err := s.Rows(ctx, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), 0)
	if err != nil || len(rows) != 6 {
		t.Fatalf("%d rows, %v; want 6", len(rows), err)
	}
}

// Another process's rows trip the guard: the one-round-trip batch rolls
// back and the usual batch decides against the rows as they are.
func TestOneRoundTripAdmissionSeesAnotherProcess(t *testing.T) {
	ctx := context.Background()
	s1, u := open(t, Options{})
	s2 := openURL(t, u, Options{})
	if err := s1.PutBudget(ctx, ledger.BudgetRecord{Name: "r", Kind: "requests", Limit: 3, Window: "24h"}, false); err != nil {
		t.Fatal(err)
	}
	admit := budgets.NewAdmitter()
	exp := time.Now().Add(time.Hour)
	wantAdmitted(t, reserveSettle(t, s1, admit, "a", exp), "a", true)
	wantAdmitted(t, reserveSettle(t, s1, admit, "b", exp), "b", true)
	if got := s1.w.carried.Load(); got != 1 {
		t.Fatalf("%d admission batches in one round trip, want 1 (b)", got)
	}
	wantAdmitted(t, reserveSettle(t, s2, admit, "c", exp), "c", true)
	// s1 carries two rows; the ledger holds three.
	wantAdmitted(t, reserveSettle(t, s1, admit, "d", exp), "d", false)
	if got := s1.w.carried.Load(); got != 1 {
		t.Fatalf("%d admission batches in one round trip, want still 1", got)
	}
	rows, err := s1.Rows(ctx, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), 0)
	if err != nil || len(rows) != 3 {
		t.Fatalf("%d rows, %v; want 3", len(rows), err)
	}
}

// A one-round-trip batch decides with the rows that left a rolling window
// still in it: what it would refuse goes to the usual batch, which sees
// them gone; and the windows it carries on are exact, without them.
func TestOneRoundTripAdmissionAsRowsLeaveTheWindow(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	s, _ := open(t, Options{Clock: clk})
	if err := s.PutBudget(ctx, ledger.BudgetRecord{Name: "r", Kind: "requests", Limit: 3, Window: "10m"}, false); err != nil {
		t.Fatal(err)
	}
	admit := budgets.NewAdmitter()
	exp := t0.Add(time.Hour)
	step := func(at time.Duration, id string, admitted, carried bool) {
		t.Helper()
		clk.Set(t0.Add(at))
		before := s.w.carried.Load()
		wantAdmitted(t, reserveSettle(t, s, admit, id, exp), id, admitted)
		if got := s.w.carried.Load() - before; got != map[bool]int64{true: 1}[carried] {
			t.Fatalf("%s: %d batches in one round trip, want carried=%v", id, got, carried)
		}
	}
	step(0, "a", true, false)
	step(5*time.Minute, "b", true, true)
	// a leaves the window in the carried batch that admits c (a and b
	// carried, and c: the limit)...
	step(10*time.Minute+time.Millisecond, "c", true, true)
	// ...which carries on b and c only, so d fits.
	step(10*time.Minute+2*time.Millisecond, "d", true, true)
	step(10*time.Minute+3*time.Millisecond, "e", false, false) // b, c, d
	// b left: carried (with b still in) f would be refused; the usual
	// batch sees it gone.
	step(15*time.Minute+time.Millisecond, "f", true, false)
	step(15*time.Minute+2*time.Millisecond, "g", false, false) // c, d, f
}

// admitFn adapts a function to ledger.Admitter.
type admitFn func(ledger.WindowReader, ledger.Reservation) error

func (f admitFn) Admit(r ledger.WindowReader, res ledger.Reservation) error { return f(r, res) }

var errFull = errors.New("full")

// An admitter that refuses without asking for anything but totals (no
// Reach) is still decided against the exact windows: a one-round-trip
// batch never commits a refusal made with rows that left the window.
func TestOneRoundTripRefusalIsDecidedExactly(t *testing.T) {
	t0 := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	clk := clock.NewFake(t0)
	s, _ := open(t, Options{Clock: clk})
	admit := admitFn(func(r ledger.WindowReader, _ ledger.Reservation) error {
		now := r.Now()
		x, err := r.Totals(ledger.Window{From: now.Add(-10 * time.Minute), To: now.Add(time.Millisecond)})
		if err != nil {
			return err
		}
		if x.Requests >= 2 {
			return errFull
		}
		return nil
	})
	exp := t0.Add(time.Hour)
	for _, c := range []struct {
		at      time.Duration
		id      string
		refused bool
	}{
		{0, "a", false},
		{5 * time.Minute, "b", false},
		{10*time.Minute + time.Millisecond, "c", false}, // a left: b only
		{10*time.Minute + 2*time.Millisecond, "d", true},
	} {
		clk.Set(t0.Add(c.at))
		err := reserveSettle(t, s, admit, c.id, exp)
		if got := errors.Is(err, errFull); got != c.refused || (!c.refused && err != nil) {
			t.Fatalf("%s: %v, want refused=%v", c.id, err, c.refused)
		}
	}
}

// The guard of a one-round-trip batch: its first statement fails (22012)
// unless the usage version, the change counter and the prune frontier are
// the ones given and the server's clock is not behind the batch's now nor
// more than maxEstimateSkew ahead of it.
func TestOneRoundTripGuard(t *testing.T) {
	ctx := context.Background()
	s, _ := open(t, Options{})
	if err := s.Reserve(ctx, ledger.Reservation{RequestID: "x", Expires: time.Now().Add(time.Hour), Operation: "chat", Model: "m"}, nil); err != nil {
		t.Fatal(err)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var uv, cv, pruned, now int64
	if err := conn.QueryRow(ctx, `SELECT COALESCE((SELECT value FROM meta WHERE key = 'usage_version'), 0), (SELECT value FROM meta WHERE key = 'config_version'), `+
		qPrunedUntil+`, `+msNow).Scan(&uv, &cv, &pruned, &now); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name              string
		at, uv, cv, prune int64
		testClock, fails  bool
	}{
		{"as carried", now, uv, cv, pruned, false, false},
		{"another process wrote", now, uv - 1, cv, pruned, false, true},
		{"a budget, token or price changed", now, uv, cv - 1, pruned, false, true},
		{"pruned since", now, uv, cv, pruned + 1, false, true},
		{"estimate ahead of the server's clock", now + 60_000, uv, cv, pruned, false, true},
		{"estimate too far behind it", now - 60_000, uv, cv, pruned, false, true},
		{"a test clock, far off", now - 60_000, uv, cv, pruned, true, false},
	} {
		var a, b, d, e, f, g int64
		err := conn.QueryRow(ctx, headSQL(0, true), c.at, c.uv, c.cv, c.prune, c.testClock).Scan(&a, &b, &d, &e, &f, &g)
		pe, is22012 := errors.AsType[*pgconn.PgError](err)
		is22012 = is22012 && pe.Code == "22012"
		if is22012 != c.fails || (!c.fails && err != nil) {
			t.Errorf("%s: %v, want the guard to fail: %v", c.name, err, c.fails)
		}
	}
}

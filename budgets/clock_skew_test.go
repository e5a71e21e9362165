package budgets

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/testutil/ledgertest"
	"github.com/rotorhq/rotor/ledger"
)

// A calendar day's requests already in the ledger count for the day even
// when the clock steps back (NTP correction) inside that day.
func TestClockSteppedBackStillCountsTheDaysRows(t *testing.T) {
	clk := clock.NewFake(t0)
	s, _ := openStore(t, clk)
	add(t, s, Budget{Name: "r", Kind: KindRequests, Limit: 3, Window: Window{Calendar: "day"}})
	a := NewAdmitter()
	for i := 0; i < 3; i++ {
		if err := admit(s, a, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(-time.Minute) // same UTC day
	if err := admit(s, a, "x"); !errors.Is(err, ErrExceeded) {
		t.Fatalf("4th request of a 3-request day budget after the clock stepped back 1m: %v, want budget_exceeded", err)
	}
}

// Two rotor processes on one SQLite file whose clocks differ by half a
// second: the one behind must still see the other's requests.
func TestTwoProcessesWithSkewedClocksNeverExceedARequestsBudget(t *testing.T) {
	clkA := clock.NewFake(t0)
	a, path := openStore(t, clkA)
	add(t, a, Budget{Name: "r", Kind: KindRequests, Limit: 3, Window: Window{Rolling: time.Hour}})
	clkB := clock.NewFake(t0.Add(-500 * time.Millisecond))
	b := ledgertest.OpenAt(t, path, ledger.Options{Clock: clkB})
	for i := 0; i < 3; i++ {
		if err := admit(a, NewAdmitter(), fmt.Sprint("a", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := admit(b, NewAdmitter(), "b0"); !errors.Is(err, ErrExceeded) {
		t.Fatalf("4th request of a 3-request budget from a process 500ms behind: %v, want budget_exceeded", err)
	}
}

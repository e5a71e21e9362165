package budgets

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/ledger"
)

// A calendar month ends at the first of the next month, whatever its
// length: a month budget used up on January 31 frees on February 1, and
// one used up in February on March 1 (a month taken for 30 days freed on
// January 31 and on March 2 or 3, and Retry-After said so).
func TestCalendarMonthEndsAtTheNextMonth(t *testing.T) {
	w := Window{Calendar: CalendarMonth}
	for _, tt := range []struct{ now, start, end time.Time }{
		{time.Date(2027, 1, 31, 23, 59, 59, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC)},
		{time.Date(2027, 2, 14, 12, 0, 0, 0, time.UTC), time.Date(2027, 2, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)},
		{time.Date(2028, 2, 29, 12, 0, 0, 0, time.UTC), time.Date(2028, 2, 1, 0, 0, 0, 0, time.UTC), time.Date(2028, 3, 1, 0, 0, 0, 0, time.UTC)},
		{time.Date(2026, 12, 31, 8, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)},
	} {
		if got := w.Start(tt.now); !got.Equal(tt.start) {
			t.Errorf("month start at %v = %v, want %v", tt.now, got, tt.start)
		}
		if got := w.End(tt.now); !got.Equal(tt.end) {
			t.Errorf("month end at %v = %v, want %v", tt.now, got, tt.end)
		}
	}
}

// The longest rolling window is 366d exactly (a year, leap or not).
func TestParseWindowAcceptsUpTo366Days(t *testing.T) {
	if w, err := ParseWindow("366d"); err != nil || w.Rolling != 366*24*time.Hour {
		t.Errorf("ParseWindow(366d) = %+v, %v; want a rolling 366d window", w, err)
	}
	if _, err := ParseWindow("366d1m"); err == nil {
		t.Error("ParseWindow(366d1m) accepted a window over 366d")
	}
	if w, err := ParseWindow("1m"); err != nil || w.Rolling != time.Minute {
		t.Errorf("ParseWindow(1m) = %+v, %v; want the shortest rolling window", w, err)
	}
}

// A budget overshot by requests in flight shows 0 remaining, never a
// negative amount (budget list).
func TestRemainingNeverNegative(t *testing.T) {
	for used, want := range map[int64]int64{0: 5, 4: 1, 5: 0, 6: 0, 7: 0} {
		st := Status{Budget: Budget{Kind: KindRequests, Limit: 5}, Used: used}
		if got := st.Remaining(); got != want {
			t.Errorf("Remaining with %d of 5 used = %d, want %d", used, got, want)
		}
	}
}

// A cost budget both used up and failing closed frees when both have
// passed: here the row of unknown cost leaves first, and the known cost
// that used the budget up 10 minutes later. Reporting the earlier time
// sends a client back to be refused again.
func TestCostBudgetUsedUpAndFailingClosedFreesAtTheLater(t *testing.T) {
	clk := clock.NewFake(t0)
	s, _ := openStore(t, clk)
	if err := admit(s, nil, "unknown"); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(ctx, ledger.Settlement{RequestID: "unknown", Status: 200}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Minute)
	known := clk.Now()
	if err := admit(s, nil, "known"); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(ctx, ledger.Settlement{RequestID: "known", Status: 200, CostMicros: ledger.Known(1_000)}); err != nil {
		t.Fatal(err)
	}
	add(t, s, Budget{Name: "spend", Kind: KindCost, Limit: 1_000, Window: Window{Rolling: time.Hour}})
	clk.Advance(10 * time.Minute)
	st := statusOf(t, s, "spend")
	if st.State != StateFailClosed || st.Used != 1_000 {
		t.Fatalf("status = %+v, want fail-closed with 1000 micro-USD known", st)
	}
	if want := known.Add(time.Hour); !st.FreesAt.Equal(want) {
		t.Errorf("FreesAt = %v, want %v (when the known cost that used it up leaves)", st.FreesAt, want)
	}
}

// A fail-closed cost budget answers 403 policy_blocked naming every cost
// budget that fails closed, even beside a used-up requests budget (whose
// 429 Retry-After would send the client back to a budget still failing
// closed).
func TestFailClosedWinsOverExceededAndNamesEveryBudget(t *testing.T) {
	clk := clock.NewFake(t0)
	s, _ := openStore(t, clk)
	setPrice(t, s, "gpt", 1_000_000, 1_000_000)
	if err := admit(s, nil, "d"); err != nil { // a Decisions row: unknown cost
		t.Fatal(err)
	}
	if err := s.Settle(ctx, ledger.Settlement{RequestID: "d", Status: 200}); err != nil {
		t.Fatal(err)
	}
	add(t, s, Budget{Name: "spend-a", Kind: KindCost, Limit: 1_000_000, Window: Window{Calendar: CalendarDay}})
	add(t, s, Budget{Name: "spend-b", Kind: KindCost, Limit: 1_000_000, Window: Window{Rolling: time.Hour}})
	add(t, s, Budget{Name: "req", Kind: KindRequests, Limit: 1, Window: Window{Rolling: 24 * time.Hour}})
	clk.Advance(time.Minute)
	err := reserveOp(s, NewAdmitter(), "p", "chat.completions", "gpt", clk.Now().Add(time.Hour))
	var pe *PolicyBlockedError
	if !errors.As(err, &pe) || errors.Is(err, ErrExceeded) {
		t.Fatalf("admission = %v, want a policy block", err)
	}
	var names []string
	for _, st := range pe.Budgets {
		if st.State != StateFailClosed {
			t.Errorf("budget %s in the policy block is %s, want fail-closed", st.Name, st.State)
		}
		names = append(names, st.Name)
	}
	slices.Sort(names)
	if !slices.Equal(names, []string{"spend-a", "spend-b"}) {
		t.Errorf("policy block names %v, want both cost budgets", names)
	}
}

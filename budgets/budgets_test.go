package budgets

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/testutil/ledgertest"
	"github.com/rotorhq/rotor/ledger"
)

var (
	ctx = context.Background()
	t0  = time.Date(2026, 11, 30, 10, 17, 23, 0, time.UTC)
)

func openStore(t *testing.T, clk clock.Clock) (*ledger.Store, string) {
	t.Helper()
	s := ledgertest.Open(t, ledger.Options{Clock: clk})
	return s, s.Path()
}

func add(t *testing.T, s *ledger.Store, b Budget) {
	t.Helper()
	if b.Name == "" {
		b.Name = DefaultName(b.Kind, b.Window)
	}
	if err := s.PutBudget(ctx, b.Record(), false); err != nil {
		t.Fatal(err)
	}
}

func admit(s *ledger.Store, a *Admitter, id string) error {
	var adm ledger.Admitter
	if a != nil {
		adm = a
	}
	return s.Reserve(ctx, ledger.Reservation{RequestID: id, Operation: OperationDecisions, Expires: t0.Add(time.Hour)}, adm)
}

func statusOf(t *testing.T, s *ledger.Store, name string) Status {
	t.Helper()
	var st Status
	err := s.View(ctx, func(r ledger.WindowReader) error {
		bs, err := Records(r.Budgets())
		if err != nil {
			return err
		}
		for _, b := range bs {
			if b.Name == name {
				st, err = Evaluate(r, b)
				return err
			}
		}
		return fmt.Errorf("no budget %s", name)
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestParseWindow(t *testing.T) {
	tests := []struct {
		in   string
		want Window
		ok   bool
	}{
		{"30m", Window{Rolling: 30 * time.Minute}, true},
		{"24h", Window{Rolling: 24 * time.Hour}, true},
		{"7d", Window{Rolling: 7 * 24 * time.Hour}, true},
		{"7d12h", Window{Rolling: 7*24*time.Hour + 12*time.Hour}, true},
		{"day", Window{Calendar: "day"}, true},
		{"Month", Window{Calendar: "month"}, true},
		{"30s", Window{}, false},
		{"fortnight", Window{}, false},
		{"-1h", Window{}, false},
		{"", Window{}, false},
		{"400d", Window{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseWindow(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("ParseWindow(%q) = %+v, %v; want %+v ok=%v", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestCalendarWindowsAreUTC(t *testing.T) {
	now := time.Date(2026, 11, 26, 15, 4, 5, 0, time.UTC) // a Thursday
	tests := []struct {
		cal        string
		start, end time.Time
	}{
		{"hour", time.Date(2026, 11, 26, 15, 0, 0, 0, time.UTC), time.Date(2026, 11, 26, 16, 0, 0, 0, time.UTC)},
		{"day", time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)},
		{"week", time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)},
		{"month", time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)},
	}
	local := now.In(time.FixedZone("X", -8*3600))
	for _, tt := range tests {
		t.Run(tt.cal, func(t *testing.T) {
			w := Window{Calendar: tt.cal}
			if got := w.Start(local); !got.Equal(tt.start) {
				t.Errorf("%s start = %v, want %v", tt.cal, got, tt.start)
			}
			if got := w.End(local); !got.Equal(tt.end) {
				t.Errorf("%s end = %v, want %v", tt.cal, got, tt.end)
			}
		})
	}
}

func TestParseCost(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"5", 5_000_000, true},
		{"0.25", 250_000, true},
		{"$1.000001", 1_000_001, true},
		{".5", 500_000, true},
		{"0", 0, false},
		{"-1", 0, false},
		{"1.0000001", 0, false},
		{"abc", 0, false},
		{"", 0, false},
		{"1e3", 0, false},
		// A sign after the point was read as part of the fraction:
		// "1.-5" became 0.95, "1.+5" 1.05.
		{"1.-5", 0, false},
		{"1.+5", 0, false},
		{"2.-99999", 0, false},
		{"+1", 0, false},
		{"1. 5", 0, false},
		{"9223372036854", 0, false},
		{"9223372036853", 9_223_372_036_853_000_000, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParseCost(tt.in)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("ParseCost(%q) = %d, %v; want %d ok=%v", tt.in, got, err, tt.want, tt.ok)
			}
		})
	}
	if FormatCost(1_500_000) != "1.5" || FormatCost(2_000_000) != "2" || FormatCost(1) != "0.000001" {
		t.Error("FormatCost")
	}
}

// Spec (decisions-api.md): a cost budget whose window holds usage of unknown
// cost cannot be evaluated and fails closed until the window ends.
func TestCostBudgetWithUnknownCostRowFailsClosedUntilItLeaves(t *testing.T) {
	clk := clock.NewFake(t0)
	s, _ := openStore(t, clk)
	a := NewAdmitter()
	if err := admit(s, a, "r1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(ctx, ledger.Settlement{RequestID: "r1", Status: 200, TotalTokens: ledger.Known(10)}); err != nil {
		t.Fatal(err)
	}
	rowTime := clk.Now().Truncate(time.Millisecond)
	clk.Advance(10 * time.Minute)
	add(t, s, Budget{Name: "spend", Kind: KindCost, Limit: 5_000_000, Window: Window{Rolling: time.Hour}})

	st := statusOf(t, s, "spend")
	if st.State != StateFailClosed || st.UnknownRows != 1 || st.Used != 0 {
		t.Fatalf("status = %+v, want fail-closed with one unknown row and 0 known", st)
	}
	if want := rowTime.Add(time.Hour); !st.FreesAt.Equal(want) {
		t.Errorf("FreesAt = %v, want %v (row time + window)", st.FreesAt, want)
	}
	// Usage recorded before the budget existed still counts.
	clk.Set(rowTime.Add(time.Hour - time.Millisecond))
	if st := statusOf(t, s, "spend"); st.State != StateFailClosed {
		t.Errorf("1 ms before the row leaves: state %s, want fail-closed", st.State)
	}
	clk.Set(rowTime.Add(time.Hour))
	if st := statusOf(t, s, "spend"); st.State != StateOK || !st.FreesAt.IsZero() {
		t.Errorf("after the row left: %+v, want ok", st)
	}
}

// Spec: while any --cost budget exists, the runtime proxy refuses Decisions
// requests with 403 policy_blocked before discovery or inference, and the
// reason names the cost budgets responsible.
func TestAnyCostBudgetBlocksDecisionsNamingIt(t *testing.T) {
	clk := clock.NewFake(t0)
	s, _ := openStore(t, clk)
	add(t, s, Budget{Name: "monthly-spend", Kind: KindCost, Limit: 100_000_000, Window: Window{Calendar: "month"}})
	add(t, s, Budget{Kind: KindRequests, Limit: 100, Window: Window{Rolling: 24 * time.Hour}})
	err := admit(s, NewAdmitter(), "r1")
	var pe *PolicyBlockedError
	if !errors.As(err, &pe) || !errors.Is(err, ErrPolicyBlocked) {
		t.Fatalf("admission = %v, want PolicyBlockedError", err)
	}
	if !strings.Contains(err.Error(), "monthly-spend") || strings.Contains(err.Error(), "requests-24h") {
		t.Errorf("reason %q should name the cost budget and only it", err)
	}
	rows, _ := s.Rows(ctx, t0.Add(-time.Hour), t0.Add(time.Hour), 0)
	if len(rows) != 0 {
		t.Errorf("refused admission left %d rows", len(rows))
	}
}

// A cost sum never reads NULL as 0: one known and one unknown row in the
// window leave the budget fail-closed even though the known sum is far
// below the limit.
func TestCostSumNeverReadsNullAsZero(t *testing.T) {
	clk := clock.NewFake(t0)
	s, _ := openStore(t, clk)
	for i, cost := range []ledger.Count{ledger.Known(1), {}} {
		id := fmt.Sprint("r", i)
		if err := admit(s, nil, id); err != nil {
			t.Fatal(err)
		}
		if err := s.Settle(ctx, ledger.Settlement{RequestID: id, Status: 200, CostMicros: cost}); err != nil {
			t.Fatal(err)
		}
	}
	add(t, s, Budget{Name: "c", Kind: KindCost, Limit: 1_000_000, Window: Window{Calendar: "day"}})
	st := statusOf(t, s, "c")
	if st.State != StateFailClosed || st.Used != 1 || st.UnknownRows != 1 {
		t.Errorf("status = %+v, want fail-closed, used 1 micro, 1 unknown row", st)
	}
}

func TestRequestsBudgetExhaustedFreesWhenOldestRowLeaves(t *testing.T) {
	clk := clock.NewFake(t0)
	s, _ := openStore(t, clk)
	add(t, s, Budget{Name: "r", Kind: KindRequests, Limit: 3, Window: Window{Rolling: time.Hour}})
	a := NewAdmitter()
	var times []time.Time
	for i := 0; i < 3; i++ {
		if err := admit(s, a, fmt.Sprint(i)); err != nil {
			t.Fatalf("admission %d: %v", i, err)
		}
		times = append(times, clk.Now())
		clk.Advance(10 * time.Minute)
	}
	err := admit(s, a, "x")
	var ee *ExceededError
	if !errors.As(err, &ee) || !errors.Is(err, ErrExceeded) {
		t.Fatalf("4th admission = %v, want ExceededError", err)
	}
	if want := times[0].Add(time.Hour); !ee.FreesAt.Equal(want) || ee.RetryAfter != want.Sub(clk.Now()) {
		t.Errorf("frees at %v (retry %v), want %v", ee.FreesAt, ee.RetryAfter, want)
	}
	clk.Set(times[0].Add(time.Hour))
	if err := admit(s, a, "y"); err != nil {
		t.Errorf("admission after the oldest row left: %v", err)
	}
}

// With several budgets used up, the answer's Retry-After is the longest
// wait: a retry sooner would meet the budget that is still used up.
func TestSeveralExceededBudgetsWaitForTheLast(t *testing.T) {
	clk := clock.NewFake(t0)
	s, _ := openStore(t, clk)
	add(t, s, Budget{Name: "b-day", Kind: KindRequests, Limit: 1, Window: Window{Rolling: 24 * time.Hour}})
	add(t, s, Budget{Name: "c-hour", Kind: KindRequests, Limit: 1, Window: Window{Rolling: time.Hour}})
	add(t, s, Budget{Name: "a-minute", Kind: KindRequests, Limit: 1, Window: Window{Rolling: time.Minute}})
	a := NewAdmitter()
	if err := admit(s, a, "r1"); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	err := admit(s, a, "r2")
	var ee *ExceededError
	if !errors.As(err, &ee) || ee.Budget.Name != "b-day" || ee.RetryAfter != 24*time.Hour-10*time.Second {
		t.Fatalf("admission = %v, want the day budget's wait of 23h59m50s", err)
	}
}

// Decisions has no price, whatever the ledger knows of its model: the
// Admitter refuses it under a cost budget even for a reservation marked
// priced.
func TestCostBudgetRefusesDecisionsMarkedPriced(t *testing.T) {
	s, _ := openStore(t, clock.NewFake(t0))
	add(t, s, Budget{Name: "spend", Kind: KindCost, Limit: 1_000, Window: Window{Rolling: time.Hour}})
	err := s.View(ctx, func(r ledger.WindowReader) error {
		return NewAdmitter().Admit(r, ledger.Reservation{RequestID: "d", Operation: OperationDecisions, Model: "gpt", Priced: true})
	})
	var pe *PolicyBlockedError
	if !errors.As(err, &pe) || pe.Unpriced {
		t.Fatalf("admission = %v, want the Decisions policy block", err)
	}
}

// Tokens budgets skip rows of unknown tokens and stop admitting once
// recorded tokens reach the limit.
func TestTokensBudgetSkipsUnknownAndStopsAtLimit(t *testing.T) {
	clk := clock.NewFake(t0)
	s, _ := openStore(t, clk)
	add(t, s, Budget{Name: "tok", Kind: KindTokens, Limit: 100, Window: Window{Calendar: "day"}})
	a := NewAdmitter()
	// An open reservation (unknown tokens) does not block.
	if err := admit(s, a, "open"); err != nil {
		t.Fatal(err)
	}
	if err := admit(s, a, "r1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(ctx, ledger.Settlement{RequestID: "r1", Status: 200, TotalTokens: ledger.Known(99)}); err != nil {
		t.Fatal(err)
	}
	if err := admit(s, a, "r2"); err != nil {
		t.Fatalf("99 of 100 tokens: %v", err)
	}
	if err := s.Settle(ctx, ledger.Settlement{RequestID: "r2", Status: 200, TotalTokens: ledger.Known(1)}); err != nil {
		t.Fatal(err)
	}
	err := admit(s, a, "r3")
	var ee *ExceededError
	if !errors.As(err, &ee) {
		t.Fatalf("at 100 of 100 tokens: %v, want exceeded", err)
	}
	if want := (Window{Calendar: "day"}).End(clk.Now()); !ee.FreesAt.Equal(want) {
		t.Errorf("calendar budget frees at %v, want end of day %v", ee.FreesAt, want)
	}
	if st := statusOf(t, s, "tok"); st.State != StateExhausted || st.UnknownRows != 1 || st.Remaining() != 0 {
		t.Errorf("status = %+v", st)
	}
}

// 64 goroutines race admission against a requests budget of 50: exactly 50
// are admitted.
func TestParallelAdmissionNeverExceedsRequestsBudget(t *testing.T) {
	clk := clock.NewFake(t0)
	s, _ := openStore(t, clk)
	add(t, s, Budget{Name: "r", Kind: KindRequests, Limit: 50, Window: Window{Calendar: "day"}})
	a := NewAdmitter()
	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for g := 0; g < 64; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			<-start
			err := admit(s, a, fmt.Sprint("g", g))
			switch {
			case err == nil:
				admitted.Add(1)
			case errors.Is(err, ErrExceeded):
				refused.Add(1)
			default:
				t.Error(err)
			}
		}(g)
	}
	close(start)
	wg.Wait()
	if admitted.Load() != 50 || refused.Load() != 14 {
		t.Errorf("admitted %d, refused %d; want 50 and 14", admitted.Load(), refused.Load())
	}
}

// The same race from two processes on one database file.
func TestTwoProcessesNeverExceedRequestsBudget(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "rotor.db")
	s := ledgertest.OpenAt(t, path)
	if err := s.PutBudget(ctx, Budget{Name: "r", Kind: KindRequests, Limit: 50, Window: Window{Calendar: "day"}}.Record(), false); err != nil {
		t.Fatal(err)
	}
	s.Close()
	startFile := filepath.Join(dir, "go")
	var cmds []*exec.Cmd
	var outs []*strings.Builder
	for p := 0; p < 2; p++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAdmitProcess$")
		cmd.Env = append(os.Environ(), "ROTOR_HELPER=admit", "ROTOR_HELPER_DB="+path, "ROTOR_HELPER_START="+startFile, "ROTOR_HELPER_PREFIX=p"+strconv.Itoa(p))
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds, outs = append(cmds, cmd), append(outs, out)
	}
	// Both start at once, once each has opened the ledger and says so.
	for p := range cmds {
		ready := startFile + ".ready-p" + strconv.Itoa(p)
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if _, err := os.Stat(ready); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("helper %d never opened the ledger", p)
			}
		}
	}
	os.WriteFile(startFile, nil, 0o600)
	total := 0
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper %d: %v\n%s", i, err, outs[i])
		}
		var n int
		for _, line := range strings.Split(outs[i].String(), "\n") {
			if v, ok := strings.CutPrefix(line, "admitted="); ok {
				n, _ = strconv.Atoi(v)
			}
		}
		total += n
	}
	if total != 50 {
		t.Errorf("two processes admitted %d in all, want exactly 50\n%s\n%s", total, outs[0], outs[1])
	}
}

// TestHelperAdmitProcess is run as a child by the two-process tests.
func TestHelperAdmitProcess(t *testing.T) {
	if os.Getenv("ROTOR_HELPER") != "admit" {
		t.Skip("helper process")
	}
	s := ledgertest.OpenAt(t, os.Getenv("ROTOR_HELPER_DB"))
	if err := os.WriteFile(os.Getenv("ROTOR_HELPER_START")+".ready-"+os.Getenv("ROTOR_HELPER_PREFIX"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(os.Getenv("ROTOR_HELPER_START")); err == nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	a := NewAdmitter()
	var n atomic.Int64
	var wg sync.WaitGroup
	for g := 0; g < 32; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			err := s.Reserve(ctx, ledger.Reservation{RequestID: fmt.Sprintf("%s-%d", os.Getenv("ROTOR_HELPER_PREFIX"), g), Operation: OperationDecisions}, a)
			if err == nil {
				n.Add(1)
			} else if !errors.Is(err, ErrExceeded) {
				t.Error(err)
			}
		}(g)
	}
	wg.Wait()
	fmt.Printf("admitted=%d\n", n.Load())
}

// A reservation left by a killed process counts as a request of unknown
// usage once its deadline plus grace has passed: a requests budget counts
// it and a cost budget fails closed.
func TestKilledProcessReservationCountsAsUnknownUsage(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	path := filepath.Join(t.TempDir(), "rotor.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperReserveAndDie$")
	cmd.Env = append(os.Environ(), "ROTOR_HELPER=reserve-and-die", "ROTOR_HELPER_DB="+path)
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "reserved") {
		t.Fatalf("helper should die after reserving: %v\n%s", err, out)
	}
	s := ledgertest.OpenAt(t, path)
	add(t, s, Budget{Name: "req", Kind: KindRequests, Limit: 1, Window: Window{Calendar: "day"}})
	add(t, s, Budget{Name: "cost", Kind: KindCost, Limit: 1_000_000, Window: Window{Calendar: "day"}})
	if st := statusOf(t, s, "req"); st.Used != 1 || st.State != StateExhausted {
		t.Errorf("requests budget = %+v, want the orphan counted", st)
	}
	if st := statusOf(t, s, "cost"); st.State != StateFailClosed {
		t.Errorf("cost budget = %+v, want fail-closed on the orphan", st)
	}
}

func TestHelperReserveAndDie(t *testing.T) {
	if os.Getenv("ROTOR_HELPER") != "reserve-and-die" {
		t.Skip("helper process")
	}
	s := ledgertest.OpenAt(t, os.Getenv("ROTOR_HELPER_DB"))
	if err := s.Reserve(ctx, ledger.Reservation{RequestID: "orphan", Operation: OperationDecisions, Expires: time.Now()}, nil); err != nil {
		t.Fatal(err)
	}
	fmt.Println("reserved")
	p, _ := os.FindProcess(os.Getpid())
	p.Kill() // SIGKILL: no deferred Close, no settlement
	select {}
}

func reserveOp(s *ledger.Store, a *Admitter, id, op, model string, expires time.Time) error {
	return s.Reserve(ctx, ledger.Reservation{RequestID: id, Operation: op, Model: model, Expires: expires}, a)
}

func setPrice(t *testing.T, s *ledger.Store, model string, in, out int64) {
	t.Helper()
	if _, err := s.PutPrices(ctx, []ledger.Price{{Model: model, InputMicros: in, OutputMicros: out, Source: ledger.SourceSet}}, false); err != nil {
		t.Fatal(err)
	}
}

// DESIGN, Prices and cost: while a cost budget exists, a request whose
// model has no price is refused (403) naming the cost budgets; a priced one
// is admitted while the known cost is under the limit, and a used-up cost
// budget answers 429 with the time it frees. Decisions stays refused.
func TestCostBudgetAdmitsPricedAndRefusesUnpriced(t *testing.T) {
	clk := clock.NewFake(t0)
	s, _ := openStore(t, clk)
	a := NewAdmitter()
	setPrice(t, s, "gpt", 1_000_000, 1_000_000) // $1 per 1M tokens
	add(t, s, Budget{Name: "spend", Kind: KindCost, Limit: 1_000, Window: Window{Rolling: time.Hour}})
	exp := t0.Add(time.Hour)

	err := reserveOp(s, a, "u", "chat.completions", "unpriced", exp)
	var pe *PolicyBlockedError
	if !errors.As(err, &pe) || !pe.Unpriced || !strings.Contains(err.Error(), "spend") || !strings.Contains(err.Error(), `"unpriced"`) {
		t.Fatalf("unpriced model: %v, want PolicyBlockedError naming the model and the budget", err)
	}
	if err := reserveOp(s, a, "d", OperationDecisions, "gpt", exp); !errors.As(err, &pe) || pe.Unpriced {
		t.Fatalf("decisions: %v, want the Decisions policy block", err)
	}
	if err := reserveOp(s, a, "p1", "responses", "gpt", exp); err != nil {
		t.Fatalf("priced model: %v", err)
	}
	// 600 + 400 tokens at $1/1M = 1000 micro-USD: the budget is used up.
	if err := s.Settle(ctx, ledger.Settlement{RequestID: "p1", Model: "gpt", Status: 200,
		InputTokens: ledger.Known(600), OutputTokens: ledger.Known(400), TotalTokens: ledger.Known(1000)}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Minute)
	err = reserveOp(s, a, "p2", "responses", "gpt", exp)
	var ee *ExceededError
	if !errors.As(err, &ee) || ee.RetryAfter != 59*time.Minute {
		t.Fatalf("used-up cost budget: %v, want ExceededError freeing in 59m", err)
	}
	rows, _ := s.Rows(ctx, t0.Add(-time.Hour), t0.Add(time.Hour), 0)
	if len(rows) != 1 || rows[0].CostMicros != ledger.Known(1000) {
		t.Errorf("rows = %+v, want the one priced row costing 1000 micro-USD", rows)
	}
}

// An open reservation within its deadline plus grace is a request in
// flight, not usage of unknown cost: a cost budget keeps admitting beside
// it, and fails closed only once it outlives its deadline.
func TestInFlightReservationIsNotUnknownCost(t *testing.T) {
	clk := clock.NewFake(t0)
	s, path := openStore(t, clk)
	a := NewAdmitter()
	setPrice(t, s, "gpt", 1_000_000, 1_000_000)
	add(t, s, Budget{Name: "spend", Kind: KindCost, Limit: 1_000_000, Window: Window{Calendar: "day"}})
	if err := reserveOp(s, a, "open", "chat.completions", "gpt", t0.Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := reserveOp(s, a, "next", "chat.completions", "gpt", t0.Add(time.Hour)); err != nil {
		t.Fatalf("beside a request in flight: %v", err)
	}
	// Another process sees the other's reservations as in flight too.
	other := ledgertest.OpenAt(t, path, ledger.Options{Clock: clk})
	if err := reserveOp(other, NewAdmitter(), "third", "chat.completions", "gpt", t0.Add(time.Hour)); err != nil {
		t.Fatalf("another process, beside requests in flight: %v", err)
	}
	clk.Advance(10 * time.Minute) // "open" outlives its deadline
	err := reserveOp(s, a, "late", "chat.completions", "gpt", t0.Add(time.Hour))
	var pe *PolicyBlockedError
	if !errors.As(err, &pe) || pe.Unpriced || len(pe.Budgets) != 1 || pe.Budgets[0].State != StateFailClosed || pe.Budgets[0].UnknownRows != 1 {
		t.Fatalf("after the deadline: %v, want the cost budget failing closed on one row", err)
	}
	if st := statusOf(t, s, "spend"); st.State != StateFailClosed || st.UnknownRows != 1 {
		t.Errorf("budget list view: %+v, want fail-closed with 1 unknown row", st)
	}
}

// A time something frees or ends prints rounded up to the second, never
// before it: a script that waits until the printed frees_at and retries
// is not refused again (a rolling window frees at a row's time, which has
// milliseconds, plus the window).
func TestFormatUntilNeverEarly(t *testing.T) {
	at := time.Date(2026, 12, 5, 19, 35, 15, 0, time.UTC)
	for in, want := range map[time.Time]string{
		at:                               "2026-12-05T19:35:15Z",
		at.Add(994 * time.Millisecond):   "2026-12-05T19:35:16Z",
		at.Add(time.Nanosecond):          "2026-12-05T19:35:16Z",
		at.In(time.FixedZone("x", 3600)): "2026-12-05T19:35:15Z",
	} {
		if got := FormatUntil(in); got != want {
			t.Errorf("FormatUntil(%v) = %s, want %s", in, got, want)
		}
	}
}

// A stored budget this binary cannot read (a window or kind a newer rotor
// wrote on a shared ledger) fails closed for every request, naming it: it
// was taken for a $0.000001-per-hour cost budget, which admitted a priced
// request each hour (and refused Decisions naming a budget that budget
// list does not show).
func TestUnreadableBudgetRefusesEveryRequest(t *testing.T) {
	clk := clock.NewFake(t0)
	s, _ := openStore(t, clk)
	if err := s.PutBudget(ctx, ledger.BudgetRecord{Name: "future", Kind: "requests", Limit: 1000, Window: "quarter"}, false); err != nil {
		t.Fatal(err)
	}
	setPrice(t, s, "gpt", 1_000_000, 1_000_000)
	a := NewAdmitter()
	for i, c := range []struct{ op, model string }{{"chat.completions", "gpt"}, {"chat.completions", "gpt"}, {OperationDecisions, "decide-mini"}, {"responses", "unpriced"}} {
		err := reserveOp(s, a, fmt.Sprintf("r%d", i), c.op, c.model, t0.Add(time.Hour))
		var pe *PolicyBlockedError
		if !errors.As(err, &pe) || !slices.Equal(pe.Unreadable, []string{"future"}) || !strings.Contains(err.Error(), "future") {
			t.Errorf("%s %s: %v, want a policy block naming the unreadable budget", c.op, c.model, err)
		}
	}
}

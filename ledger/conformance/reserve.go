package conformance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/ledger"
)

// Every 200 has its durable row: what Reserve, Settle and Release wrote is
// committed when they return, seen by another process at once and by a
// process that opens the database after this one closed.
func testDurable(t *testing.T, e Engine) {
	d, a := fresh(t, e)
	b := d.open()
	d.reserve(a, "r1", opChat, "gpt")
	d.reserve(a, "r2", opChat, "gpt")
	d.reserve(a, "r3", opChat, "gpt")
	settle(t, a, usage("r1", "gpt-2", 10, 5))
	if err := a.Release(ctx, "r2"); err != nil {
		t.Fatalf("Release: %v", err)
	}
	check := func(who string, l ledger.Ledger) {
		t.Helper()
		got := rowByID(t, l)
		if len(got) != 2 {
			t.Fatalf("%s reads rows %v, want r1 (settled) and r3 (open): r2 was released", who, ids(rowsOf(t, l)))
		}
		r1, r3 := got["r1"], got["r3"]
		if !r1.Settled || r1.TotalTokens != ledger.Known(15) || r1.Model != "gpt-2" || r1.Status != 200 || r1.Credential != "key-a" {
			t.Errorf("%s: r1 = %s, want settled with 15 tokens, model gpt-2, status 200, credential key-a", who, describeRow(r1))
		}
		if r3.Settled || r3.TotalTokens.Known || r3.CostMicros.Known || r3.Status != 0 {
			t.Errorf("%s: r3 = %s, want an open reservation of unknown usage", who, describeRow(r3))
		}
	}
	check("another handle, at once", b)
	if err := a.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	check("a handle opened after both closed", d.open())
}

func testSettleReleaseErrors(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	d.reserve(l, "r1", opChat, "gpt")
	if err := l.Reserve(ctx, ledger.Reservation{RequestID: "r1", Operation: opChat, Expires: d.clk.Now().Add(time.Hour)}, nil); !errors.Is(err, ledger.ErrExists) {
		t.Errorf("a second reservation of open request r1 = %v, want ErrExists", err)
	}
	d.clk.Advance(time.Millisecond) // not the same row's key: still the same request
	if err := l.Reserve(ctx, ledger.Reservation{RequestID: "r1", Operation: opChat, Expires: d.clk.Now().Add(time.Hour)}, nil); !errors.Is(err, ledger.ErrExists) {
		t.Errorf("a second reservation of open request r1, a millisecond later = %v, want ErrExists", err)
	}
	settle(t, l, usage("r1", "gpt", 1, 1))
	if err := l.Settle(ctx, usage("r1", "gpt", 2, 2)); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("settling r1 twice = %v, want ErrNotFound", err)
	}
	if err := l.Release(ctx, "r1"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("releasing settled r1 = %v, want ErrNotFound", err)
	}
	if err := l.Settle(ctx, usage("nope", "gpt", 1, 1)); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("settling an unknown request = %v, want ErrNotFound", err)
	}
	if err := l.Release(ctx, "nope"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("releasing an unknown request = %v, want ErrNotFound", err)
	}
	rows := rowsOf(t, l)
	if len(rows) != 1 || rows[0].TotalTokens != ledger.Known(2) {
		t.Errorf("rows = %v, want r1 once, with its first settlement's 2 tokens", rows)
	}
}

// A Settle or Release that lands in one batch with an earlier Settle or
// Release of the same request is ErrNotFound, as it is in batches of its
// own. SQLite
// used to answer nil to both and take the reservation off its windows
// twice (off the minute rollup too, once folded, for good): a user saw
// budgets count fewer requests than the ledger held, admit past their
// limit, and a cost budget fail open.
// A reservation an operator resolved from another process (`rotor ledger
// settle`, once it expired) is no longer open: the late settlement or
// release of the process that made it is ErrNotFound, and the row, its
// window and its report keep the operator's usage, counted once.
func testCloseAfterResolvedElsewhere(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	for _, id := range []string{"late-settle", "late-release"} {
		r := ledger.Reservation{RequestID: id, Operation: opChat, Pool: "api", Model: "gpt", Client: "ci", Expires: d.clk.Now().Add(time.Minute)}
		if err := l.Reserve(ctx, r, nil); err != nil {
			t.Fatalf("Reserve(%s): %v", id, err)
		}
	}
	d.clk.Advance(2 * time.Hour)
	cli := d.open()
	for _, id := range []string{"late-settle", "late-release"} {
		if err := cli.Resolve(ctx, ledger.Resolution{RequestID: id, Input: ledger.Known(3), Output: ledger.Known(4)}); err != nil {
			t.Fatalf("Resolve(%s): %v", id, err)
		}
	}
	if err := l.Settle(ctx, usage("late-settle", "gpt", 100, 100)); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("settling a reservation resolved elsewhere = %v, want ErrNotFound", err)
	}
	if err := l.Release(ctx, "late-release"); !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("releasing a reservation resolved elsewhere = %v, want ErrNotFound", err)
	}
	for _, r := range rowsOf(t, l) {
		if !r.Settled || r.TotalTokens != ledger.Known(7) {
			t.Errorf("%s = %s, want the operator's 7 tokens", r.RequestID, describeRow(r))
		}
	}
	w := ledger.Window{From: t0.Add(-time.Hour), To: d.clk.Now().Add(time.Millisecond)}
	for who, h := range map[string]ledger.Ledger{"the late writer": l, "the operator": cli} {
		if tot := totals(t, h, w); tot != (ledger.Totals{Requests: 2, Tokens: 14, CostUnknown: 2}) {
			t.Errorf("%s reads window totals %+v, want the 2 resolved requests, 14 tokens, cost unknown (no price)", who, tot)
		}
	}
	rep, err := l.Report(ctx, ledger.ReportQuery{From: w.From, To: w.To})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep) != 1 || rep[0].Requests != 2 || rep[0].TotalTokens != 14 || rep[0].TokensUnknown != 0 {
		t.Errorf("report = %s, want 2 requests of 14 tokens", describeReport(rep))
	}
}

func testCloseTwiceInOneBatch(t *testing.T, e Engine) {
	write := func(l ledger.Ledger, kind string) error {
		if kind == "settle" {
			return l.Settle(ctx, usage("a", "gpt", 1, 1))
		}
		return l.Release(ctx, "a")
	}
	for _, tc := range []struct{ first, second string }{{"release", "release"}, {"settle", "release"}, {"release", "settle"}} {
		t.Run(tc.first+"-then-"+tc.second, func(t *testing.T) {
			d, l := fresh(t, e)
			d.reserve(l, "a", opChat, "gpt")
			d.clk.Advance(11 * time.Second) // past SQLite's foldAge: the next batch folds a
			d.reserve(l, "x", opChat, "gpt")

			// Hold the writer in a batch until both writes on a are
			// queued behind it, so that they share the next batch.
			inBatch, unblock := make(chan struct{}), make(chan struct{})
			release := sync.OnceFunc(func() { close(unblock) })
			defer release() // a failed wait must not leave the writer held
			var once sync.Once
			hold := admitFunc(func(ledger.WindowReader, ledger.Reservation) error {
				once.Do(func() { close(inBatch) })
				<-unblock
				return nil
			})
			held := make(chan error, 1)
			go func() {
				held <- l.Reserve(ctx, ledger.Reservation{RequestID: "held", Operation: opChat, Model: "gpt", Expires: d.clk.Now().Add(time.Hour)}, hold)
			}()
			<-inBatch
			errs := make([]error, 2)
			var wg sync.WaitGroup
			submit := func(i int, write func() error) {
				wg.Add(1)
				go func() { defer wg.Done(); errs[i] = write() }()
				// Queued in order: the first write, then the second.
				for end := time.Now().Add(20 * time.Second); e.Queued(unwrap(l)) != i+1; runtime.Gosched() {
					if time.Now().After(end) {
						t.Fatalf("write %d on a never queued behind the held batch", i+1)
					}
				}
			}
			submit(0, func() error { return write(l, tc.first) })
			submit(1, func() error { return write(l, tc.second) })
			release()
			if err := <-held; err != nil {
				t.Fatalf("Reserve(held): %v", err)
			}
			wg.Wait()
			if errs[0] != nil {
				t.Errorf("the first write, %s a = %v, want nil", tc.first, errs[0])
			}
			if !errors.Is(errs[1], ledger.ErrNotFound) {
				t.Errorf("%s a after %s a in the same batch = %v, want ErrNotFound", tc.second, tc.first, errs[1])
			}

			d.clk.Advance(2 * time.Minute)
			d.reserve(l, "y", opChat, "gpt")
			now := d.clk.Now()
			rows := rowsOf(t, l)
			for name, h := range map[string]ledger.Ledger{"the writing handle": l, "another handle": d.open()} {
				if got := totals(t, h, ledger.Window{From: now.Truncate(time.Hour), To: now.Add(time.Millisecond)}); got.Requests != int64(len(rows)) {
					t.Errorf("%s: the hour's window counts %d requests, the ledger holds %d rows %v", name, got.Requests, len(rows), ids(rows))
				}
			}
		})
	}
}

var errNo = errors.New("refused by the test's admitter")

// An admitter's refusal reaches the caller unchanged and writes nothing;
// the admitter sees the stored budgets, the clock's time and whether the
// model has a price.
func testRefusedAdmission(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	setPrice(t, l, gptPrice)
	addBudget(t, l, budgets.Budget{Name: "req", Kind: budgets.KindRequests, Limit: 10, Window: calendar("day")})
	// By request: Admit may run more than once for one reservation
	// (ledger.Admitter); the last run decides.
	seen := map[string][]string{}
	priced := map[string]bool{}
	var now time.Time
	refuse := admitFunc(func(r ledger.WindowReader, res ledger.Reservation) error {
		seen[res.RequestID] = nil
		for _, b := range r.Budgets() {
			seen[res.RequestID] = append(seen[res.RequestID], b.Name)
		}
		priced[res.RequestID], now = res.Priced, r.Now()
		return fmt.Errorf("request %s: %w", res.RequestID, errNo)
	})
	for _, r := range []ledger.Reservation{
		{RequestID: "chat", Operation: opChat, Model: "gpt"},
		{RequestID: "dec", Operation: opDecisions, Model: "gpt"},
		{RequestID: "unpriced", Operation: opChat, Model: "other"},
	} {
		r.Expires = d.clk.Now().Add(time.Hour)
		if err := l.Reserve(ctx, r, refuse); !errors.Is(err, errNo) {
			t.Errorf("Reserve(%s) with a refusing admitter = %v, want its error", r.RequestID, err)
		}
	}
	if want := []string{"req"}; len(seen) != 3 || !slices.Equal(seen["chat"], want) || !slices.Equal(seen["dec"], want) || !slices.Equal(seen["unpriced"], want) {
		t.Errorf("the admitter saw budgets %v, want req at each admission", seen)
	}
	if !maps.Equal(priced, map[string]bool{"chat": true, "dec": false, "unpriced": false}) {
		t.Errorf("Priced at admission = %v, want true for a priced chat model, false for Decisions and an unpriced model", priced)
	}
	if !now.Equal(t0) {
		t.Errorf("the admitter's Now = %v, want the clock's %v", now, t0)
	}
	if rows := rowsOf(t, l); len(rows) != 0 {
		t.Errorf("refused admissions left rows %v", ids(rows))
	}
	// The next admission is not hurt by the refused ones.
	d.reserve(l, "ok", opChat, "gpt")
	if rows := rowsOf(t, l); len(rows) != 1 {
		t.Errorf("rows = %v, want ok alone", ids(rows))
	}
}

// A reservation whose request ended (its deadline, or its caller gone)
// before it was written is not written.
func testCancelledReservation(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	c, cancel := context.WithCancel(ctx)
	cancel()
	err := l.Reserve(c, ledger.Reservation{RequestID: "gone", Operation: opChat, Expires: d.clk.Now().Add(time.Hour)}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Reserve with an ended context = %v, want an error wrapping context.Canceled", err)
	}
	if rows := rowsOf(t, l); len(rows) != 0 {
		t.Errorf("a reservation of an ended request was written: %v", ids(rows))
	}
}

// Close waits for the writes in flight: every Reserve that returned nil,
// also one still queued when Close began, has its row in the next
// process; one refused with ErrClosed has none.
func testCloseCommits(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	var wg sync.WaitGroup
	var mu sync.Mutex
	acked := map[string]bool{}
	tenAcked, allDone := make(chan struct{}), make(chan struct{})
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprint("r", i)
			err := l.Reserve(ctx, ledger.Reservation{RequestID: id, Operation: opDecisions, Expires: t0.Add(time.Hour)}, nil)
			switch {
			case err == nil:
				mu.Lock()
				if acked[id] = true; len(acked) == 10 {
					close(tenAcked)
				}
				mu.Unlock()
			case !errors.Is(err, ledger.ErrClosed):
				t.Errorf("Reserve(%s): %v", id, err)
			}
		}()
	}
	go func() { wg.Wait(); close(allDone) }()
	select { // Close while the later reservations are still on their way
	case <-tenAcked:
	case <-allDone:
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	<-allDone
	if err := l.Reserve(ctx, ledger.Reservation{RequestID: "late", Operation: opDecisions}, nil); !errors.Is(err, ledger.ErrClosed) {
		t.Errorf("Reserve after Close = %v, want ErrClosed", err)
	}
	got := map[string]bool{}
	for _, r := range rowsOf(t, d.open()) {
		got[r.RequestID] = true
	}
	if len(acked) < 10 || !maps.Equal(got, acked) {
		t.Errorf("rows after reopening %v, want exactly the %d acknowledged reservations %v", sortedKeys(got), len(acked), sortedKeys(acked))
	}
}

// Admission is exact across processes: 2 handles x 16 goroutines, 4
// requests each, against a requests budget of 50 admit exactly 50, and
// write exactly 50 rows.
func testExactAdmission(t *testing.T, e Engine) {
	d, a := fresh(t, e)
	b := d.open()
	addBudget(t, a, budgets.Budget{Name: "fifty", Kind: budgets.KindRequests, Limit: 50, Window: calendar("day")})
	var admitted, refused atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for h, l := range []ledger.Ledger{a, b} {
		adm := budgets.NewAdmitter()
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				for i := range 4 {
					err := d.admit(l, adm, fmt.Sprintf("h%d-g%d-%d", h, g, i), opDecisions, "m")
					switch {
					case err == nil:
						admitted.Add(1)
					case errors.Is(err, budgets.ErrExceeded):
						refused.Add(1)
					default:
						t.Errorf("admission: %v", err)
					}
				}
			}()
		}
	}
	close(start)
	wg.Wait()
	if admitted.Load() != 50 || refused.Load() != 128-50 {
		t.Errorf("admitted %d, refused %d; want exactly 50 and 78", admitted.Load(), refused.Load())
	}
	if n := len(rowsOf(t, a)); n != 50 {
		t.Errorf("%d rows, want 50", n)
	}
	if st := status(t, b, "fifty"); st.Used != 50 || st.State != budgets.StateExhausted {
		t.Errorf("budget = used %d, %s; want 50, exhausted", st.Used, st.State)
	}
}

// A handle's next admission counts what another handle wrote since its
// own last batch (reservations, settled tokens), also when its own
// batches came just before and after: no window a handle keeps from batch
// to batch may hide another's rows.
func testAdmissionSeesAnotherHandlesRows(t *testing.T, e Engine) {
	d, a := fresh(t, e)
	b := d.open()
	addBudget(t, a, budgets.Budget{Name: "three", Kind: budgets.KindRequests, Limit: 3, Window: budgets.Window{Rolling: 30 * time.Minute}})
	addBudget(t, a, budgets.Budget{Name: "tokens", Kind: budgets.KindTokens, Limit: 250, Window: calendar("day")})
	adm := budgets.NewAdmitter()
	admit := func(l ledger.Ledger, id string) error {
		t.Helper()
		d.clk.Advance(time.Second)
		return d.admit(l, adm, id, opChat, "m")
	}
	for _, step := range []struct {
		l      ledger.Ledger
		id     string
		tokens int64 // settled after admission; 0: left open
		want   error
	}{
		{a, "a1", 100, nil},
		{b, "b1", 100, nil},
		// 200 tokens and two requests: a sees b's row.
		{a, "a2", 0, nil},
		// Three requests in 30 minutes: a refuses b's third as b refuses a's.
		{b, "b2", 0, budgets.ErrExceeded},
		{a, "a3", 0, budgets.ErrExceeded},
	} {
		err := admit(step.l, step.id)
		if !errors.Is(err, step.want) || (err == nil) != (step.want == nil) {
			t.Fatalf("admit %s = %v, want %v", step.id, err, step.want)
		}
		if err == nil && step.tokens > 0 {
			settle(t, step.l, usage(step.id, "m", step.tokens, 0))
		}
	}
	// Half an hour on, a1 and b1 left the rolling window; the tokens
	// budget still holds their 200 tokens, and b settles a2's 60 more
	// through its own handle's view: a must see 260 and refuse.
	d.clk.Advance(30 * time.Minute)
	settle(t, b, usage("a2", "m", 60, 0))
	if err := admit(a, "a4"); !errors.Is(err, budgets.ErrExceeded) {
		t.Fatalf("admit a4 over 260 tokens = %v, want ErrExceeded", err)
	}
	if st := status(t, a, "three"); st.Used != 0 {
		t.Errorf("requests in the last 30 minutes = %d, want 0 (a1..a3 left, a4 refused)", st.Used)
	}
}

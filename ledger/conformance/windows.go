package conformance

import (
	"errors"
	"fmt"
	"math/rand"
	"testing"
	"time"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/ledger"
)

// A row written at t counts in a rolling window of length d until
// t + d - 1ms and leaves it at t + d exactly, for requests, tokens and
// cost alike.
func testRollingEdge(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	setPrice(t, l, gptPrice)
	w := rolling(30 * time.Minute)
	addBudget(t, l, budgets.Budget{Name: "req", Kind: budgets.KindRequests, Limit: 10, Window: w})
	addBudget(t, l, budgets.Budget{Name: "tok", Kind: budgets.KindTokens, Limit: 1000, Window: w})
	addBudget(t, l, budgets.Budget{Name: "usd", Kind: budgets.KindCost, Limit: 1000, Window: w})
	d.reserve(l, "r", opChat, "gpt")
	settle(t, l, usage("r", "gpt", 10, 5)) // 15 tokens, 10 + 2x5 = 20 micro-USD
	for _, c := range []struct {
		at                  time.Duration
		req, tokens, micros int64
	}{
		{0, 1, 15, 20},
		{30*time.Minute - time.Millisecond, 1, 15, 20},
		{30 * time.Minute, 0, 0, 0},
	} {
		d.clk.Set(t0.Add(c.at))
		st := statuses(t, l)
		if st["req"].Used != c.req || st["tok"].Used != c.tokens || st["usd"].Used != c.micros {
			t.Errorf("at row time + %v: used %d requests, %d tokens, %d micro-USD; want %d, %d, %d",
				c.at, st["req"].Used, st["tok"].Used, st["usd"].Used, c.req, c.tokens, c.micros)
		}
		for _, s := range st {
			if s.State != budgets.StateOK || s.UnknownRows != 0 {
				t.Errorf("at row time + %v: budget %s is %s with %d unknown rows, want ok", c.at, s.Name, s.State, s.UnknownRows)
			}
		}
	}
}

// Calendar windows are UTC periods: a row 1 ms before midnight is
// yesterday's, one at midnight today's; weeks start on Monday, months on
// the 1st.
func testCalendarEdges(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	for _, w := range []string{"hour", "day", "week", "month"} {
		addBudget(t, l, budgets.Budget{Name: w, Kind: budgets.KindRequests, Limit: 100, Window: calendar(w)})
	}
	addBudget(t, l, budgets.Budget{Name: "rolling-25h", Kind: budgets.KindRequests, Limit: 100, Window: rolling(25 * time.Hour)})
	addBudget(t, l, budgets.Budget{Name: "rolling-7d", Kind: budgets.KindRequests, Limit: 100, Window: rolling(7 * 24 * time.Hour)})
	midnight := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC) // a Tuesday, and the 1st
	monday := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		id   string
		at   time.Time
		want map[string]int64
	}{
		// Monday 30 November, 23:59:59.999.
		{"a", midnight.Add(-time.Millisecond), map[string]int64{"hour": 1, "day": 1, "week": 1, "month": 1, "rolling-25h": 1, "rolling-7d": 1}},
		// Tuesday 1 December, 00:00:00.000: a new hour, day and month.
		{"b", midnight, map[string]int64{"hour": 1, "day": 1, "week": 2, "month": 1, "rolling-25h": 2, "rolling-7d": 2}},
		// Sunday 6 December, 23:59:59.999: the week that began on Monday 30.
		{"c", monday.Add(-time.Millisecond), map[string]int64{"hour": 1, "day": 1, "week": 3, "month": 2, "rolling-25h": 1, "rolling-7d": 3}},
		// Monday 7 December, 00:00:00.000: a new week.
		{"d", monday, map[string]int64{"hour": 1, "day": 1, "week": 1, "month": 3, "rolling-25h": 2, "rolling-7d": 4}},
		{"", monday.Add(time.Hour), map[string]int64{"hour": 0, "day": 1, "week": 1, "month": 3, "rolling-25h": 2, "rolling-7d": 4}},
		// a, 7 days on: it leaves the 7d window, not a millisecond before.
		{"", midnight.Add(week - 2*time.Millisecond), map[string]int64{"hour": 0, "day": 1, "week": 1, "month": 3, "rolling-25h": 2, "rolling-7d": 4}},
		{"", midnight.Add(week - time.Millisecond), map[string]int64{"hour": 0, "day": 1, "week": 1, "month": 3, "rolling-25h": 2, "rolling-7d": 3}},
	}
	other := d.open()
	for i, s := range steps {
		d.clk.Set(s.at)
		if s.id != "" {
			d.reserve(l, s.id, opDecisions, "m")
			settle(t, l, usage(s.id, "m", 1, 1))
		}
		reader := []ledger.Ledger{l, other}[i%2]
		st := statuses(t, reader)
		for _, name := range sortedKeys(s.want) {
			if got := st[name].Used; got != s.want[name] {
				t.Errorf("at %s: budget %s counts %d requests, want %d", s.at.Format(time.RFC3339Nano), name, got, s.want[name])
			}
		}
	}
	// An exhausted calendar budget frees at the end of its period.
	addBudget(t, l, budgets.Budget{Name: "one-a-day", Kind: budgets.KindRequests, Limit: 1, Window: calendar("day")})
	err := d.admit(l, budgets.NewAdmitter(), "x", opDecisions, "m")
	var ee *budgets.ExceededError
	if !errors.As(err, &ee) || !ee.FreesAt.Equal(monday.Add(24*time.Hour)) {
		t.Errorf("admission against a used-up day budget = %v, want ExceededError freeing at %s", err, monday.Add(24*time.Hour))
	}
}

// A calendar budget admits exactly its limit when its period's first
// request comes at the period's first millisecond: that row is in the
// window it opens, for every admission after it (decided from windows a
// process carries from batch to batch, or read afresh).
func testCalendarFirstMillisecond(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	addBudget(t, l, budgets.Budget{Name: "day", Kind: budgets.KindRequests, Limit: 2, Window: calendar("day")})
	midnight := t0.Truncate(24 * time.Hour).Add(24 * time.Hour)
	a := budgets.NewAdmitter()
	for i, admitted := range []bool{true, true, false} {
		d.clk.Set(midnight.Add(time.Duration(i) * time.Millisecond))
		id := fmt.Sprint("r", i)
		err := d.admit(l, a, id, opDecisions, "m")
		var ee *budgets.ExceededError
		if admitted && err != nil || !admitted && !errors.As(err, &ee) {
			t.Fatalf("%s at %s, request %d of a 2-request day budget whose first came at midnight: %v, want admitted %v",
				id, d.clk.Now().Format(time.RFC3339Nano), i+1, err, admitted)
		}
	}
}

// A window that ends now also counts the rows stamped after now (README,
// Budgets and the ledger: Windows): after the clock steps back (an NTP
// correction; on PostgreSQL, of the database's host, whose clock stamps
// the rows), the requests the day already admitted still count, and a
// 3-request day budget admits no 4th, neither through the handle that
// wrote them nor through another.
func testClockSteppedBack(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	addBudget(t, l, budgets.Budget{Name: "day", Kind: budgets.KindRequests, Limit: 3, Window: calendar("day")})
	a := budgets.NewAdmitter()
	for i := range 3 {
		if err := d.admit(l, a, fmt.Sprint("r", i), opDecisions, "m"); err != nil {
			t.Fatalf("request %d of 3: %v", i+1, err)
		}
	}
	d.clk.Advance(-time.Minute) // the same UTC day
	for i, h := range []ledger.Ledger{l, d.open()} {
		var ee *budgets.ExceededError
		if err := d.admit(h, a, fmt.Sprint("x", i), opDecisions, "m"); !errors.As(err, &ee) {
			t.Errorf("%s: a 4th request of a 3-request day budget after the clock stepped back 1m: %v, want budget_exceeded",
				[]string{"the writing handle", "another handle"}[i], err)
		}
	}
	if used := status(t, l, "day").Used; used != 3 {
		t.Errorf("budget list after the clock stepped back 1m: day used %d, want 3", used)
	}
}

// A row the brute force counts.
type sample struct {
	ts           time.Time
	open         bool
	expires      time.Time
	tokens, cost ledger.Count
}

// Budgets over rows spread across hours and days (rolled up by the
// engine as it goes), written by two processes, count what a brute-force
// sum over the rows counts: requests, known tokens and known cost, with
// unknown values counted apart, never read as zero; and free when the
// rows that used them up leave.
func testWindowsAcrossDays(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	other := d.open()
	setPrice(t, l, gptPrice)
	bs := []budgets.Budget{
		{Name: "req-90m", Kind: budgets.KindRequests, Limit: 2, Window: rolling(90 * time.Minute)},
		{Name: "req-24h", Kind: budgets.KindRequests, Limit: 1000, Window: rolling(24 * time.Hour)},
		{Name: "req-hour", Kind: budgets.KindRequests, Limit: 1000, Window: calendar("hour")},
		{Name: "tok-7d", Kind: budgets.KindTokens, Limit: 20_000, Window: rolling(7 * 24 * time.Hour)},
		{Name: "tok-day", Kind: budgets.KindTokens, Limit: 3_000, Window: calendar("day")},
		{Name: "tok-week", Kind: budgets.KindTokens, Limit: 1_000_000, Window: calendar("week")},
		{Name: "usd-day", Kind: budgets.KindCost, Limit: 1_000_000, Window: calendar("day")},
		{Name: "usd-6h", Kind: budgets.KindCost, Limit: 2_000, Window: rolling(6 * time.Hour)},
		{Name: "usd-month", Kind: budgets.KindCost, Limit: 1_000_000, Window: calendar("month")},
	}
	for _, b := range bs {
		addBudget(t, l, b)
	}
	rng := rand.New(rand.NewSource(17))
	var rows []sample
	checks := 0
	states := map[budgets.State]int{}
	for i := range 90 {
		d.clk.Advance(time.Duration(rng.Int63n(int64(150 * time.Minute))).Truncate(time.Millisecond))
		id := fmt.Sprint("r", i)
		now := d.clk.Now()
		s := sample{ts: now}
		// Either process writes: each must count the other's rows.
		l := []ledger.Ledger{l, other}[rng.Intn(2)]
		switch k := rng.Intn(10); {
		case k == 0: // left open: in flight until it expires
			s.open, s.expires = true, now.Add(time.Duration(1+rng.Intn(3))*time.Hour)
			if err := l.Reserve(ctx, ledger.Reservation{RequestID: id, Operation: opChat, Model: "gpt", Expires: s.expires}, nil); err != nil {
				t.Fatal(err)
			}
		case k == 1: // Decisions: known tokens, unknown cost
			d.reserve(l, id, opDecisions, "gpt")
			in, out := rng.Int63n(500), rng.Int63n(500)
			settle(t, l, usage(id, "gpt", in, out))
			s.tokens = ledger.Known(in + out)
		case k == 2: // a 502: unknown tokens and cost
			d.reserve(l, id, opChat, "gpt")
			settle(t, l, ledger.Settlement{RequestID: id, Model: "gpt", Status: 502, ErrorCode: "upstream_error"})
		default:
			d.reserve(l, id, opChat, "gpt")
			in, out := rng.Int63n(500), rng.Int63n(500)
			settle(t, l, usage(id, "gpt", in, out))
			s.tokens, s.cost = ledger.Known(in+out), ledger.Known(in+2*out)
		}
		rows = append(rows, s)
		if i%5 != 4 {
			continue
		}
		// Now and then, a little later, through either handle.
		d.clk.Advance(time.Duration(rng.Int63n(int64(10 * time.Minute))).Truncate(time.Millisecond))
		reader := []ledger.Ledger{l, other}[rng.Intn(2)]
		st := statuses(t, reader)
		for _, b := range bs {
			want := bruteStatus(b, rows, d.clk.Now())
			got := st[b.Name]
			if got.Used != want.Used || got.UnknownRows != want.UnknownRows || got.State != want.State || !got.FreesAt.Equal(want.FreesAt) {
				t.Errorf("at %s (%d rows): %s = used %d, %d unknown, %s, frees %v; want used %d, %d unknown, %s, frees %v",
					d.clk.Now().Format(time.RFC3339Nano), len(rows), b.Name, got.Used, got.UnknownRows, got.State, got.FreesAt,
					want.Used, want.UnknownRows, want.State, want.FreesAt)
			}
			checks++
			states[want.State]++
		}
	}
	if span := d.clk.Now().Sub(t0); span < 3*24*time.Hour || checks < 100 || states[budgets.StateExhausted] < 10 || states[budgets.StateFailClosed] < 10 {
		t.Fatalf("rows span %v, %d checks, states %v: want several days, many checks, budgets exhausted and failing closed", span, checks, states)
	}
	t.Logf("%d checks over %v: %v", checks, d.clk.Now().Sub(t0), states)
}

// bruteStatus evaluates b over rows at now, as DESIGN says: every row
// counts one request; tokens and cost sum the known values; a row of
// unknown value counts apart; an open reservation still within its
// deadline (and younger than ledger.MaxInFlight) is in flight, not
// unknown cost or tokens.
func bruteStatus(b budgets.Budget, rows []sample, now time.Time) budgets.Status {
	w := b.Window.Range(now)
	st := budgets.Status{Budget: b, State: budgets.StateOK}
	inFlight := func(r sample) bool {
		return r.open && r.expires.After(now) && !r.ts.Before(now.Add(-ledger.MaxInFlight))
	}
	for _, r := range rows {
		if r.ts.Before(w.From) || !r.ts.Before(w.To) {
			continue
		}
		switch b.Kind {
		case budgets.KindRequests:
			st.Used++
		case budgets.KindTokens:
			if r.tokens.Known {
				st.Used += r.tokens.V
			} else if !inFlight(r) {
				st.UnknownRows++
			}
		case budgets.KindCost:
			if r.cost.Known {
				st.Used += r.cost.V
			} else if !inFlight(r) {
				st.UnknownRows++
			}
		}
	}
	// When it frees: a calendar budget at the end of its period; a
	// rolling one when the row at which the window's measure first
	// passed the limit leaves, or the newest row of unknown cost (not in
	// flight) does.
	leaves := func(at time.Time) time.Time {
		if b.Window.Calendar != "" {
			return b.Window.End(now)
		}
		return at.Add(b.Window.Rolling)
	}
	if st.Used >= b.Limit {
		st.State = budgets.StateExhausted
		need, cum := st.Used-b.Limit+1, int64(0)
		for _, r := range rows {
			if r.ts.Before(w.From) || !r.ts.Before(w.To) {
				continue
			}
			switch b.Kind {
			case budgets.KindRequests:
				cum++
			case budgets.KindTokens:
				cum += r.tokens.V
			case budgets.KindCost:
				cum += r.cost.V
			}
			if cum >= need {
				st.FreesAt = leaves(r.ts)
				break
			}
		}
	}
	if b.Kind == budgets.KindCost && st.UnknownRows > 0 {
		st.State = budgets.StateFailClosed
		var newest time.Time
		for _, r := range rows {
			if !r.ts.Before(w.From) && r.ts.Before(w.To) && !r.cost.Known && !inFlight(r) {
				newest = r.ts
			}
		}
		if frees := leaves(newest); frees.After(st.FreesAt) {
			st.FreesAt = frees
		}
	}
	return st
}

// A used-up rolling requests budget refuses with the time its oldest row
// leaves, and admits again at that moment.
func testFreesAt(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	other := d.open()
	addBudget(t, l, budgets.Budget{Name: "three", Kind: budgets.KindRequests, Limit: 3, Window: rolling(time.Hour)})
	a := budgets.NewAdmitter()
	var times []time.Time
	for i := range 3 {
		// Alternate handles: the budget counts both processes' rows.
		if err := d.admit([]ledger.Ledger{l, other}[i%2], a, fmt.Sprint("r", i), opDecisions, "m"); err != nil {
			t.Fatalf("admission %d: %v", i, err)
		}
		times = append(times, d.clk.Now())
		d.clk.Advance(10 * time.Minute)
	}
	err := d.admit(l, a, "x", opDecisions, "m")
	var ee *budgets.ExceededError
	if !errors.As(err, &ee) || !errors.Is(err, budgets.ErrExceeded) {
		t.Fatalf("4th admission = %v, want ExceededError", err)
	}
	if want := times[0].Add(time.Hour); !ee.FreesAt.Equal(want) || ee.RetryAfter != want.Sub(d.clk.Now()) {
		t.Errorf("frees at %v (retry after %v), want %v (retry after %v)", ee.FreesAt, ee.RetryAfter, want, want.Sub(d.clk.Now()))
	}
	d.clk.Set(times[0].Add(time.Hour - time.Millisecond))
	if err := d.admit(other, a, "y", opDecisions, "m"); !errors.Is(err, budgets.ErrExceeded) {
		t.Errorf("1 ms before the oldest row leaves: %v, want ErrExceeded", err)
	}
	d.clk.Set(times[0].Add(time.Hour))
	if err := d.admit(other, a, "z", opDecisions, "m"); err != nil {
		t.Errorf("admission once the oldest row left: %v", err)
	}
}

// A tokens budget does not fail closed on rows of unknown tokens (an open
// reservation, a 502), and stops admitting once recorded tokens reach the
// limit.
func testTokensBudget(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	addBudget(t, l, budgets.Budget{Name: "tok", Kind: budgets.KindTokens, Limit: 100, Window: calendar("day")})
	a := budgets.NewAdmitter()
	for _, id := range []string{"open", "bad", "r1"} {
		if err := d.admit(l, a, id, opDecisions, "m"); err != nil {
			t.Fatalf("admission %s: %v", id, err)
		}
	}
	settle(t, l, ledger.Settlement{RequestID: "bad", Model: "m", Status: 502})
	settle(t, l, ledger.Settlement{RequestID: "r1", Model: "m", Status: 200, TotalTokens: ledger.Known(99)})
	if err := d.admit(l, a, "r2", opDecisions, "m"); err != nil {
		t.Fatalf("99 of 100 tokens and 2 rows of unknown tokens: %v, want admitted", err)
	}
	settle(t, l, ledger.Settlement{RequestID: "r2", Model: "m", Status: 200, TotalTokens: ledger.Known(1)})
	err := d.admit(l, a, "r3", opDecisions, "m")
	var ee *budgets.ExceededError
	if !errors.As(err, &ee) {
		t.Fatalf("100 of 100 tokens: %v, want ExceededError", err)
	}
	if st := status(t, l, "tok"); st.State != budgets.StateExhausted || st.Used != 100 || st.UnknownRows != 1 {
		t.Errorf("status = used %d, %d unknown, %s; want 100, 1 (the 502; the open row is in flight), exhausted", st.Used, st.UnknownRows, st.State)
	}
	// Past its deadline and grace, the open row is abandoned: unknown.
	d.clk.Advance(time.Hour + time.Minute)
	if st := status(t, l, "tok"); st.UnknownRows != 2 {
		t.Errorf("status once the open row was abandoned: %d unknown, want 2 (it and the 502)", st.UnknownRows)
	}
}

package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/ledger"
)

// An open reservation counts as one request of unknown tokens and cost,
// never as zero; while within its deadline it is in flight, not usage of
// unknown cost or tokens, for every process; once past it, a cost budget
// fails closed on it and a tokens budget counts it among its unknown
// rows. A tokens budget never fails closed.
func testOpenReservationUnknown(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	other := d.open()
	setPrice(t, l, gptPrice)
	addBudget(t, l, budgets.Budget{Name: "usd", Kind: budgets.KindCost, Limit: 1_000_000, Window: calendar("day")})
	addBudget(t, l, budgets.Budget{Name: "tok", Kind: budgets.KindTokens, Limit: 100, Window: calendar("day")})
	deadline := t0.Add(10 * time.Minute)
	if err := l.Reserve(ctx, ledger.Reservation{RequestID: "open", Operation: opChat, Model: "gpt", Expires: deadline}, budgets.NewAdmitter()); err != nil {
		t.Fatal(err)
	}
	w := ledger.Window{From: t0.Add(-time.Hour), To: t0.Add(time.Hour)}
	for name, h := range map[string]ledger.Ledger{"its own handle": l, "another handle": other} {
		if got := totals(t, h, w); got != (ledger.Totals{Requests: 1, TokensUnknown: 1, CostUnknown: 1}) {
			t.Errorf("%s: totals = %+v, want 1 request of unknown tokens and cost, 0 known", name, got)
		}
		var n int64
		if err := h.View(ctx, func(r ledger.WindowReader) error {
			var err error
			n, err = r.InFlight(w, 10)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Errorf("%s: InFlight = %d before the deadline, want 1", name, n)
		}
		st := statuses(t, h)
		if s := st["usd"]; s.State != budgets.StateOK || s.UnknownRows != 0 {
			t.Errorf("%s: cost budget beside a request in flight = %s, %d unknown; want ok, 0", name, s.State, s.UnknownRows)
		}
		if s := st["tok"]; s.State != budgets.StateOK || s.UnknownRows != 0 {
			t.Errorf("%s: tokens budget beside a request in flight = %s, %d unknown; want ok, 0", name, s.State, s.UnknownRows)
		}
	}
	if err := d.admit(other, budgets.NewAdmitter(), "beside", opChat, "gpt"); err != nil {
		t.Errorf("another process, beside a request in flight: %v", err)
	}
	if err := other.Release(ctx, "beside"); err != nil {
		t.Fatal(err)
	}
	d.clk.Set(deadline) // the reservation outlives its deadline
	for name, h := range map[string]ledger.Ledger{"its own handle": l, "another handle": other} {
		st := statuses(t, h)
		if s := st["usd"]; s.State != budgets.StateFailClosed || s.UnknownRows != 1 || !s.FreesAt.Equal(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)) {
			t.Errorf("%s: cost budget after the deadline = %s, %d unknown, frees %v; want fail-closed on 1 row until midnight", name, s.State, s.UnknownRows, s.FreesAt)
		}
		if s := st["tok"]; s.State != budgets.StateOK || s.UnknownRows != 1 {
			t.Errorf("%s: tokens budget after the deadline = %s, %d unknown; want ok, 1", name, s.State, s.UnknownRows)
		}
	}
	err := d.admit(other, budgets.NewAdmitter(), "late", opChat, "gpt")
	var pe *budgets.PolicyBlockedError
	if !errors.As(err, &pe) || len(pe.Budgets) != 1 || pe.Budgets[0].State != budgets.StateFailClosed {
		t.Errorf("admission after the deadline = %v, want the cost budget failing closed", err)
	}
}

// Usage the provider did not give, or gave outside 0..10^12, is unknown
// (NULL), never stored or summed as a number; a provider's structured
// refusal is 0 tokens and 0 cost; a Decisions row's cost is unknown.
func testNullUsage(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	setPrice(t, l, gptPrice)
	for _, id := range []string{"502", "absurd", "refused", "decisions", "ok", "cached-above"} {
		op := opChat
		if id == "decisions" {
			op = opDecisions
		}
		d.reserve(l, id, op, "gpt")
	}
	settle(t, l, ledger.Settlement{RequestID: "502", Model: "gpt", Status: 502, ErrorCode: "upstream_error"})
	settle(t, l, ledger.Settlement{RequestID: "absurd", Model: "gpt", Status: 200, InputTokens: ledger.Known(-1),
		OutputTokens: ledger.Known(ledger.MaxUsage + 1), TotalTokens: ledger.Known(ledger.MaxUsage + 1), ReasoningTokens: ledger.Known(-5)})
	settle(t, l, ledger.Settlement{RequestID: "refused", Model: "gpt", Status: 400, ErrorCode: "invalid_request", Refused: true})
	settle(t, l, usage("decisions", "gpt", 30, 20))
	settle(t, l, usage("ok", "gpt", 30, 20))
	// A cached count above 10^12 is above any input: unknown, and so is
	// the cost (cached above input), never priced as no cached tokens.
	above := usage("cached-above", "gpt", 30, 20)
	above.CachedInputTokens = ledger.Known(ledger.MaxUsage + 1)
	settle(t, l, above)
	unknown, zero := ledger.Count{}, ledger.Known(0)
	want := map[string][4]ledger.Count{ // input, output, total, cost
		"502":          {unknown, unknown, unknown, unknown},
		"absurd":       {unknown, unknown, unknown, unknown},
		"refused":      {zero, zero, zero, zero},
		"decisions":    {ledger.Known(30), ledger.Known(20), ledger.Known(50), unknown},
		"ok":           {ledger.Known(30), ledger.Known(20), ledger.Known(50), ledger.Known(70)},
		"cached-above": {ledger.Known(30), ledger.Known(20), ledger.Known(50), unknown},
	}
	got := rowByID(t, l)
	for _, id := range sortedKeys(want) {
		r := got[id]
		if g := [4]ledger.Count{r.InputTokens, r.OutputTokens, r.TotalTokens, r.CostMicros}; g != want[id] {
			t.Errorf("%s: input, output, total, cost = %+v, want %+v", id, g, want[id])
		}
	}
	if r := got["absurd"]; r.ReasoningTokens.Known {
		t.Errorf("absurd: reasoning tokens %+v, want unknown", r.ReasoningTokens)
	}
	if r := got["cached-above"]; r.CachedInputTokens.Known {
		t.Errorf("cached-above: cached tokens %+v, want unknown", r.CachedInputTokens)
	}
	w := ledger.Window{From: t0, To: t0.Add(time.Millisecond)}
	if tot := totals(t, l, w); tot != (ledger.Totals{Requests: 6, Tokens: 150, TokensUnknown: 2, CostMicros: 70, CostUnknown: 4}) {
		t.Errorf("totals = %+v, want 6 requests, 150 known tokens + 2 rows unknown, 70 known micro-USD + 4 rows unknown", tot)
	}
}

// A cost budget whose window holds a row of unknown cost fails closed,
// whatever the known sum, until that row leaves the window; usage recorded
// before the budget existed counts.
func testCostFailClosed(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	setPrice(t, l, gptPrice)
	d.reserve(l, "known", opChat, "gpt")
	settle(t, l, usage("known", "gpt", 1, 0)) // 1 micro-USD
	var unknownAt []time.Time
	d.clk.Advance(5 * time.Minute)
	for _, id := range []string{"cut", "502"} { // 10 s apart, in one minute
		d.clk.Advance(10 * time.Second)
		unknownAt = append(unknownAt, d.clk.Now())
		d.reserve(l, id, opChat, "gpt")
		settle(t, l, ledger.Settlement{RequestID: id, Model: "gpt", Status: 200, ErrorCode: "upstream_stream_cut"})
	}
	d.clk.Advance(10 * time.Minute)
	addBudget(t, l, budgets.Budget{Name: "usd", Kind: budgets.KindCost, Limit: 5_000_000, Window: rolling(time.Hour)})
	frees := unknownAt[1].Add(time.Hour) // the newest unknown row leaves
	st := status(t, l, "usd")
	if st.State != budgets.StateFailClosed || st.UnknownRows != 2 || st.Used != 1 || !st.FreesAt.Equal(frees) {
		t.Fatalf("status = %s, used %d, %d unknown, frees %v; want fail-closed, 1 micro-USD known, 2 unknown rows, freeing at %v",
			st.State, st.Used, st.UnknownRows, st.FreesAt, frees)
	}
	a := budgets.NewAdmitter()
	if err := d.admit(l, a, "x", opChat, "gpt"); !errors.Is(err, budgets.ErrPolicyBlocked) {
		t.Errorf("admission while failing closed = %v, want ErrPolicyBlocked", err)
	}
	d.clk.Set(unknownAt[0].Add(time.Hour))
	if st := status(t, l, "usd"); st.State != budgets.StateFailClosed || st.UnknownRows != 1 || !st.FreesAt.Equal(frees) {
		t.Errorf("once the older unknown row left: %s, %d unknown, frees %v; want fail-closed on 1 row until %v", st.State, st.UnknownRows, st.FreesAt, frees)
	}
	d.clk.Set(frees.Add(-time.Millisecond))
	if st := status(t, l, "usd"); st.State != budgets.StateFailClosed {
		t.Errorf("1 ms before the newest unknown row leaves: %s, want fail-closed", st.State)
	}
	d.clk.Set(frees)
	if st := status(t, l, "usd"); st.State != budgets.StateOK || st.UnknownRows != 0 {
		t.Errorf("once the rows left: %s, %d unknown; want ok", st.State, st.UnknownRows)
	}
	if err := d.admit(l, a, "y", opChat, "gpt"); err != nil {
		t.Errorf("admission once the rows left: %v", err)
	}
}

// While a cost budget exists, Decisions requests and requests for a model
// without a price are refused (403) naming it, and nothing is written; a
// priced request is admitted until the known cost reaches the limit.
func testCostPolicy(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	setPrice(t, l, gptPrice)
	addBudget(t, l, budgets.Budget{Name: "spend", Kind: budgets.KindCost, Limit: 1_000, Window: rolling(time.Hour)})
	a := budgets.NewAdmitter()
	var pe *budgets.PolicyBlockedError
	if err := d.admit(l, a, "u", opChat, "unpriced"); !errors.As(err, &pe) || !pe.Unpriced || len(pe.Budgets) != 1 || pe.Budgets[0].Name != "spend" {
		t.Errorf("unpriced model = %v, want PolicyBlockedError naming spend", err)
	}
	if err := d.admit(l, a, "d", opDecisions, "gpt"); !errors.As(err, &pe) || pe.Unpriced {
		t.Errorf("Decisions = %v, want the Decisions policy block", err)
	}
	if rows := rowsOf(t, l); len(rows) != 0 {
		t.Errorf("refused requests left rows %v", ids(rows))
	}
	if err := d.admit(l, a, "p1", opChat, "gpt"); err != nil {
		t.Fatalf("priced model: %v", err)
	}
	settle(t, l, usage("p1", "gpt", 600, 200)) // 600 + 400 = 1000 micro-USD
	d.clk.Advance(time.Minute)
	err := d.admit(l, a, "p2", opChat, "gpt")
	var ee *budgets.ExceededError
	if !errors.As(err, &ee) || ee.RetryAfter != 59*time.Minute {
		t.Errorf("used-up cost budget = %v, want ExceededError freeing in 59m", err)
	}
}

// An open reservation counts as in flight for ledger.MaxInFlight at most,
// whatever its deadline: older, it is usage of unknown cost.
func testMaxInFlight(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	setPrice(t, l, gptPrice)
	addBudget(t, l, budgets.Budget{Name: "usd", Kind: budgets.KindCost, Limit: 1_000_000, Window: rolling(7 * 24 * time.Hour)})
	if err := l.Reserve(ctx, ledger.Reservation{RequestID: "long", Operation: opChat, Model: "gpt", Expires: t0.Add(3 * ledger.MaxInFlight)}, budgets.NewAdmitter()); err != nil {
		t.Fatal(err)
	}
	other := d.open()
	d.clk.Set(t0.Add(ledger.MaxInFlight))
	for name, h := range map[string]ledger.Ledger{"its own handle": l, "another handle": other} {
		if st := status(t, h, "usd"); st.State != budgets.StateOK {
			t.Errorf("%s: at MaxInFlight: %s, %d unknown; want ok (in flight)", name, st.State, st.UnknownRows)
		}
	}
	d.clk.Advance(time.Millisecond)
	for name, h := range map[string]ledger.Ledger{"its own handle": l, "another handle": other} {
		if st := status(t, h, "usd"); st.State != budgets.StateFailClosed || st.UnknownRows != 1 {
			t.Errorf("%s: 1 ms past MaxInFlight: %s, %d unknown; want fail-closed on 1 row", name, st.State, st.UnknownRows)
		}
	}
}

// A cost budget failing closed frees when its newest row of unknown cost
// leaves the window, whatever requests are in flight: an open reservation
// within its deadline is not usage of unknown cost (it is not counted as
// such), so it does not move when the budget frees either, in `budget
// list` and in the refusal alike. Before, the reservation's time was taken
// as the newest unknown cost, and the budget said it freed 30 minutes
// after it really did.
func testFailClosedFreesAtSkipsInFlight(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	other := d.open()
	setPrice(t, l, gptPrice)
	addBudget(t, l, budgets.Budget{Name: "usd", Kind: budgets.KindCost, Limit: 5_000_000, Window: rolling(time.Hour)})
	cutAt := d.clk.Now()
	d.reserve(l, "cut", opChat, "gpt")
	settle(t, l, ledger.Settlement{RequestID: "cut", Model: "gpt", Status: 200, ErrorCode: "upstream_stream_cut"})
	d.clk.Advance(30 * time.Minute)
	d.reserve(l, "open", opChat, "gpt") // in flight for an hour
	// A minute later a request settles, so that the rollups (SQLite's
	// fold) count the open reservation too.
	d.clk.Advance(time.Minute)
	d.reserve(l, "known", opChat, "gpt")
	settle(t, l, usage("known", "gpt", 1, 0))
	frees := cutAt.Add(time.Hour)
	for name, h := range map[string]ledger.Ledger{"its own handle": l, "another handle": other} {
		if st := status(t, h, "usd"); st.State != budgets.StateFailClosed || st.UnknownRows != 1 || !st.FreesAt.Equal(frees) {
			t.Errorf("%s: status beside a request in flight = %s, %d unknown, frees %v; want fail-closed on 1 row, freeing at %v (the unknown row leaves)",
				name, st.State, st.UnknownRows, st.FreesAt, frees)
		}
	}
	err := d.admit(l, budgets.NewAdmitter(), "refused", opChat, "gpt")
	var pe *budgets.PolicyBlockedError
	if !errors.As(err, &pe) || len(pe.Budgets) != 1 || !pe.Budgets[0].FreesAt.Equal(frees) {
		t.Errorf("admission while failing closed = %v, want policy blocked by usd freeing at %v", err, frees)
	}
	d.clk.Set(frees)
	for name, h := range map[string]ledger.Ledger{"its own handle": l, "another handle": other} {
		if st := status(t, h, "usd"); st.State != budgets.StateOK || st.UnknownRows != 0 {
			t.Errorf("%s: at %v, the unknown row gone, the request still in flight: %s, %d unknown; want ok", name, frees, st.State, st.UnknownRows)
		}
	}
	if err := d.admit(l, budgets.NewAdmitter(), "admitted", opChat, "gpt"); err != nil {
		t.Errorf("admission once the unknown row left: %v", err)
	}
}

// A tokens budget counts a request in flight as neither used nor unknown
// tokens (DESIGN, Prices and cost), as a cost budget does: budget list,
// the status document and rotor_budget_unknown_rows show only the rows
// whose tokens are really unknown.
func testTokensUnknownRowsSkipInFlight(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	addBudget(t, l, budgets.Budget{Name: "tok", Kind: budgets.KindTokens, Limit: 1_000_000, Window: calendar("day")})
	// A cut stream: unknown tokens. Then a request in flight.
	d.reserve(l, "cut", opChat, "gpt")
	settle(t, l, ledger.Settlement{RequestID: "cut", Model: "gpt", Status: 200, ErrorCode: "upstream_stream_cut"})
	d.reserve(l, "open", opChat, "gpt")
	d.clk.Advance(time.Minute)
	d.reserve(l, "known", opChat, "gpt")
	settle(t, l, usage("known", "gpt", 10, 5))
	if st := status(t, l, "tok"); st.UnknownRows != 1 || st.Used != 15 {
		t.Errorf("tokens budget beside a request in flight: %d unknown rows, %d used; want 1 (the cut stream) and 15", st.UnknownRows, st.Used)
	}
}

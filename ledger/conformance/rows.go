package conformance

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/ledger"
)

// `rotor ledger settle`: an operator's usage for a row of unknown usage (a
// settled row of unknown tokens, or a reservation left open) settles it,
// with the cost from the price in force then; windows and reports, from
// rollups or raw rows, agree; a Decisions row keeps its unknown cost.
func testResolve(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	setPrice(t, l, gptPrice)
	for _, id := range []string{"cut", "orphan", "known"} {
		d.reserve(l, id, opChat, "gpt")
	}
	d.reserve(l, "dec", opDecisions, "gpt")
	settle(t, l, ledger.Settlement{RequestID: "cut", Model: "gpt", Credential: "key-a", Status: 200, ErrorCode: "upstream_stream_cut"})
	settle(t, l, ledger.Settlement{RequestID: "dec", Model: "gpt", Credential: "key-a", Status: 502})
	settle(t, l, usage("known", "gpt", 1, 1)) // 3 micro-USD at the first price
	// Hours later (the engine may have rolled the rows up), the operator's
	// CLI, another process, resolves them at the price in force now.
	d.clk.Advance(2 * time.Hour)
	cli := d.open()
	setPrice(t, cli, ledger.Price{Model: "gpt", InputMicros: 2_000_000, OutputMicros: 4_000_000, Source: ledger.SourceSet})
	for _, id := range []string{"cut", "orphan"} {
		if err := cli.Resolve(ctx, ledger.Resolution{RequestID: id, Input: ledger.Known(1000), Output: ledger.Known(500), CachedInput: ledger.Known(0)}); err != nil {
			t.Fatalf("Resolve(%s): %v", id, err)
		}
	}
	if err := cli.Resolve(ctx, ledger.Resolution{RequestID: "dec", Input: ledger.Known(10), Output: ledger.Known(5)}); err != nil {
		t.Fatalf("Resolve(dec): %v", err)
	}
	got := rowByID(t, l)
	for id, want := range map[string][2]ledger.Count{
		"cut":    {ledger.Known(1500), ledger.Known(4000)}, // 1000 x 2 + 500 x 4
		"orphan": {ledger.Known(1500), ledger.Known(4000)},
		"known":  {ledger.Known(2), ledger.Known(3)},
		"dec":    {ledger.Known(15), {}},
	} {
		r := got[id]
		if r.TotalTokens != want[0] || r.CostMicros != want[1] || !r.Settled {
			t.Errorf("%s after Resolve = %s; want settled, %v tokens, cost %v", id, describeRow(r), want[0], want[1])
		}
	}
	w := ledger.Window{From: t0.Add(-time.Hour), To: d.clk.Now().Add(time.Millisecond)}
	if tot := totals(t, l, w); tot != (ledger.Totals{Requests: 4, Tokens: 3017, CostMicros: 8003, CostUnknown: 1}) {
		t.Errorf("window totals = %+v, want 4 requests, 3017 tokens all known, 8003 micro-USD known and the Decisions row unknown", tot)
	}
	rep, err := l.Report(ctx, ledger.ReportQuery{From: w.From, To: w.To, By: []string{ledger.KeyOperation}})
	if err != nil {
		t.Fatal(err)
	}
	sortReport(rep)
	if len(rep) != 2 || rep[0].Keys[0] != opChat || rep[0].CostMicros != 8003 || rep[0].CostUnknown != 0 || rep[0].TokensUnknown != 0 || rep[0].InputTokens != 2001 ||
		rep[1].CostUnknown != 1 || rep[1].TotalTokens != 15 || rep[1].TokensUnknown != 0 {
		t.Errorf("report = %s; want chat all known (8003 micro-USD, 2001 input tokens) and decisions with 15 tokens, cost unknown", describeReport(rep))
	}
}

func testResolveErrors(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	setPrice(t, l, gptPrice)
	d.reserve(l, "known", opChat, "gpt")
	settle(t, l, usage("known", "gpt", 1, 1))
	// A Decisions row's cost is always unknown: its known tokens are its
	// known usage.
	d.reserve(l, "decided", opDecisions, "gpt")
	settle(t, l, usage("decided", "gpt", 1, 1))
	d.reserve(l, "cut", opChat, "gpt")
	settle(t, l, ledger.Settlement{RequestID: "cut", Model: "gpt", Status: 200, ErrorCode: "upstream_stream_cut"})
	// A reservation within its deadline plus grace (an hour): its request
	// may still be running, and would fail to settle if an operator had.
	d.reserve(l, "running", opChat, "gpt")
	before := rowsOf(t, l)
	k := ledger.Known
	for _, c := range []struct {
		name string
		res  ledger.Resolution
		want error
	}{
		{"a row of known usage", ledger.Resolution{RequestID: "known", Input: k(5), Output: k(5)}, ledger.ErrUsageKnown},
		{"a Decisions row of known tokens", ledger.Resolution{RequestID: "decided", Input: k(5), Output: k(5)}, ledger.ErrUsageKnown},
		{"no such request", ledger.Resolution{RequestID: "nope", Input: k(5), Output: k(5)}, ledger.ErrNotFound},
		{"output missing", ledger.Resolution{RequestID: "cut", Input: k(5)}, nil},
		{"cached above input", ledger.Resolution{RequestID: "cut", Input: k(5), Output: k(5), CachedInput: k(6)}, nil},
		{"out of range", ledger.Resolution{RequestID: "cut", Input: k(ledger.MaxUsage + 1), Output: k(5)}, nil},
		// Each in range, but their total is not: it was stored unreadable,
		// and SQLite's next fold set the row aside, tokens and cost
		// unknown again (the operator's settle lost, the cost budget
		// failing closed anew).
		{"input plus output out of range", ledger.Resolution{RequestID: "cut", Input: k(600_000_000_000), Output: k(600_000_000_000)}, nil},
		{"a request in flight", ledger.Resolution{RequestID: "running", Input: k(5), Output: k(5)}, ledger.ErrInFlight},
	} {
		err := l.Resolve(ctx, c.res)
		if err == nil || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("Resolve, %s = %v, want an error (%v)", c.name, err, c.want)
		}
	}
	if after := rowsOf(t, l); !slices.EqualFunc(before, after, func(a, b ledger.Row) bool { return describeRow(a) == describeRow(b) }) {
		t.Errorf("refused resolutions changed rows:\nbefore %v\nafter  %v", before, after)
	}
	// A total of exactly MaxUsage is readable, and kept.
	if err := l.Resolve(ctx, ledger.Resolution{RequestID: "cut", Input: k(ledger.MaxUsage - 5), Output: k(5)}); err != nil {
		t.Errorf("Resolve with input + output = MaxUsage: %v", err)
	}
	if r := rowByID(t, l)["cut"]; r.TotalTokens != k(ledger.MaxUsage) {
		t.Errorf("cut = %s, want %d tokens", describeRow(r), int64(ledger.MaxUsage))
	}
	var ife *ledger.InFlightError
	if err := l.Resolve(ctx, ledger.Resolution{RequestID: "running", Input: k(5), Output: k(5)}); !errors.As(err, &ife) || !ife.Until.Equal(d.clk.Now().Add(time.Hour)) {
		t.Errorf("Resolve of a request in flight = %v, want in flight until %v", err, d.clk.Now().Add(time.Hour))
	}
	// Once past its deadline plus grace, it is a reservation the dead
	// left, and settles.
	d.clk.Advance(time.Hour)
	if err := l.Resolve(ctx, ledger.Resolution{RequestID: "running", Input: k(5), Output: k(5)}); err != nil {
		t.Errorf("Resolve once the reservation expired = %v", err)
	}
}

// Rows returns the stored rows in [from, to), by time then request id, at
// most limit, with every field as written: the settlement's model,
// credential, region (the reservation's when it gives none), attempts,
// status, error code, usage and latency; the reservation's pool, client,
// operation and deadline.
func testRows(t *testing.T, e Engine) {
	d, l := fresh(t, e)
	d.reserve(l, "r-b", opChat, "gpt")
	d.reserve(l, "r-a", opChat, "gpt")
	d.clk.Advance(time.Second)
	d.reserve(l, "r-c", opDecisions, "m")
	settle(t, l, ledger.Settlement{RequestID: "r-b", Model: "gpt-x", Credential: "key-b", Region: "us", Attempts: 3, Status: 200,
		InputTokens: ledger.Known(7), OutputTokens: ledger.Known(5), TotalTokens: ledger.Known(12), CachedInputTokens: ledger.Known(2), ReasoningTokens: ledger.Known(1),
		Latency: 1234 * time.Millisecond})
	settle(t, l, ledger.Settlement{RequestID: "r-a", Model: "gpt", Credential: "key-a", Attempts: 1, Status: 503, ErrorCode: "upstream_unavailable"})
	got, err := d.open().Rows(ctx, t0, t0.Add(time.Second), 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids(got), []string{"r-a", "r-b"}) {
		t.Fatalf("Rows[t0, t0+1s) = %v, want r-a, r-b (same time, by id; r-c at the excluded end)", ids(got))
	}
	a, b := got[0], got[1]
	wantB := ledger.Row{RequestID: "r-b", Time: t0, Settled: true, Expires: t0.Add(time.Hour), Operation: opChat, Pool: "api", Model: "gpt-x", Credential: "key-b",
		Region: "us", Client: "ci", Attempts: 3, Status: 200, InputTokens: ledger.Known(7), OutputTokens: ledger.Known(5), TotalTokens: ledger.Known(12),
		CachedInputTokens: ledger.Known(2), ReasoningTokens: ledger.Known(1), Latency: 1234 * time.Millisecond}
	if !sameRow(b, wantB) {
		t.Errorf("r-b = %+v\nwant  %+v", b, wantB)
	}
	if a.Region != "eu" || a.Status != 503 || a.ErrorCode != "upstream_unavailable" || a.TotalTokens.Known || a.CachedInputTokens.Known || a.ReasoningTokens.Known {
		t.Errorf("r-a = %+v, want region eu (the reservation's), status 503, its error code, usage unknown", a)
	}
	all, err := l.Rows(ctx, t0, t0.Add(time.Second+time.Millisecond), 0)
	if err != nil || !slices.Equal(ids(all), []string{"r-a", "r-b", "r-c"}) {
		t.Errorf("Rows to 1 ms past r-c = %v, %v; want r-a, r-b, r-c", ids(all), err)
	}
	if c := all[len(all)-1]; c.Settled || c.Operation != opDecisions || !c.Time.Equal(t0.Add(time.Second)) || c.Status != 0 {
		t.Errorf("r-c = %+v, want an open Decisions reservation at t0+1s", c)
	}
	if two, err := l.Rows(ctx, t0, t0.Add(time.Hour), 2); err != nil || !slices.Equal(ids(two), []string{"r-a", "r-b"}) {
		t.Errorf("Rows with limit 2 = %v, %v; want the oldest two", ids(two), err)
	}
	if none, err := l.Rows(ctx, t0.Add(-time.Hour), t0, 0); err != nil || len(none) != 0 {
		t.Errorf("Rows before t0 = %v, %v; want none", ids(none), err)
	}
	if n, err := l.SetAside(ctx); err != nil || n != 0 {
		t.Errorf("SetAside = %d, %v; want 0", n, err)
	}
	if l.Location() == "" {
		t.Error("Location is empty")
	}
}

func sameRow(a, b ledger.Row) bool {
	ta, tb, ea, eb := a.Time, b.Time, a.Expires, b.Expires
	a.Time, b.Time, a.Expires, b.Expires = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return a == b && ta.Equal(tb) && ea.Equal(eb)
}

// Without a test clock, a row's time is the engine's now (this machine's
// clock for SQLite; the server's now() for PostgreSQL, on this machine
// too), and a window ending now, read by another process, counts it.
func testEngineClock(t *testing.T, e Engine) {
	addr := e.Create(t)
	if err := e.Migrate(ctx, addr); err != nil {
		t.Fatal(err)
	}
	open := func() ledger.Ledger {
		l, err := e.Open(ctx, addr, nil)
		if err != nil {
			t.Fatalf("Open without a clock: %v", err)
		}
		c := &closeOnce{Ledger: l}
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	l, other := open(), open()
	addBudget(t, l, budgets.Budget{Name: "req", Kind: budgets.KindRequests, Limit: 10, Window: rolling(time.Hour)})
	before := time.Now().Truncate(time.Millisecond)
	if err := l.Reserve(ctx, ledger.Reservation{RequestID: "r", Operation: opDecisions, Expires: before.Add(time.Hour)}, budgets.NewAdmitter()); err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	rows, err := other.Rows(ctx, before.Add(-time.Hour), after.Add(time.Hour), 0)
	if err != nil || len(rows) != 1 {
		t.Fatalf("Rows = %v, %v; want r", ids(rows), err)
	}
	// A second of slack: the server's clock is this machine's, read apart.
	if at := rows[0].Time; at.Before(before.Add(-time.Second)) || at.After(after.Add(time.Second)) {
		t.Errorf("row time %v, want between %v and %v (now)", at, before, after)
	}
	if st := status(t, other, "req"); st.Used != 1 {
		t.Errorf("a rolling hour ending now counts %d requests, want 1", st.Used)
	}
}

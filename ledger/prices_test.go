package ledger

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
)

func TestCostRoundsHalfUpInIntegerMicros(t *testing.T) {
	p := &Price{Model: "m", InputMicros: 2_500_000, CachedInputMicros: Known(1_250_000), OutputMicros: 10_000_000}
	cases := []struct {
		name            string
		in, cached, out Count
		price           *Price
		want            Count
	}{
		// (800 x 2.5 + 200 x 1.25 + 100 x 10) = 2000 + 250 + 1000 = 3250 micro-USD.
		{"cached priced apart", Known(1000), Known(200), Known(100), p, Known(3250)},
		// 1 x 2.5 = 2.5 -> 3 (half up); 1 x 1.25 = 1.25 -> 1.
		{"half up", Known(1), Known(0), Known(0), p, Known(3)},
		{"below half", Known(1), Known(1), Known(0), p, Known(1)},
		{"cached unreported counts as none", Known(1000), Count{}, Known(0), p, Known(2500)},
		{"cached as input when no cached price", Known(1000), Known(1000), Known(0), &Price{InputMicros: 2_500_000}, Known(2500)},
		{"unknown input", Count{}, Known(0), Known(1), p, Count{}},
		{"unknown output", Known(1), Known(0), Count{}, p, Count{}},
		{"cached above input", Known(1), Known(2), Known(0), p, Count{}},
		{"no price", Known(1), Known(0), Known(1), nil, Count{}},
		// 10^12 tokens at $1,000,000 per 1M overflows int64 before the
		// division: computed exactly, then too large to be a usage value.
		{"huge", Known(MaxUsage), Known(0), Known(MaxUsage), &Price{InputMicros: MaxPriceMicros, OutputMicros: MaxPriceMicros}, Count{}},
	}
	for _, c := range cases {
		if got := CostOf(c.price, c.in, c.cached, c.out); got != c.want {
			t.Errorf("%s: costOf = %+v, want %+v", c.name, got, c.want)
		}
	}
}

// The price is taken at admission: a price changed while the request is in
// flight does not change its cost; Decisions rows stay unknown cost and a
// refused request records 0 tokens and 0 cost.
func TestCostComputedAtSettlementFromAdmissionPrice(t *testing.T) {
	clk := clock.NewFake(t0)
	s, _ := openTest(t, clk)
	// OnSettle (metrics) is told each row as committed, cost included.
	told := map[string]Settled{}
	s.OnSettle(func(x Settled) { told[x.RequestID] = x })
	if _, err := s.PutPrices(ctx, []Price{{Model: "gpt", InputMicros: 1_000_000, OutputMicros: 2_000_000, Source: SourceSet}}, false); err != nil {
		t.Fatal(err)
	}
	res := func(id, op, model string) {
		t.Helper()
		var priced bool
		if err := s.Reserve(ctx, Reservation{RequestID: id, Operation: op, Model: model, Expires: clk.Now().Add(time.Hour)},
			AdmitFunc(func(_ WindowReader, r Reservation) error { priced = r.Priced; return nil })); err != nil {
			t.Fatal(err)
		}
		if want := op != OperationDecisions && model == "gpt"; priced != want {
			t.Errorf("%s: Priced = %v at admission, want %v", id, priced, want)
		}
	}
	res("chat", "chat.completions", "gpt")
	res("dec", OperationDecisions, "gpt")
	res("unpriced", "responses", "other")
	res("refused", "responses", "other")
	res("dec-refused", OperationDecisions, "gpt")
	// Changed after admission: the in-flight requests keep the old price.
	if _, err := s.PutPrices(ctx, []Price{{Model: "gpt", InputMicros: 9_000_000, OutputMicros: 9_000_000, Source: SourceSet}}, false); err != nil {
		t.Fatal(err)
	}
	settle := func(st Settlement) {
		t.Helper()
		st.Status = 200
		if err := s.Settle(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	tok := Settlement{InputTokens: Known(1000), OutputTokens: Known(500), TotalTokens: Known(1500), CachedInputTokens: Known(100), ReasoningTokens: Known(50)}
	for _, id := range []string{"chat", "dec", "unpriced"} {
		st := tok
		st.RequestID, st.Model = id, "gpt"
		if id == "unpriced" {
			st.Model = "other"
		}
		settle(st)
	}
	settle(Settlement{RequestID: "refused", Model: "other", Refused: true})
	settle(Settlement{RequestID: "dec-refused", Model: "gpt", Refused: true})
	rows, err := s.Rows(ctx, t0.Add(-time.Hour), t0.Add(time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Count{"chat": Known(2000), "dec": {}, "unpriced": {}, "refused": Known(0), "dec-refused": {}}
	for _, r := range rows {
		if r.CostMicros != want[r.RequestID] {
			t.Errorf("%s: cost %+v, want %+v", r.RequestID, r.CostMicros, want[r.RequestID])
		}
		if x := told[r.RequestID]; x.CostMicros != r.CostMicros || x.Operation != r.Operation || x.InputTokens != r.InputTokens {
			t.Errorf("%s: OnSettle told cost %+v operation %q input %+v; the row has %+v %q %+v", r.RequestID,
				x.CostMicros, x.Operation, x.InputTokens, r.CostMicros, r.Operation, r.InputTokens)
		}
		if r.RequestID == "chat" && (r.CachedInputTokens != Known(100) || r.ReasoningTokens != Known(50)) {
			t.Errorf("chat: cached %+v reasoning %+v, want 100 and 50", r.CachedInputTokens, r.ReasoningTokens)
		}
		if (r.RequestID == "refused" || r.RequestID == "dec-refused") && (r.InputTokens != Known(0) || r.OutputTokens != Known(0) || r.TotalTokens != Known(0)) {
			t.Errorf("refused: tokens %+v %+v %+v, want known 0", r.InputTokens, r.OutputTokens, r.TotalTokens)
		}
	}
}

// `rotor ledger settle` resolves a row of unknown usage: a settled row of
// unknown tokens, or a reservation left open, gets the operator's tokens
// and the cost at the price in force then; windows and reports, read from
// the rollups or raw, agree; a row already known is refused.
func TestLedgerSettleResolvesUnknownRow(t *testing.T) {
	clk := clock.NewFake(t0)
	s, _ := openTest(t, clk)
	if _, err := s.PutPrices(ctx, []Price{{Model: "gpt", InputMicros: 1_000_000, OutputMicros: 2_000_000, Source: SourceSet}}, false); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"cut", "orphan", "known"} {
		if err := s.Reserve(ctx, Reservation{RequestID: id, Operation: "chat.completions", Model: "gpt", Expires: clk.Now().Add(time.Minute)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Settle(ctx, Settlement{RequestID: "cut", Model: "gpt", Status: 200, ErrorCode: "upstream_stream_cut"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Settle(ctx, Settlement{RequestID: "known", Model: "gpt", Status: 200, InputTokens: Known(1), OutputTokens: Known(1), TotalTokens: Known(2)}); err != nil {
		t.Fatal(err)
	}
	// Folded into the rollups before it is resolved: the resolution must
	// move the rollups too.
	clk.Advance(2 * time.Hour)
	if _, err := s.PutPrices(ctx, []Price{{Model: "other", InputMicros: 1, OutputMicros: 1, Source: SourceSet}}, false); err != nil {
		t.Fatal(err) // a write whose batch folds
	}
	for _, id := range []string{"cut", "orphan"} {
		if err := s.Resolve(ctx, Resolution{RequestID: id, Input: Known(1000), Output: Known(500), CachedInput: Known(0)}); err != nil {
			t.Fatalf("%s: %v", id, err)
		}
	}
	if err := s.Resolve(ctx, Resolution{RequestID: "known", Input: Known(1), Output: Known(1)}); !errors.Is(err, ErrUsageKnown) {
		t.Errorf("known row: %v, want ErrUsageKnown", err)
	}
	if err := s.Resolve(ctx, Resolution{RequestID: "nope", Input: Known(1), Output: Known(1)}); !errors.Is(err, ErrNotFound) {
		t.Errorf("no row: %v, want ErrNotFound", err)
	}
	w := Window{From: t0.Add(-time.Hour), To: clk.Now().Add(time.Millisecond)}
	if got := viewTotals(t, s, w); got.CostUnknown != 0 || got.TokensUnknown != 0 || got.CostMicros != 2*2000+3 || got.Tokens != 3002 {
		t.Errorf("window totals = %+v, want every row known: cost 4003, tokens 3002", got)
	}
	rep, err := s.Report(ctx, ReportQuery{From: w.From, To: w.To, By: []string{KeyModel}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep) != 1 || rep[0].CostUnknown != 0 || rep[0].TokensUnknown != 0 || rep[0].CostMicros != 4003 || rep[0].InputTokens != 2001 || rep[0].Errors != 2 {
		t.Errorf("report = %+v, want one group, all known, cost 4003, input 2001, 2 errors (the cut stream and the orphan)", rep)
	}
}

// A price set by another process (the CLI) binds a running runtime at its
// next admission, through config_version, and a removed one unbinds.
func TestPriceSetByAnotherProcessBindsAtNextAdmission(t *testing.T) {
	clk := clock.NewFake(t0)
	s, path := openTest(t, clk)
	cli := openAt(t, path, clk)
	priced := func(id string) bool {
		t.Helper()
		var got bool
		if err := s.Reserve(ctx, Reservation{RequestID: id, Operation: "embeddings", Model: "emb", Expires: clk.Now().Add(time.Hour)},
			AdmitFunc(func(_ WindowReader, r Reservation) error { got = r.Priced; return nil })); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if priced("a") {
		t.Fatal("priced before any price was set")
	}
	if _, err := cli.PutPrices(ctx, []Price{{Model: "emb", InputMicros: 20_000, Source: "prices.json"}}, false); err != nil {
		t.Fatal(err)
	}
	if !priced("b") {
		t.Error("a price set by another process did not bind the next admission")
	}
	if err := cli.RemovePrice(ctx, "emb"); err != nil {
		t.Fatal(err)
	}
	if priced("c") {
		t.Error("a price removed by another process still binds")
	}
	if err := cli.RemovePrice(ctx, "emb"); !errors.Is(err, ErrNotFound) {
		t.Errorf("remove again: %v, want ErrNotFound", err)
	}
}

// Cached and reasoning tokens follow the other usage values: outside
// 0..10^12 they are unknown, never stored or summed; an unreadable input
// makes the cost unknown, and so does a cached count above 10^12 (above
// any input: the rule "cached above input" holds).
func TestCachedAndReasoningOutOfRangeAreUnknown(t *testing.T) {
	clk := clock.NewFake(t0)
	s, _ := openTest(t, clk)
	if _, err := s.PutPrices(ctx, []Price{{Model: "gpt", InputMicros: 1_000_000, OutputMicros: 1_000_000, Source: SourceSet}}, false); err != nil {
		t.Fatal(err)
	}
	for i, st := range []Settlement{
		{CachedInputTokens: Known(MaxUsage + 1), ReasoningTokens: Known(-1), InputTokens: Known(10), OutputTokens: Known(10)},
		{CachedInputTokens: Known(1), ReasoningTokens: Known(1), InputTokens: Known(-5), OutputTokens: Known(10)},
	} {
		id := fmt.Sprint("r", i)
		if err := s.Reserve(ctx, Reservation{RequestID: id, Operation: "responses", Model: "gpt", Expires: clk.Now().Add(time.Hour)}, nil); err != nil {
			t.Fatal(err)
		}
		st.RequestID, st.Model, st.Status = id, "gpt", 200
		if err := s.Settle(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := s.Rows(ctx, t0.Add(-time.Hour), t0.Add(time.Hour), 0)
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows %v, %v", rows, err)
	}
	if r := rows[0]; r.CachedInputTokens.Known || r.ReasoningTokens.Known || r.CostMicros.Known {
		t.Errorf("r0 = %+v, want cached, reasoning and cost unknown (cached above input)", r)
	}
	if r := rows[1]; r.InputTokens.Known || r.CostMicros.Known {
		t.Errorf("r1 = %+v, want input and cost unknown", r)
	}
	rep, err := s.Report(ctx, ReportQuery{From: t0.Add(-time.Hour), To: t0.Add(time.Hour), By: []string{KeyOperation}})
	if err != nil || len(rep) != 1 || rep[0].CachedInputTokens != 1 || rep[0].CachedUnknown != 1 || rep[0].ReasoningUnknown != 1 || rep[0].CostUnknown != 2 {
		t.Errorf("report = %+v, %v", rep, err)
	}
}

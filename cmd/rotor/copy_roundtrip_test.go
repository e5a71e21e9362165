package main

import (
	"context"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/testutil/pgtest"
	"github.com/rotorhq/rotor/ledger"
)

// SQLite -> PostgreSQL -> SQLite keeps every row (every field), budget,
// price and token (README: `rotor ledger copy`).
func TestCopyRoundTripKeepsEverything(t *testing.T) {
	ctx := context.Background()
	base, _ := pgtest.Schema(t)
	f, _, _ := fakeFactory(t, nil, nil)
	src := fillLedger(t, f, 3)
	// rows of every shape
	rs := []ledger.Settlement{
		{RequestID: "unk", Model: "gpt", Status: 502, ErrorCode: "upstream_error", Attempts: 2, Credential: "k2", Region: "eu", Latency: 1234 * time.Millisecond},
		{RequestID: "cached", Model: "gpt", Status: 200, Attempts: 1, Credential: "k1", InputTokens: ledger.Known(1000), OutputTokens: ledger.Known(7), TotalTokens: ledger.Known(1007), CachedInputTokens: ledger.Known(600), ReasoningTokens: ledger.Known(3), Latency: 77 * time.Millisecond},
		{RequestID: "refused", Model: "gpt", Status: 400, ErrorCode: "invalid_request", Attempts: 1, InputTokens: ledger.Known(0), OutputTokens: ledger.Known(0), TotalTokens: ledger.Known(0)},
	}
	for _, s := range rs {
		if err := src.Reserve(ctx, ledger.Reservation{RequestID: s.RequestID, Operation: "responses", Pool: "p1", Model: "gpt", Region: "eu", Client: "ci", Expires: f.Clock.Now()}, nil); err != nil {
			t.Fatal(err)
		}
		if err := src.Settle(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	// an abandoned reservation (its deadline and grace long past at copy time)
	if err := src.Reserve(ctx, ledger.Reservation{RequestID: "crashed", Operation: "decisions", Model: "d", Client: "ci", Expires: f.Clock.Now()}, nil); err != nil {
		t.Fatal(err)
	}
	for _, b := range []ledger.BudgetRecord{
		{Name: "tok", Kind: "tokens", Limit: 123456, Window: "7d", CreatedAt: f.Clock.Now().Add(-time.Minute).Truncate(time.Millisecond)},
		{Name: "usd", Kind: "cost", Limit: 5_000_000, Window: "month", CreatedAt: f.Clock.Now().Truncate(time.Millisecond)},
	} {
		if err := src.PutBudget(ctx, b, false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := src.PutPrices(ctx, []ledger.Price{{Model: "gpt-mini", InputMicros: 150_000, OutputMicros: 600_000, CachedInputMicros: ledger.Known(75_000), Source: "prices.yaml", Updated: f.Clock.Now().Add(-48 * time.Hour).Truncate(time.Millisecond)}}, false); err != nil {
		t.Fatal(err)
	}
	f.Clock.(*clock.Fake).Advance(2 * time.Hour)

	if err := copyRun(ctx, &copyOptions{IO: f.IO, From: f.Ledger, To: f.openCopyTarget, Source: f.DBPath, URL: base, PageRows: 4}); err != nil {
		t.Fatal(err)
	}
	g, _, _ := fakeFactory(t, nil, nil)
	g.Clock = f.Clock
	g.DBPath = func() (string, error) { return base, nil }
	back := filepath.Join(t.TempDir(), "back.db")
	if err := copyRun(ctx, &copyOptions{IO: g.IO, From: g.Ledger, To: g.openCopyTarget, Source: g.DBPath, URL: back, PageRows: 4}); err != nil {
		t.Fatal(err)
	}
	pg := copiedTo(t, f, base)
	sq := copiedTo(t, f, back)
	from, to := time.Unix(0, 0), f.Clock.Now().Add(time.Hour)
	for name, l := range map[string]ledger.Ledger{"postgres": pg, "sqlite again": sq} {
		type snap struct {
			Rows    []ledger.Row
			Budgets []ledger.BudgetRecord
			Prices  map[string]ledger.Price
			Tokens  []ledger.ClientToken
		}
		read := func(l ledger.Ledger) snap {
			var s snap
			var err error
			if s.Rows, err = l.Rows(ctx, from, to, 0); err != nil {
				t.Fatal(err)
			}
			if s.Budgets, err = l.Budgets(ctx); err != nil {
				t.Fatal(err)
			}
			if s.Prices, err = l.Prices(ctx); err != nil {
				t.Fatal(err)
			}
			if s.Tokens, err = l.ClientTokens(ctx); err != nil {
				t.Fatal(err)
			}
			return s
		}
		want, got := read(src), read(l)
		if len(want.Rows) != 3+4 {
			t.Fatalf("source rows %d", len(want.Rows))
		}
		if !reflect.DeepEqual(got.Rows, want.Rows) {
			for i := range max(len(got.Rows), len(want.Rows)) {
				if i >= len(got.Rows) || i >= len(want.Rows) || !reflect.DeepEqual(got.Rows[i], want.Rows[i]) {
					t.Errorf("%s row %d:\n got %+v\nwant %+v", name, i, at(got.Rows, i), at(want.Rows, i))
				}
			}
		}
		if !reflect.DeepEqual(got.Budgets, want.Budgets) {
			t.Errorf("%s budgets:\n got %+v\nwant %+v", name, got.Budgets, want.Budgets)
		}
		if !reflect.DeepEqual(got.Prices, want.Prices) {
			t.Errorf("%s prices:\n got %+v\nwant %+v", name, got.Prices, want.Prices)
		}
		if fmt.Sprint(got.Tokens) != fmt.Sprint(want.Tokens) {
			t.Errorf("%s tokens:\n got %+v\nwant %+v", name, got.Tokens, want.Tokens)
		}
	}
}

func at(rs []ledger.Row, i int) any {
	if i < len(rs) {
		return rs[i]
	}
	return nil
}

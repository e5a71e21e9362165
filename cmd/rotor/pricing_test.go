package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/rotorhq/rotor/ledger"
)

// The flags -> options tests of the pricing verbs and ledger settle, in
// verbs_test.go's runFTests.
func init() {
	runFTests["pricing set"] = pricingSetFlags
	runFTests["pricing list"] = func(t *testing.T) {
		f, _, _ := testFactory(t)
		if got := flagsToOptions(t, f, newCmdPricingList, "--format", "csv"); got.Format != FormatCSV {
			t.Errorf("format %q, want csv", got.Format)
		}
		refused(t, f, newCmdPricingList, "--format", "--format", "xml")
	}
	runFTests["pricing remove"] = func(t *testing.T) {
		f, _, _ := testFactory(t)
		if got := flagsToOptions(t, f, newCmdPricingRemove, "gpt"); got.Name != "gpt" {
			t.Errorf("model %q, want gpt", got.Name)
		}
	}
	runFTests["pricing import"] = func(t *testing.T) {
		f, _, _ := testFactory(t)
		got := flagsToOptions(t, f, newCmdPricingImport, "prices.json", "--provider", "azure", "--replace")
		if got.Path != "prices.json" || got.Provider != "azure" || !got.Replace {
			t.Errorf("options %+v", got)
		}
		refused(t, f, newCmdPricingImport, "--provider", "x.json", "--provider", "a/b")
	}
	runFTests["ledger settle"] = ledgerSettleFlags
}

func pricingSetFlags(t *testing.T) {
	f, _, _ := testFactory(t)
	var got *pricingSetOptions
	cmd := newCmdPricingSet(f, func(o *pricingSetOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"gpt-4.1-mini", "--input", "0.4", "--output", "1.600001", "--cached-input", "0.1"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	want := ledger.Price{Model: "gpt-4.1-mini", InputMicros: 400_000, OutputMicros: 1_600_001, CachedInputMicros: ledger.Known(100_000), Source: ledger.SourceSet}
	if got.Price != want {
		t.Errorf("price = %+v, want %+v", got.Price, want)
	}
	for _, c := range []struct {
		want string
		args []string
	}{
		{"--input is required", []string{"m", "--output", "1"}},
		{"--output", []string{"m", "--input", "1", "--output", "1e-3"}},
		{"--input", []string{"m", "--input", "-1", "--output", "1"}},
		{"--input", []string{"m", "--input", "1/3", "--output", "1"}},
		{"--cached-input", []string{"m", "--input", "1", "--output", "1", "--cached-input", "0.0000001"}},
		{"--input", []string{"m", "--input", "1000001", "--output", "1"}},
		{"drop the api/ prefix", []string{"api/m", "--input", "1", "--output", "1"}},
	} {
		refused[pricingSetOptions](t, f, newCmdPricingSet, c.want, c.args...)
	}
}

func TestPricingSetListRemoveRun(t *testing.T) {
	ctx := context.Background()
	f, out, _ := fakeFactory(t, nil, nil)
	set := &pricingSetOptions{IO: f.IO, Ledger: f.LedgerOrCreate,
		Price: ledger.Price{Model: "gpt", InputMicros: 2_500_000, OutputMicros: 10_000_000, Source: ledger.SourceSet}}
	if err := pricingSetRun(ctx, set); err != nil || out.String() != "set the price of gpt: $2.5 input, $10 output per 1M tokens\n" {
		t.Fatalf("set: %v, printed %q", err, out)
	}
	out.Reset()
	f2, out2, _ := fakeFactory(t, nil, nil)
	cached := &pricingSetOptions{IO: f2.IO, Ledger: f2.LedgerOrCreate,
		Price: ledger.Price{Model: "gpt-c", InputMicros: 400_000, OutputMicros: 1_600_000, CachedInputMicros: ledger.Known(100_000), Source: ledger.SourceSet}}
	if err := pricingSetRun(ctx, cached); err != nil || out2.String() != "set the price of gpt-c: $0.4 input, $0.1 cached input, $1.6 output per 1M tokens\n" {
		t.Fatalf("set with a cached price: %v, printed %q", err, out2)
	}
	if err := pricingListRun(ctx, &listOptions{IO: f.IO, Ledger: f.Ledger, Format: FormatJSON}); err != nil {
		t.Fatal(err)
	}
	var rows []map[string]any
	if err := json.Unmarshal(out.Bytes(), &rows); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(rows) != 1 || rows[0]["model"] != "gpt" || rows[0]["input_usd_per_1m"] != 2.5 || rows[0]["cached_input_usd_per_1m"] != nil ||
		rows[0]["output_usd_per_1m"] != float64(10) || rows[0]["source"] != "set" || rows[0]["updated"] != "2026-11-30T12:00:00Z" {
		t.Errorf("list = %v", rows)
	}
	out.Reset()
	rm := flagsToOptions(t, f, newCmdPricingRemove, "gpt")
	if err := removeRun(ctx, rm); err != nil || out.String() != "removed the price of gpt\n" {
		t.Errorf("remove: %v, printed %q", err, out)
	}
	wantUsageError(t, "remove again", removeRun(ctx, rm), `no price for model "gpt"`)
}

// pricing import reads LiteLLM's price file: per-token decimals stored per
// 1M tokens exactly; sample_spec, zero-priced, unreadable and
// provider-prefixed entries skipped (unless --provider); a price set by
// hand kept unless --replace.
func TestPricingImportLiteLLM(t *testing.T) {
	ctx := context.Background()
	f, out, _ := fakeFactory(t, nil, nil)
	store, err := f.LedgerOrCreate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.PutPrices(ctx, []ledger.Price{{Model: "o3", InputMicros: 1, OutputMicros: 1, Source: ledger.SourceSet}}, false); err != nil {
		t.Fatal(err)
	}
	imp := &pricingImportOptions{IO: f.IO, Ledger: f.LedgerOrCreate, Path: "testdata/model_prices_and_context_window.json"}
	if err := pricingImportRun(ctx, imp); err != nil {
		t.Fatal(err)
	}
	// Taken: gpt-4.1-mini, text-embedding-3-small (and o3, kept as set).
	// Skipped: sample_spec, azure/gpt-4.1-mini, azure/o3, free-model,
	// dall-e-3, bad-price.
	if want := "imported 2 prices from model_prices_and_context_window.json; skipped 6 entries and kept 1 prices set by hand (--replace overwrites them)\n"; out.String() != want {
		t.Errorf("printed %q, want %q", out, want)
	}
	prices, _ := store.Prices(ctx)
	want := map[string]ledger.Price{
		"gpt-4.1-mini":           {InputMicros: 400_000, OutputMicros: 1_600_000, CachedInputMicros: ledger.Known(100_000)},
		"text-embedding-3-small": {InputMicros: 20_000},
		"o3":                     {InputMicros: 1, OutputMicros: 1},
	}
	if len(prices) != len(want) {
		t.Errorf("prices = %v, want %d", prices, len(want))
	}
	for m, w := range want {
		p := prices[m]
		if p.InputMicros != w.InputMicros || p.OutputMicros != w.OutputMicros || p.CachedInputMicros != w.CachedInputMicros {
			t.Errorf("%s = %+v, want %+v", m, p, w)
		}
	}
	out.Reset()
	imp.Provider, imp.Replace = "azure", true
	if err := pricingImportRun(ctx, imp); err != nil {
		t.Fatal(err)
	}
	// The azure/ keys win over the bare ones (one skipped each); o3 set
	// by hand is replaced.
	if want := "imported 3 prices from model_prices_and_context_window.json; skipped 6 entries\n"; out.String() != want {
		t.Errorf("--provider azure --replace printed %q, want %q", out, want)
	}
	prices, _ = store.Prices(ctx)
	if p := prices["o3"]; p.InputMicros != 2_200_000 || p.Source != "model_prices_and_context_window.json" {
		t.Errorf("o3 after --replace --provider azure = %+v", p)
	}
	if p := prices["gpt-4.1-mini"]; p.InputMicros != 440_000 || p.CachedInputMicros.Known {
		t.Errorf("gpt-4.1-mini from azure/ = %+v", p)
	}
	for _, bad := range []string{"testdata/missing.json", "pricing.go"} {
		before, _ := store.Prices(ctx)
		wantUsageError(t, bad, pricingImportRun(ctx, &pricingImportOptions{IO: f.IO, Ledger: f.LedgerOrCreate, Path: bad}), bad)
		if after, _ := store.Prices(ctx); len(after) != len(before) {
			t.Errorf("%s changed the prices", bad)
		}
	}
}

func TestLedgerSettleRun(t *testing.T) {
	ctx := context.Background()
	f, out, _ := fakeFactory(t, nil, nil)
	store, err := f.LedgerOrCreate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.PutPrices(ctx, []ledger.Price{{Model: "gpt", InputMicros: 1_000_000, OutputMicros: 1_000_000, Source: ledger.SourceSet}}, false); err != nil {
		t.Fatal(err)
	}
	if err := store.Reserve(ctx, ledger.Reservation{RequestID: "req-1", Operation: "responses", Model: "gpt", Expires: f.Clock.Now()}, nil); err != nil {
		t.Fatal(err)
	}
	opts := &settleOptions{IO: f.IO, Ledger: f.Ledger, Resolution: ledger.Resolution{RequestID: "req-1", Input: ledger.Known(1000), Output: ledger.Known(500)}}
	// No --cached: the cached count is unknown, not printed as 0.
	if err := settleRun(ctx, opts); err != nil || out.String() != "settled req-1: 1000 input tokens, 500 output tokens\n" {
		t.Fatalf("settle: %v, printed %q", err, out)
	}
	rows, _ := store.Rows(ctx, f.Clock.Now().Add(-1e12), f.Clock.Now().Add(1e12), 0)
	if len(rows) != 1 || !rows[0].Settled || rows[0].CostMicros != ledger.Known(1500) {
		t.Errorf("rows = %+v, want req-1 settled at 1500 micro-USD", rows)
	}
	wantUsageError(t, "settle again", settleRun(ctx, opts), "usage already known")
	opts.Resolution.RequestID = "nope"
	wantUsageError(t, "no such row", settleRun(ctx, opts), `REQUEST_ID "nope"`)
}

func ledgerSettleFlags(t *testing.T) {
	f, _, _ := testFactory(t)
	var got *settleOptions
	cmd := newCmdLedgerSettle(f, func(o *settleOptions) error { got = o; return nil })
	cmd.SetArgs([]string{"r1", "--input", "10", "--output", "5", "--cached", "4"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if want := (ledger.Resolution{RequestID: "r1", Input: ledger.Known(10), Output: ledger.Known(5), CachedInput: ledger.Known(4)}); got.Resolution != want {
		t.Errorf("resolution = %+v, want %+v", got.Resolution, want)
	}
	// The bounds themselves are counts: 10^12 tokens of input, all of them
	// cached, or of output.
	for _, args := range [][]string{{"r1", "--input", "1000000000000", "--output", "0", "--cached", "1000000000000"}, {"r1", "--input", "0", "--output", "1000000000000"}} {
		if got := flagsToOptions(t, f, newCmdLedgerSettle, args...); got.Resolution.Input.V+got.Resolution.Output.V != 1e12 {
			t.Errorf("ledger settle %q: resolution %+v", args, got.Resolution)
		}
	}
	refused[settleOptions](t, f, newCmdLedgerSettle, "--output is required", "r1", "--input", "1")
	refused[settleOptions](t, f, newCmdLedgerSettle, "--input", "r1", "--input", "-1", "--output", "1")
	refused[settleOptions](t, f, newCmdLedgerSettle, "--cached 5 is more than --input 1", "r1", "--input", "1", "--output", "1", "--cached", "5")
	// Each in range, their total not: settle used to succeed, and the row
	// showed unknown tokens again (on SQLite, set aside at the next fold),
	// its cost budget failing closed anew.
	refused[settleOptions](t, f, newCmdLedgerSettle, "--input + --output must be at most 10^12", "r1", "--input", "600000000000", "--output", "600000000000")
}

// pricing list prints models in order, a cached-input price when one is
// set (empty when not); --provider takes a provider name, not one with a
// space.
func TestPricingListOrderAndCachedColumn(t *testing.T) {
	f, out, errOut := testFactory(t)
	for _, args := range [][]string{
		{"pricing", "set", "zeta", "--input", "1", "--output", "2", "--cached-input", "0.25"},
		{"pricing", "set", "alpha", "--input", "3", "--output", "4"},
	} {
		if code := runCmd(t, f, out, errOut, args...); code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errOut)
		}
	}
	if code := runCmd(t, f, out, errOut, "pricing", "list", "--format", "csv"); code != 0 {
		t.Fatalf("pricing list: exit %d: %s", code, errOut)
	}
	want := "model,input_usd_per_1m,cached_input_usd_per_1m,output_usd_per_1m,source,updated\n" +
		"alpha,3,,4,set,2026-11-30T12:00:00Z\n" +
		"zeta,1,0.25,2,set,2026-11-30T12:00:00Z\n"
	if out.String() != want {
		t.Errorf("pricing list csv =\n%s\nwant\n%s", out, want)
	}
	if code := runCmd(t, f, out, errOut, "pricing", "import", "prices.json", "--provider", "my provider"); code != ExitUsage || !strings.Contains(errOut.String(), "--provider") {
		t.Errorf("--provider with a space: exit %d, stderr %q; want exit 2 naming --provider", code, errOut)
	}
}

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rotorhq/rotor/internal/pricefile"
	"github.com/rotorhq/rotor/ledger"
)

func newCmdPricing(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "pricing",
		Short: "Set, list, remove and import model prices",
		Long: `Prices give rows of the OpenAI routes a cost, in integer micro-USD, so that
cost budgets can admit them. A price is USD per 1M tokens for input, output
and, optionally, cached input (cached input costs as input when unset), for
the model as sent upstream (no api/ or zdr/ prefix). Prices live in the
ledger database and bind a running runtime or bridge at its next request;
a request keeps the price it was admitted with. While any cost budget
exists, a request for a model without a price is refused (403
policy_blocked). Decisions rows have no cost, whatever the price.`,
	}
	cmd.AddCommand(newCmdPricingSet(f, nil), newCmdPricingList(f, nil), newCmdPricingRemove(f, nil), newCmdPricingImport(f, nil))
	return cmd
}

// parseUSDPer1M reads a price in USD per 1M tokens, with up to 6 decimals,
// into micro-USD per 1M tokens.
func parseUSDPer1M(flag, s string) (int64, error) {
	whole, frac, _ := strings.Cut(s, ".")
	r, ok := pricefile.ParseDecimal(s)
	if !ok || strings.ContainsAny(s, "eE") || whole == "" {
		return 0, usageErrorf("--%s %q: want USD per 1M tokens, such as 2.5 or 0.15", flag, s)
	}
	if len(frac) > 6 {
		return 0, usageErrorf("--%s %q: at most 6 decimals (micro-USD)", flag, s)
	}
	m, ok := pricefile.Micros(r, 1_000_000)
	if !ok {
		return 0, usageErrorf("--%s %q: more than $1,000,000 per 1M tokens", flag, s)
	}
	return m, nil
}

// checkModel refuses a model name rotor cannot price
// (pricefile.ModelOK): empty, with spaces or control characters, or with
// the prefix a caller writes.
func checkModel(model string) error {
	if !pricefile.ValidModel(model) {
		return usageErrorf("MODEL %q: want the model as sent upstream, such as gpt-4.1-mini", model)
	}
	if p := pricefile.CallerPrefix(model); p != "" {
		return usageErrorf("MODEL %q: prices are for the model as sent upstream; drop the %s prefix", model, p)
	}
	return nil
}

type pricingSetOptions struct {
	IO     *IOStreams
	Ledger func(context.Context) (ledger.Ledger, error)
	Price  ledger.Price
	input  string
	output string
	cached string
}

func newCmdPricingSet(f *Factory, runF func(*pricingSetOptions) error) *cobra.Command {
	opts := &pricingSetOptions{IO: f.IO, Ledger: f.LedgerOrCreate}
	cmd := &cobra.Command{
		Use:   "set MODEL --input USD --output USD [--cached-input USD]",
		Short: "Set a model's price, in USD per 1M tokens",
		Long: `Set a model's price, in USD per 1M tokens with up to 6 decimals. MODEL is
the model as sent upstream (no api/ or zdr/ prefix). A price set here is
never overwritten by pricing import unless it is given --replace.`,
		Example: `  rotor pricing set gpt-4.1-mini --input 0.4 --output 1.6 --cached-input 0.1`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.parse(cmd, args[0]); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return pricingSetRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.input, "input", "", "USD per 1M input tokens")
	fl.StringVar(&opts.output, "output", "", "USD per 1M output tokens")
	fl.StringVar(&opts.cached, "cached-input", "", "USD per 1M cached input tokens (default: the input price)")
	return cmd
}

func (o *pricingSetOptions) parse(cmd *cobra.Command, model string) error {
	if err := checkModel(model); err != nil {
		return err
	}
	fl := cmd.Flags()
	for _, name := range []string{"input", "output"} {
		if !fl.Changed(name) {
			return usageErrorf("--%s is required (USD per 1M tokens)", name)
		}
	}
	p := ledger.Price{Model: model, Source: ledger.SourceSet}
	var err error
	if p.InputMicros, err = parseUSDPer1M("input", o.input); err != nil {
		return err
	}
	if p.OutputMicros, err = parseUSDPer1M("output", o.output); err != nil {
		return err
	}
	if fl.Changed("cached-input") {
		v, err := parseUSDPer1M("cached-input", o.cached)
		if err != nil {
			return err
		}
		p.CachedInputMicros = ledger.Known(v)
	}
	o.Price = p
	return nil
}

func pricingSetRun(ctx context.Context, opts *pricingSetOptions) error {
	store, err := opts.Ledger(ctx)
	if err != nil {
		return err
	}
	if _, err := store.PutPrices(ctx, []ledger.Price{opts.Price}, true); err != nil {
		return err
	}
	cached := ""
	if c := opts.Price.CachedInputMicros; c.Known {
		cached = ", $" + usdPer1M(c.V) + " cached input"
	}
	fmt.Fprintf(opts.IO.Out, "set the price of %s: $%s input%s, $%s output per 1M tokens\n", opts.Price.Model,
		usdPer1M(opts.Price.InputMicros), cached, usdPer1M(opts.Price.OutputMicros))
	return nil
}

// usdPer1M prints micro-USD per 1M tokens as USD per 1M tokens.
func usdPer1M(micros int64) string { return usdCell(micros).Text }

func newCmdPricingList(f *Factory, runF func(*listOptions) error) *cobra.Command {
	return newCmdList(f, "List model prices",
		`List model prices, in USD per 1M tokens. cached_input_usd_per_1m is null
(json) or empty when unset: cached input then costs as input. source is set
(by pricing set) or the name of the file pricing import read.`, pricingListRun, runF)
}

func pricingListRun(ctx context.Context, opts *listOptions) error {
	store, err := opts.Ledger(ctx)
	if err != nil {
		return err
	}
	prices, err := store.Prices(ctx)
	if err != nil {
		return err
	}
	recs := records{Columns: []string{"model", "input_usd_per_1m", "cached_input_usd_per_1m", "output_usd_per_1m", "source", "updated"}}
	models := make([]string, 0, len(prices))
	for m := range prices {
		models = append(models, m)
	}
	sort.Strings(models)
	for _, m := range models {
		p := prices[m]
		cached := cell{JSON: nil, Text: ""}
		if p.CachedInputMicros.Known {
			cached = usdCell(p.CachedInputMicros.V)
		}
		recs.Rows = append(recs.Rows, []cell{textCell(m), usdCell(p.InputMicros), cached, usdCell(p.OutputMicros),
			textCell(p.Source), textCell(p.Updated.UTC().Format(time.RFC3339))})
	}
	return recs.write(opts.IO.Out, opts.Format)
}

type pricingImportOptions struct {
	IO       *IOStreams
	Ledger   func(context.Context) (ledger.Ledger, error)
	Path     string
	Provider string
	Replace  bool
}

func newCmdPricingImport(f *Factory, runF func(*pricingImportOptions) error) *cobra.Command {
	opts := &pricingImportOptions{IO: f.IO, Ledger: f.LedgerOrCreate}
	cmd := &cobra.Command{
		Use:   "import FILE [--provider NAME] [--replace]",
		Short: "Import prices from LiteLLM's model_prices_and_context_window.json",
		Long: `Import prices from the community price file LiteLLM publishes
(model_prices_and_context_window.json): input_cost_per_token,
output_cost_per_token and cache_read_input_token_cost, USD per token, read
as decimals and stored per 1M tokens (rounded half up to a micro-USD).

It takes the entries keyed by a bare model name with a nonzero input or
output price, and skips sample_spec, zero-priced entries, entries it cannot
read, and keys with a provider prefix (azure/...), unless --provider NAME
is given, which also takes the keys under NAME/ with the prefix removed
(over a bare key of the same model). A price set with pricing set is kept
unless --replace. It prints how many entries it took and skipped.`,
		Example: `  curl -fsSLO https://raw.githubusercontent.com/BerriAI/litellm/main/model_prices_and_context_window.json
  rotor pricing import model_prices_and_context_window.json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Path = args[0]
			if opts.Provider != "" && (strings.Contains(opts.Provider, "/") || checkModel(opts.Provider) != nil) {
				return usageErrorf("--provider %q: want a provider name such as azure", opts.Provider)
			}
			if runF != nil {
				return runF(opts)
			}
			return pricingImportRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Provider, "provider", "", "also import the keys under NAME/, without the prefix")
	cmd.Flags().BoolVar(&opts.Replace, "replace", false, "overwrite prices set with pricing set too")
	return cmd
}

// maxPriceFile bounds the price file read (LiteLLM's is about 1 MiB).
const maxPriceFile = 64 << 20

func pricingImportRun(ctx context.Context, opts *pricingImportOptions) error {
	f, err := os.Open(opts.Path)
	if err != nil {
		return usageErrorf("%s: %v", opts.Path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPriceFile+1))
	if err != nil {
		return usageErrorf("%s: %v", opts.Path, err)
	}
	if len(data) > maxPriceFile {
		return usageErrorf("%s: larger than %d MiB, not a LiteLLM price file", opts.Path, maxPriceFile>>20)
	}
	read, skipped, err := pricefile.ParseLiteLLM(data, opts.Provider)
	if err != nil {
		return usageErrorf("%s: %v", opts.Path, err)
	}
	source := filepath.Base(opts.Path)
	prices := make([]ledger.Price, len(read))
	for i, p := range read {
		prices[i] = ledger.Price{Model: p.Model, InputMicros: p.InputMicros, OutputMicros: p.OutputMicros, Source: source}
		if p.CachedKnown {
			prices[i].CachedInputMicros = ledger.Known(p.CachedInputMicros)
		}
	}
	store, err := opts.Ledger(ctx)
	if err != nil {
		return err
	}
	wrote, err := store.PutPrices(ctx, prices, opts.Replace)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "imported %d prices from %s; skipped %d entries", wrote, visible(source), skipped)
	if kept := len(prices) - wrote; kept > 0 {
		fmt.Fprintf(opts.IO.Out, " and kept %d prices set by hand (--replace overwrites them)", kept)
	}
	fmt.Fprintln(opts.IO.Out)
	return nil
}

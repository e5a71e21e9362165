package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/dur"
	"github.com/rotorhq/rotor/ledger"
)

func newCmdLedger(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "ledger",
		Short: "Report on the usage ledger and settle rows of unknown usage",
	}
	cmd.AddCommand(newCmdLedgerReport(f, nil), newCmdLedgerSettle(f, nil), newCmdLedgerMigrate(f, nil), newCmdLedgerCopy(f, nil))
	return cmd
}

type reportOptions struct {
	IO     *IOStreams
	Clock  clock.Clock
	Ledger func(context.Context) (ledger.Ledger, error)
	Query  ledger.ReportQuery
	Format string
	since  string
	from   string
	to     string
	by     string
}

func newCmdLedgerReport(f *Factory, runF func(*reportOptions) error) *cobra.Command {
	opts := &reportOptions{IO: f.IO, Clock: f.Clock, Ledger: f.Ledger}
	cmd := &cobra.Command{
		Use:   "report [--since DUR | --from T [--to T]] [--by KEYS]",
		Short: "Summarize usage by operation, model, day, credential, client or status",
		Long: `Summarize ledger usage over a time range, grouped by one or more keys.

Columns are the group keys, then requests, input_tokens, output_tokens,
total_tokens, cost_usd, errors, cached_input_tokens, reasoning_tokens,
known_cost_usd, unknown_cost_rows and unknown_token_rows. An unknown value
prints as "unknown", and as null in json; it is never 0. cost_usd is unknown
for a group holding any row of unknown cost (every Decisions row, a model
without a price, a cut stream with no usage seen); known_cost_usd is then
the sum of its known rows and unknown_cost_rows counts the others. Token
sums are unknown for a group holding a row with no readable count
(reservations not settled, answers without usage, usage outside 0..10^12),
counted in unknown_token_rows. errors counts rows with status >= 400 or an
error code (a cut stream is an error). Status "unsettled" counts
reservations that were never settled: requests in flight, or left by a rotor
that died, counted as usage of unknown size.

Rows whose stored usage could not be read (written by an older rotor) are
set aside: they count as requests of unknown usage, and the report says on
stderr how many there are.

The range defaults to --since 24h. --from and --to take RFC 3339 times, UTC
dates (2026-11-30), or the words today and yesterday (UTC); the range is
half-open, [from, to), and --to defaults to now. Days are UTC days.`,
		Example: `  rotor ledger report --by model,day
  rotor ledger report --from yesterday --to today --by credential --format csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.parse(cmd); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return reportRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.since, "since", "24h", "report the last DUR (30m, 24h, 7d)")
	fl.StringVar(&opts.from, "from", "", "start of the range (RFC 3339, UTC date, today, yesterday)")
	fl.StringVar(&opts.to, "to", "", "end of the range, exclusive (default now)")
	fl.StringVar(&opts.by, "by", "operation", "comma-separated group keys: "+strings.Join(ledger.ReportKeys, ","))
	addFormatFlag(cmd, &opts.Format)
	return cmd
}

// parseTime reads an RFC 3339 time, a UTC date or today/yesterday.
func parseTime(s string, now time.Time) (time.Time, error) {
	today := time.Date(now.UTC().Year(), now.UTC().Month(), now.UTC().Day(), 0, 0, 0, 0, time.UTC)
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "today":
		return today, nil
	case "yesterday":
		return today.AddDate(0, 0, -1), nil
	case "now":
		return now, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time, a date (2006-01-02), today or yesterday", s)
}

func (o *reportOptions) parse(cmd *cobra.Command) error {
	if err := checkFormat(o.Format); err != nil {
		return err
	}
	now := o.Clock.Now()
	fl := cmd.Flags()
	if fl.Changed("since") && (fl.Changed("from") || fl.Changed("to")) {
		return usageErrorf("give either --since or --from/--to, not both")
	}
	if fl.Changed("to") && !fl.Changed("from") {
		return usageErrorf("--to needs --from")
	}
	if fl.Changed("from") {
		from, err := parseTime(o.from, now)
		if err != nil {
			return usageErrorf("--from: %v", err)
		}
		to := now
		if fl.Changed("to") {
			if to, err = parseTime(o.to, now); err != nil {
				return usageErrorf("--to: %v", err)
			}
		}
		if !from.Before(to) {
			return usageErrorf("--from must be before --to")
		}
		o.Query.From, o.Query.To = from, to
	} else {
		d, err := dur.Parse(o.since)
		if err != nil || d <= 0 {
			return usageErrorf("--since %q: want a duration such as 30m, 24h or 7d", o.since)
		}
		// Include rows written at this very millisecond.
		o.Query.From, o.Query.To = now.Add(-d), now.Add(time.Millisecond)
	}
	o.Query.By = nil
	seen := map[string]bool{}
	for _, k := range strings.Split(o.by, ",") {
		k = strings.TrimSpace(strings.ToLower(k))
		if k == "" {
			continue
		}
		valid := false
		for _, v := range ledger.ReportKeys {
			valid = valid || v == k
		}
		if !valid {
			return usageErrorf("--by %q: want keys among %s", k, strings.Join(ledger.ReportKeys, ","))
		}
		if !seen[k] {
			o.Query.By = append(o.Query.By, k)
			seen[k] = true
		}
	}
	if len(o.Query.By) == 0 {
		return usageErrorf("--by needs at least one key among %s", strings.Join(ledger.ReportKeys, ","))
	}
	return nil
}

func reportRun(ctx context.Context, opts *reportOptions) error {
	store, err := opts.Ledger(ctx)
	if err != nil {
		return err
	}
	rows, err := store.Report(ctx, opts.Query)
	if err != nil {
		return err
	}
	aside, err := store.SetAside(ctx)
	if err != nil {
		return err
	}
	if err := reportRecords(opts.Query.By, rows).write(opts.IO.Out, opts.Format); err != nil {
		return err
	}
	if aside > 0 {
		// On stderr, so that json and csv stay whole for scripts.
		fmt.Fprintf(opts.IO.ErrOut, "note: %d usage rows in the ledger were set aside because their usage was unreadable; each counts as one request of unknown tokens and cost\n", aside)
	}
	return nil
}

func reportRecords(by []string, rows []ledger.ReportRow) records {
	recs := records{Columns: append(append([]string{}, by...), "requests", "input_tokens", "output_tokens", "total_tokens", "cost_usd", "errors",
		"cached_input_tokens", "reasoning_tokens", "known_cost_usd", "unknown_cost_rows", "unknown_token_rows")}
	for _, r := range rows {
		var line []cell
		for _, k := range r.Keys {
			line = append(line, textCell(k))
		}
		cost := unknownCell
		if r.CostKnown {
			cost = usdCell(r.CostMicros)
		}
		// A group holding a row of unknown tokens shows every token sum
		// as unknown, its count beside them; cached and reasoning tokens
		// otherwise sum the rows that report them.
		tokensKnown := r.TokensUnknown == 0
		line = append(line, intCell(r.Requests), countCell(r.InputTokens, tokensKnown && r.InputUnknown == 0), countCell(r.OutputTokens, tokensKnown && r.OutputUnknown == 0),
			countCell(r.TotalTokens, tokensKnown), cost, intCell(r.Errors),
			countCell(r.CachedInputTokens, tokensKnown && r.InputUnknown == 0), countCell(r.ReasoningTokens, tokensKnown && r.OutputUnknown == 0),
			usdCell(r.CostMicros), intCell(r.CostUnknown), intCell(max(r.TokensUnknown, r.InputUnknown, r.OutputUnknown)))
		recs.Rows = append(recs.Rows, line)
	}
	return recs
}

// usdCell prints micro-USD as dollars, a number in json.
func usdCell(micros int64) cell {
	return cell{JSON: jsonNumber(budgets.FormatCost(micros)), Text: budgets.FormatCost(micros)}
}

type settleOptions struct {
	IO         *IOStreams
	Ledger     func(context.Context) (ledger.Ledger, error)
	Resolution ledger.Resolution
}

func newCmdLedgerSettle(f *Factory, runF func(*settleOptions) error) *cobra.Command {
	opts := &settleOptions{IO: f.IO, Ledger: f.Ledger}
	var input, output, cached int64
	cmd := &cobra.Command{
		Use:   "settle REQUEST_ID --input N --output N [--cached N]",
		Short: "Resolve a row of unknown usage with the provider's token counts",
		Long: `Record the tokens of a request whose usage the ledger does not know (a
reservation left by a crash, a stream cut before its usage, a network
failure), as the provider's own usage records give them. Its cost is
computed from the price in force now (Decisions rows keep unknown cost), so
that one broken request need not keep a cost budget failing closed for its
whole window. --cached is the part of --input read from the provider's
cache. A row whose usage is already known is refused.`,
		Example: `  rotor ledger settle 01JDX4Q3N4J5YB0T8Q5E0S1C2M --input 1200 --output 340`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			fl := cmd.Flags()
			for _, name := range []string{"input", "output"} {
				if !fl.Changed(name) {
					return usageErrorf("--%s is required (tokens)", name)
				}
			}
			r := ledger.Resolution{RequestID: args[0], Input: ledger.Known(input), Output: ledger.Known(output)}
			if fl.Changed("cached") {
				r.CachedInput = ledger.Known(cached)
			}
			for _, c := range []struct {
				name string
				v    ledger.Count
			}{{"input", r.Input}, {"output", r.Output}, {"cached", r.CachedInput}} {
				if c.v.Known && (c.v.V < 0 || c.v.V > ledger.MaxUsage) {
					return usageErrorf("--%s %d: want tokens in 0..%d", c.name, c.v.V, int64(ledger.MaxUsage))
				}
			}
			if r.CachedInput.V > r.Input.V {
				return usageErrorf("--cached %d is more than --input %d: cached tokens are part of the input", r.CachedInput.V, r.Input.V)
			}
			opts.Resolution = r
			if runF != nil {
				return runF(opts)
			}
			return settleRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.Int64Var(&input, "input", 0, "input tokens, cached included")
	fl.Int64Var(&output, "output", 0, "output tokens")
	fl.Int64Var(&cached, "cached", 0, "cached input tokens (part of --input)")
	return cmd
}

func settleRun(ctx context.Context, opts *settleOptions) error {
	store, err := opts.Ledger(ctx)
	if err != nil {
		return err
	}
	r := opts.Resolution
	switch err := store.Resolve(ctx, r); {
	case errors.Is(err, ledger.ErrNotFound):
		return usageErrorf("REQUEST_ID %q: no such request in the ledger", r.RequestID)
	case errors.Is(err, ledger.ErrUsageKnown):
		return usageErrorf("REQUEST_ID %q: %v", r.RequestID, err)
	case err != nil:
		return err
	}
	fmt.Fprintf(opts.IO.Out, "settled %s: %d input tokens (%d cached), %d output tokens\n", r.RequestID, r.Input.V, r.CachedInput.V, r.Output.V)
	return nil
}

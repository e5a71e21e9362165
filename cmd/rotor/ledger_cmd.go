package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/dburl"
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
	// Chart draws tokens and known cost per day as bars (--by day).
	Chart bool
	// Width bounds the chart's lines (default: $COLUMNS, else 80).
	Width int
	rng   rangeFlags
	by    string
}

func newCmdLedgerReport(f *Factory, runF func(*reportOptions) error) *cobra.Command {
	opts := &reportOptions{IO: f.IO, Clock: f.Clock, Ledger: f.Ledger}
	if v, ok := f.LookupEnv("COLUMNS"); ok {
		opts.Width, _ = strconv.Atoi(v)
	}
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
half-open, [from, to), and --to defaults to now. Days are UTC days.

--by day --chart draws tokens and known cost per day as text bars instead of
the table, within $COLUMNS: a day holding rows of unknown value says so
beside its bar, and a day of unknown cost only prints "unknown", never a bar
of 0.`,
		Example: `  rotor ledger report --by model,day
  rotor ledger report --by day --since 30d --chart
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
	opts.rng.add(fl, "report the last DUR (30m, 24h, 7d)")
	fl.StringVar(&opts.by, "by", "operation", "comma-separated group keys: "+strings.Join(ledger.ReportKeys, ","))
	fl.BoolVar(&opts.Chart, "chart", false, "with --by day: draw tokens and known cost per day as bars instead of the table")
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
		// Rows are stored to the millisecond: a bound inside one is
		// moved up to the next, so that [from, to) holds exactly the
		// rows written at or after from and before to.
		if ms := t.Truncate(time.Millisecond); !ms.Equal(t) {
			t = ms.Add(time.Millisecond)
		}
		return t, nil
	}
	if t, err := time.Parse("2006-01-02", s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q is not an RFC 3339 time, a date (2006-01-02), today or yesterday", s)
}

// rangeFlags are the range flags of ledger report and ledger rows:
// --since DUR (default 24h), or --from T [--to T].
type rangeFlags struct {
	since, from, to string
}

// add defines the range flags on fl; sinceUsage says what --since
// selects.
func (r *rangeFlags) add(fl *pflag.FlagSet, sinceUsage string) {
	fl.StringVar(&r.since, "since", "24h", sinceUsage)
	fl.StringVar(&r.from, "from", "", "start of the range (RFC 3339, UTC date, today, yesterday)")
	fl.StringVar(&r.to, "to", "", "end of the range, exclusive (default now)")
}

// changed reports whether any range flag was given.
func (r *rangeFlags) changed(cmd *cobra.Command) bool {
	fl := cmd.Flags()
	return fl.Changed("since") || fl.Changed("from") || fl.Changed("to")
}

// parse reads --since or --from/--to into a half-open range.
func (r *rangeFlags) parse(cmd *cobra.Command, now time.Time) (time.Time, time.Time, error) {
	since, fromS, toS := r.since, r.from, r.to
	fl := cmd.Flags()
	if fl.Changed("since") && (fl.Changed("from") || fl.Changed("to")) {
		return time.Time{}, time.Time{}, usageErrorf("give either --since or --from/--to, not both")
	}
	if fl.Changed("to") && !fl.Changed("from") {
		return time.Time{}, time.Time{}, usageErrorf("--to needs --from")
	}
	if fl.Changed("from") {
		from, err := parseTime(fromS, now)
		if err != nil {
			return time.Time{}, time.Time{}, usageErrorf("--from: %v", err)
		}
		to := now
		if fl.Changed("to") {
			if to, err = parseTime(toS, now); err != nil {
				return time.Time{}, time.Time{}, usageErrorf("--to: %v", err)
			}
		}
		if !from.Before(to) {
			return time.Time{}, time.Time{}, usageErrorf("--from must be before --to")
		}
		return from, to, nil
	}
	d, err := dur.Parse(since)
	switch {
	case err != nil:
		return time.Time{}, time.Time{}, usageErrorf("--since %q: want a duration such as 30m, 24h or 7d", since)
	case d <= 0:
		return time.Time{}, time.Time{}, usageErrorf("--since %q: must be more than 0", since)
	}
	// Include rows written at this very millisecond.
	return now.Add(-d), now.Add(time.Millisecond), nil
}

func (o *reportOptions) parse(cmd *cobra.Command) error {
	if err := checkFormat(o.Format); err != nil {
		return err
	}
	var err error
	if o.Query.From, o.Query.To, err = o.rng.parse(cmd, o.Clock.Now()); err != nil {
		return err
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
	return o.checkChart()
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
	if opts.Chart {
		err = writeChart(opts.IO.Out, opts.Query, rows, opts.Width)
	} else {
		err = reportRecords(opts.Query.By, rows).write(opts.IO.Out, opts.Format)
	}
	if err != nil {
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
		// otherwise sum the rows that report them, and are unknown when
		// none does (embeddings, Decisions rows, a provider that sends no
		// details): 0 would say the provider reported none.
		tokensKnown := r.TokensUnknown == 0
		line = append(line, intCell(r.Requests), countCell(r.InputTokens, tokensKnown && r.InputUnknown == 0), countCell(r.OutputTokens, tokensKnown && r.OutputUnknown == 0),
			countCell(r.TotalTokens, tokensKnown), cost, intCell(r.Errors),
			countCell(r.CachedInputTokens, tokensKnown && r.InputUnknown == 0 && r.CachedUnknown < r.Requests),
			countCell(r.ReasoningTokens, tokensKnown && r.OutputUnknown == 0 && r.ReasoningUnknown < r.Requests),
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
cache. Each count, and --input + --output, must be at most 10^12. A row
whose usage is already known is refused.`,
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
			// The row's total is their sum, which must be readable too.
			if r.Input.V+r.Output.V > ledger.MaxUsage {
				return usageErrorf("--input %d + --output %d is %d tokens: --input + --output must be at most 10^12", r.Input.V, r.Output.V, r.Input.V+r.Output.V)
			}
			opts.Resolution = r
			if runF != nil {
				return runF(opts)
			}
			return settleRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	int64Var(fl, &input, "input", 0, "input tokens, cached included")
	int64Var(fl, &output, "output", 0, "output tokens")
	int64Var(fl, &cached, "cached", 0, "cached input tokens (part of --input)")
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
	case errors.Is(err, ledger.ErrInFlight):
		ife, _ := errors.AsType[*ledger.InFlightError](err)
		return usageErrorf("REQUEST_ID %q: the request may still be running until %s (its deadline plus ledger.reservation_grace); settle it after that, or its own settlement fails", r.RequestID, ife.Until.UTC().Format(time.RFC3339))
	case err != nil:
		return err
	}
	cached := ""
	if r.CachedInput.Known {
		cached = fmt.Sprintf(" (%d cached)", r.CachedInput.V)
	}
	fmt.Fprintf(opts.IO.Out, "settled %s: %d input tokens%s, %d output tokens\n", r.RequestID, r.Input.V, cached, r.Output.V)
	return nil
}

// addLedgerCare adds to root's ledger group the verbs that export, prune
// and back up the ledger (issue 18).
func addLedgerCare(root *cobra.Command, f *Factory) {
	for _, c := range root.Commands() {
		if c.Name() == "ledger" {
			c.AddCommand(newCmdLedgerRows(f, nil), newCmdLedgerPrune(f, nil), newCmdLedgerBackup(f, nil))
		}
	}
}

type rowsOptions struct {
	IO        *IOStreams
	Clock     clock.Clock
	Ledger    func(context.Context) (ledger.Ledger, error)
	From, To  time.Time
	RequestID string
	Format    string
	rng       rangeFlags
}

// rowsFormats are the formats of ledger rows: jsonl too.
var rowsFormats = []string{FormatTable, FormatJSON, FormatCSV, FormatJSONL}

func newCmdLedgerRows(f *Factory, runF func(*rowsOptions) error) *cobra.Command {
	opts := &rowsOptions{IO: f.IO, Clock: f.Clock, Ledger: f.Ledger}
	cmd := &cobra.Command{
		Use:   "rows [--since DUR | --from T [--to T]] [--request-id ID]",
		Short: "Export usage rows, one per request, for other tools",
		Long: `Print the ledger's usage rows, oldest first: one per request that sent at
least one provider call. Columns: request_id, time, settled, expires,
operation, pool, model, credential (a label, never a key), region, client,
attempts, status (0 while unsettled), error_code, input_tokens,
output_tokens, total_tokens, cached_input_tokens, reasoning_tokens,
cost_usd, latency_ms. Times are RFC 3339 in UTC, to the millisecond.

An unknown value (tokens of an unsettled row or of an answer without
usage, the cost of a Decisions row or of a model without a price) is null
in json and jsonl, an empty field in csv and "unknown" in the table: never
0. jsonl prints one object a line, for streaming tools.

The range defaults to --since 24h; --from and --to read as in ledger
report. --request-id prints that request's row, whenever it was written.
Rows deleted by rotor ledger prune are gone (reports still count them).`,
		Example: `  rotor ledger rows --since 7d --format csv > usage.csv
  rotor ledger rows --from 2026-11-01 --to 2026-12-01 --format jsonl
  rotor ledger rows --request-id 01JDX4Q3N4J5YB0T8Q5E0S1C2M --format json
  rotor ledger rows --jq '.[] | select(.status >= 400) | .request_id'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormatIn(opts.Format, rowsFormats); err != nil {
				return err
			}
			fl := cmd.Flags()
			if fl.Changed("request-id") {
				if strings.TrimSpace(opts.RequestID) == "" {
					return usageErrorf("--request-id: want a request id")
				}
				if opts.rng.changed(cmd) {
					return usageErrorf("--request-id finds its row whenever it was written: drop --since/--from/--to")
				}
			} else {
				var err error
				if opts.From, opts.To, err = opts.rng.parse(cmd, opts.Clock.Now()); err != nil {
					return err
				}
			}
			if runF != nil {
				return runF(opts)
			}
			return rowsRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	opts.rng.add(fl, "rows of the last DUR (30m, 24h, 7d)")
	fl.StringVar(&opts.RequestID, "request-id", "", "only the row of this request (its X-Request-ID)")
	addFormatFlagUsage(cmd, &opts.Format, "output format: table, json (an array of row objects), csv (with a header row) or jsonl (an object a line)", rowsFormats)
	return cmd
}

func rowsRun(ctx context.Context, opts *rowsOptions) error {
	store, err := opts.Ledger(ctx)
	if err != nil {
		return err
	}
	var rows []ledger.Row
	if opts.RequestID != "" {
		var row ledger.Row
		var ok bool
		if lk, isLookup := store.(ledger.RowLookup); isLookup {
			row, ok, err = lk.RowByID(ctx, opts.RequestID)
		} else {
			// An engine without the lookup: scan every row, a page at a
			// time.
			err = pageRows(ctx, store, time.UnixMilli(0), time.UnixMilli(1<<50), func(page []ledger.Row) error {
				for _, r := range page {
					if r.RequestID == opts.RequestID {
						row, ok = r, true
					}
				}
				return nil
			})
		}
		if err != nil {
			return err
		}
		if !ok {
			return usageErrorf("--request-id %q: no such request in the ledger (refused requests are not usage rows; pruned rows are gone)", opts.RequestID)
		}
		rows = []ledger.Row{row}
		return rowRecords(rows).write(opts.IO.Out, opts.Format)
	}
	if opts.Format == FormatCSV || opts.Format == FormatJSONL {
		// Streamed a page at a time: an export of a year holds a page in
		// memory, not the year.
		first := true
		return pageRows(ctx, store, opts.From, opts.To, func(page []ledger.Row) error {
			recs := rowRecords(page)
			if opts.Format == FormatCSV {
				err := recs.writeCSV(opts.IO.Out, first)
				first = false
				return err
			}
			return recs.write(opts.IO.Out, FormatJSONL)
		})
	}
	err = pageRows(ctx, store, opts.From, opts.To, func(page []ledger.Row) error {
		rows = append(rows, page...)
		return nil
	})
	if err != nil {
		return err
	}
	return rowRecords(rows).write(opts.IO.Out, opts.Format)
}

// rowsPage is how many rows ledger rows reads at a time.
var rowsPage = 5000

// pageRows calls fn with the rows of [from, to) in order, a page at a time
// (at least one page, maybe empty, so that csv prints its header). Pages
// follow the ledger's order (time, then request id); the rows of one
// millisecond that straddle a page are read whole.
func pageRows(ctx context.Context, store ledger.Ledger, from, to time.Time, fn func([]ledger.Row) error) error {
	sent := false
	for from.Before(to) {
		page, err := store.Rows(ctx, from, to, rowsPage)
		if err != nil {
			return err
		}
		if len(page) < rowsPage {
			if len(page) > 0 || !sent {
				return fn(page)
			}
			return nil
		}
		// The last millisecond of a full page may go on: read it whole,
		// then continue after it.
		last := page[len(page)-1].Time
		cut := len(page)
		for cut > 0 && page[cut-1].Time.Equal(last) {
			cut--
		}
		edge, err := store.Rows(ctx, last, last.Add(time.Millisecond), 0)
		if err != nil {
			return err
		}
		if err := fn(append(page[:cut], edge...)); err != nil {
			return err
		}
		sent = true
		from = last.Add(time.Millisecond)
	}
	if !sent {
		return fn(nil)
	}
	return nil
}

// rowColumns are ledger rows' columns, in order.
var rowColumns = []string{"request_id", "time", "settled", "expires", "operation", "pool", "model", "credential", "region", "client",
	"attempts", "status", "error_code", "input_tokens", "output_tokens", "total_tokens", "cached_input_tokens", "reasoning_tokens", "cost_usd", "latency_ms"}

// rowTime prints a row's time: RFC 3339, UTC, milliseconds.
const rowTime = "2006-01-02T15:04:05.000Z07:00"

func rowRecords(rows []ledger.Row) records {
	recs := records{Columns: rowColumns}
	unknown := cell{JSON: nil, Text: "unknown", EmptyCSV: true}
	count := func(c ledger.Count) cell {
		if !c.Known {
			return unknown
		}
		return intCell(c.V)
	}
	for _, r := range rows {
		cost := unknown
		if r.CostMicros.Known {
			cost = usdCell(r.CostMicros.V)
		}
		recs.Rows = append(recs.Rows, []cell{textCell(r.RequestID), textCell(r.Time.UTC().Format(rowTime)),
			{JSON: r.Settled, Text: fmt.Sprint(r.Settled)}, textCell(r.Expires.UTC().Format(rowTime)),
			textCell(r.Operation), textCell(r.Pool), textCell(r.Model), textCell(r.Credential), textCell(r.Region), textCell(r.Client),
			intCell(int64(r.Attempts)), intCell(int64(r.Status)), textCell(r.ErrorCode),
			count(r.InputTokens), count(r.OutputTokens), count(r.TotalTokens), count(r.CachedInputTokens), count(r.ReasoningTokens),
			cost, intCell(r.Latency.Milliseconds())})
	}
	return recs
}

type pruneOptions struct {
	IO     *IOStreams
	Clock  clock.Clock
	Ledger func(context.Context) (ledger.Ledger, error)
	Before time.Time
}

func newCmdLedgerPrune(f *Factory, runF func(*pruneOptions) error) *cobra.Command {
	opts := &pruneOptions{IO: f.IO, Clock: f.Clock, Ledger: f.Ledger}
	var before string
	cmd := &cobra.Command{
		Use:   "prune --before DATE",
		Short: "Delete old usage rows, keeping the rollups that reports and budgets read",
		Long: `Delete the usage rows written before DATE (an RFC 3339 time, a UTC date, today
or yesterday), keeping the ledger's per-minute and per-hour rollups. Reports
over pruned days still answer, from the rollups (a range that starts inside
pruned time counts its whole first hour), and so does every budget window,
also of a budget added later: pruned usage still counts. What is gone is
the rows themselves: ledger rows, and ledger settle of a pruned request.

The rollups count whole hours, so prune cuts on one: a DATE inside an hour
(2026-01-01T10:17:30Z) is moved back to the start of its hour (UTC,
10:00:00), and the rows of that hour stay; every read from there on answers
exactly as before the prune. The command says where it cut.

Unsettled rows (requests in flight, or left by a rotor that died) are kept,
so that ledger settle can still resolve them; on SQLite, rows not yet
counted in the rollups (the last seconds of traffic) are kept too, and the
command says where it cut. It refuses, exit 2, to cut inside the window of
an existing budget, naming it: remove the budget, or prune up to its
window's start.

It works alike on a SQLite and a PostgreSQL ledger, and runs while bridges
serve: it deletes in short transactions.`,
		Example: `  rotor ledger prune --before 2026-01-01`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !cmd.Flags().Changed("before") {
				return usageErrorf("--before is required (a date such as 2026-01-01)")
			}
			now := opts.Clock.Now()
			t, err := parseTime(before, now)
			if err != nil {
				return usageErrorf("--before: %v", err)
			}
			if t.After(now) {
				return usageErrorf("--before %s is in the future", before)
			}
			opts.Before = t.UTC()
			if runF != nil {
				return runF(opts)
			}
			return pruneRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&before, "before", "", "delete the rows before this time (RFC 3339, UTC date, today, yesterday)")
	return cmd
}

// pruneCheck refuses a cut inside the window of a budget: those rows are
// what the budget counts now.
func pruneCheck(before time.Time) func(time.Time, []ledger.BudgetRecord) error {
	return func(now time.Time, rs []ledger.BudgetRecord) error {
		var inside []string
		var earliest time.Time
		for _, r := range rs {
			b, err := budgets.FromRecord(r)
			if err != nil {
				return usageErrorf("budget %q cannot be read (%v): prune refuses while its window is unknown", r.Name, err)
			}
			start := b.Window.Start(now)
			if before.After(start) {
				inside = append(inside, fmt.Sprintf("%s (%s, from %s)", b.Name, b.Window.Describe(), start.Format(time.RFC3339)))
				if earliest.IsZero() || start.Before(earliest) {
					earliest = start
				}
			}
		}
		if len(inside) > 0 {
			return usageErrorf("--before %s cuts inside the window of budget %s: prune at or before %s, or remove the budget",
				before.Format(time.RFC3339), strings.Join(inside, ", budget "), earliest.Format(time.RFC3339))
		}
		return nil
	}
}

func pruneRun(ctx context.Context, opts *pruneOptions) error {
	store, err := opts.Ledger(ctx)
	if err != nil {
		return err
	}
	p, ok := store.(ledger.Pruner)
	if !ok {
		return usageErrorf("ledger %s: this engine does not prune", store.Location())
	}
	res, err := p.Prune(ctx, ledger.PruneRequest{Before: opts.Before, Check: pruneCheck(opts.Before)})
	if err != nil {
		return err
	}
	out := opts.IO.Out
	fmt.Fprintf(out, "pruned %d usage rows before %s from %s\n", res.Deleted, res.Until.Format(time.RFC3339), store.Location())
	fmt.Fprintln(out, "kept the rollups: ledger report and budget windows over that time still answer (reports by whole hour there); the rows themselves are gone")
	switch hour := opts.Before.Truncate(time.Hour); {
	case res.Until.Before(hour):
		fmt.Fprintf(out, "kept the rows from %s on: they are not counted in the rollups yet (run prune again later)\n", res.Until.Format(time.RFC3339))
	case res.Until.Before(opts.Before):
		fmt.Fprintf(out, "kept the rows from %s on: the rollups count whole hours, so prune cuts at the start of the hour of --before\n", res.Until.Format(time.RFC3339))
	}
	if res.KeptUnsettled > 0 {
		fmt.Fprintf(out, "kept %d unsettled rows before %s: resolve them with rotor ledger settle\n", res.KeptUnsettled, res.Until.Format(time.RFC3339))
	}
	return nil
}

type backupOptions struct {
	IO     *IOStreams
	DBPath func() (string, error)
	Ledger func(context.Context) (ledger.Ledger, error)
	File   string
}

func newCmdLedgerBackup(f *Factory, runF func(*backupOptions) error) *cobra.Command {
	opts := &backupOptions{IO: f.IO, DBPath: f.DBPath, Ledger: f.Ledger}
	cmd := &cobra.Command{
		Use:   "backup FILE",
		Short: "Write a consistent copy of the ledger to a new file, while a bridge runs",
		Long: `Copy the SQLite ledger into FILE, a new file (mode 0600: it holds client token
hashes), with SQLite's VACUUM INTO: the copy is one consistent snapshot
holding every request acknowledged before it started, taken while bridges
keep writing. FILE must not exist (exit 2). The copy is a ledger of its own:
rotor --db FILE ledger report reads it.

A PostgreSQL ledger is backed up with PostgreSQL's own tools (pg_dump).`,
		Example: `  rotor ledger backup ~/backups/rotor-$(date +%F).db`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// FILE is a ledger's location too: a URL or a keyword/value
			// string is refused, masked, before it becomes a file name.
			file, err := dburl.Check(args[0])
			switch {
			case errors.Is(err, dburl.ErrKeywordValue):
				return usageErrorf("FILE: %q is a PostgreSQL connection string: backup writes a new SQLite file (a PostgreSQL ledger is backed up with pg_dump)", dburl.Mask(args[0]))
			case err != nil:
				return &UsageError{Err: fmt.Errorf("FILE: %w", err)}
			case dburl.IsPostgres(file):
				return usageErrorf("FILE: %q is a PostgreSQL URL: backup writes a new SQLite file (a PostgreSQL ledger is backed up with pg_dump)", dburl.Mask(file))
			}
			opts.File = file
			if runF != nil {
				return runF(opts)
			}
			return backupRun(cmd.Context(), opts)
		},
	}
	return cmd
}

func backupRun(ctx context.Context, opts *backupOptions) error {
	pgDump := func(loc string) error {
		return usageErrorf("ledger %s is on PostgreSQL: back it up with pg_dump (rotor ledger backup copies SQLite ledgers)", dburl.Mask(loc))
	}
	if path, err := opts.DBPath(); err == nil && dburl.IsPostgres(path) {
		return pgDump(path)
	}
	if _, err := os.Lstat(opts.File); err == nil {
		return usageErrorf("FILE %s exists: backup writes a new file only", opts.File)
	}
	store, err := opts.Ledger(ctx)
	if err != nil {
		return err
	}
	b, ok := store.(ledger.Backuper)
	if !ok {
		if dburl.IsPostgres(store.Location()) {
			return pgDump(store.Location())
		}
		return usageErrorf("ledger %s: this engine has no backup in rotor", store.Location())
	}
	if err := b.Backup(ctx, opts.File); err != nil {
		if errors.Is(err, ledger.ErrFileExists) {
			return usageErrorf("FILE %s exists: backup writes a new file only", opts.File)
		}
		return err
	}
	size := int64(0)
	if fi, err := os.Stat(opts.File); err == nil {
		size = fi.Size()
	}
	fmt.Fprintf(opts.IO.Out, "backed up %s to %s (%d bytes)\n", store.Location(), opts.File, size)
	return nil
}

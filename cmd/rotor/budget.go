package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/ledger"
)

func newCmdBudget(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "budget",
		Short: "Add, list and remove budgets",
		Long: `Budgets limit requests, tokens or cost over a window. A window is rolling (a
duration: 30m, 24h, 7d, 7d12h) or a calendar period in UTC (hour, day, week
starting Monday, month). Every window counts all ledger rows, whatever the
budget's name. Budgets bind a running bridge at its next request.`,
	}
	cmd.AddCommand(newCmdBudgetAdd(f, nil), newCmdBudgetList(f, nil), newCmdBudgetRemove(f, nil))
	return cmd
}

type budgetAddOptions struct {
	IO    *IOStreams
	Clock clock.Clock
	// Ledger opens the ledger, creating it if it is missing: add writes.
	Ledger   func(context.Context) (ledger.Ledger, error)
	Budget   budgets.Budget
	Replace  bool
	requests int64
	tokens   int64
	cost     string
	window   string
	name     string
}

func newCmdBudgetAdd(f *Factory, runF func(*budgetAddOptions) error) *cobra.Command {
	opts := &budgetAddOptions{IO: f.IO, Clock: f.Clock, Ledger: f.LedgerOrCreate}
	cmd := &cobra.Command{
		Use:   "add (--requests N | --tokens N | --cost USD) --window WINDOW [--name NAME] [--replace]",
		Short: "Add a budget with exactly one limit",
		Long: `Add a budget with exactly one limit over a window.

  --requests N   counts requests that reached the provider (not retries)
  --tokens N     counts the provider's recorded total tokens; rows of unknown
                 tokens are skipped, and requests already in flight when the
                 limit is reached may overshoot it by their own usage
  --cost USD     up to 6 decimals. Decisions cost is unknown, so while any
                 cost budget exists Decisions requests are refused (403
                 policy_blocked), and a cost budget whose window holds usage
                 of unknown cost fails closed until that usage leaves it

The name defaults to KIND-WINDOW, the window in its normal form
(--window 24h: requests-1d). --replace replaces a budget
of the same name atomically, so cron jobs can run the same command daily.`,
		Example: `  rotor budget add --tokens 2000000 --window day --name daily-tokens --replace
  rotor budget add --requests 500 --window 1h`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.parse(cmd); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return budgetAddRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	int64Var(fl, &opts.requests, "requests", 0, "limit the number of requests")
	int64Var(fl, &opts.tokens, "tokens", 0, "limit the total tokens")
	fl.StringVar(&opts.cost, "cost", "", "limit the cost in USD (up to 6 decimals)")
	fl.StringVar(&opts.window, "window", "", "window: a duration (30m, 24h, 7d) or hour, day, week, month (UTC)")
	fl.StringVar(&opts.name, "name", "", "budget name (default KIND-WINDOW)")
	fl.BoolVar(&opts.Replace, "replace", false, "replace a budget of the same name")
	return cmd
}

// parse validates every flag before anything is opened.
func (o *budgetAddOptions) parse(cmd *cobra.Command) error {
	set := 0
	for _, n := range []string{"requests", "tokens", "cost"} {
		if cmd.Flags().Changed(n) {
			set++
		}
	}
	if set != 1 {
		return usageErrorf("give exactly one of --requests, --tokens or --cost")
	}
	if !cmd.Flags().Changed("window") {
		return usageErrorf("--window is required: a duration (30m, 24h, 7d) or hour, day, week, month")
	}
	w, err := budgets.ParseWindow(o.window)
	if err != nil {
		return usageErrorf("--window: %v", err)
	}
	b := budgets.Budget{Window: w}
	switch {
	case cmd.Flags().Changed("requests"):
		b.Kind, b.Limit = budgets.KindRequests, o.requests
		if o.requests <= 0 {
			return usageErrorf("--requests must be more than 0, not %d", o.requests)
		}
	case cmd.Flags().Changed("tokens"):
		b.Kind, b.Limit = budgets.KindTokens, o.tokens
		if o.tokens <= 0 {
			return usageErrorf("--tokens must be more than 0, not %d", o.tokens)
		}
	default:
		micros, err := budgets.ParseCost(o.cost)
		if err != nil {
			return usageErrorf("--cost: %v", err)
		}
		b.Kind, b.Limit = budgets.KindCost, micros
	}
	b.Name = o.name
	if b.Name == "" {
		b.Name = budgets.DefaultName(b.Kind, w)
	}
	if err := budgets.ValidateName(b.Name); err != nil {
		return usageErrorf("--name: %v", err)
	}
	o.Budget = b
	return nil
}

func budgetAddRun(ctx context.Context, opts *budgetAddOptions) error {
	store, err := opts.Ledger(ctx)
	if err != nil {
		return err
	}
	b := opts.Budget
	b.CreatedAt = opts.Clock.Now()
	if err := store.PutBudget(ctx, b.Record(), opts.Replace); err != nil {
		if errors.Is(err, ledger.ErrExists) {
			return usageErrorf("budget %q already exists; add --replace to replace it", b.Name)
		}
		return err
	}
	verb := "added"
	if opts.Replace {
		verb = "set"
	}
	fmt.Fprintf(opts.IO.Out, "%s budget %s: at most %s%s per %s window\n", verb, b.Name, b.FormatLimit(), unitWord(b.Kind), b.Window.Describe())
	if b.Kind == budgets.KindCost {
		fmt.Fprintln(opts.IO.ErrOut, "warning: while a cost budget exists, Decisions requests are refused with 403 policy_blocked: their cost is unknown. Budget on --requests or --tokens to allow Decisions.")
	}
	return nil
}

// unitWord is the unit printed after a budget's limit: none for cost,
// whose limit prints as dollars ("$5").
func unitWord(k budgets.Kind) string {
	if k == budgets.KindCost {
		return ""
	}
	return " " + string(k)
}

func newCmdBudgetList(f *Factory, runF func(*listOptions) error) *cobra.Command {
	return newCmdList(f, "List budgets with their use, state and when they free",
		`List every budget: its limit, what is used and remaining in its current
window, how many rows in the window have unknown tokens or cost, its state
(ok, exhausted, or fail-closed for a cost budget whose window holds usage of
unknown cost) and, when not ok, when it frees (UTC).

In json and csv, limit, used and remaining are integers in the budget's
unit column: requests, tokens or micro_usd (the table prints cost in USD).
While a cost budget fails closed, its used and remaining are unknown (null in
json): the window holds usage of unknown cost.`, budgetListRun, runF)
}

func budgetListRun(ctx context.Context, opts *listOptions) error {
	store, err := opts.Ledger(ctx)
	if err != nil {
		return err
	}
	statuses, bad, err := budgets.List(ctx, store)
	if err != nil {
		return err
	}
	if bad != nil {
		fmt.Fprintf(opts.IO.ErrOut, "warning: %v\n", bad)
	}
	return budgetRecords(statuses).write(opts.IO.Out, opts.Format)
}

func budgetRecords(statuses []budgets.Status) records {
	recs := records{Columns: []string{"name", "kind", "window", "limit", "used", "remaining", "unknown_rows", "state", "frees_at", "unit"}}
	for _, st := range statuses {
		unit := string(st.Kind)
		if st.Kind == budgets.KindCost {
			unit = "micro_usd"
		}
		frees := cell{JSON: nil, Text: ""}
		if !st.FreesAt.IsZero() {
			frees = textCell(budgets.FormatUntil(st.FreesAt))
		}
		// csv prints the integers json does; the table prints cost in USD.
		amount := func(v int64, text string) cell { return cell{JSON: v, Text: text, CSV: strconv.FormatInt(v, 10)} }
		used, remaining := amount(st.Used, st.FormatUsed()), amount(st.Remaining(), st.FormatRemaining())
		if st.State == budgets.StateFailClosed {
			// The window holds usage of unknown cost.
			used, remaining = unknownCell, unknownCell
		}
		recs.Rows = append(recs.Rows, []cell{
			textCell(st.Name), textCell(string(st.Kind)), textCell(st.Window.String()),
			amount(st.Limit, st.FormatLimit()), used, remaining,
			intCell(st.UnknownRows), textCell(string(st.State)), frees, textCell(unit),
		})
	}
	return recs
}

package main

import (
	"context"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/ledger"
)

// Dynamic shell completion (cobra's `rotor completion bash|zsh|fish|powershell`
// scripts call the hidden __complete command): names stored in the ledger
// for the verbs that take one, and the values of --by and --window. --format
// completes where it is added (addFormatFlagUsage).

// windowValues are what --window suggests: the calendar windows and common
// rolling ones.
var windowValues = []string{budgets.CalendarHour, budgets.CalendarDay, budgets.CalendarWeek, budgets.CalendarMonth, "30m", "24h", "7d", "30d"}

// addCompletions attaches the dynamic completions to root's commands by
// their path.
func addCompletions(root *cobra.Command, f *Factory) {
	names := map[string]func(context.Context, ledger.Ledger) ([]string, error){
		"rotor budget remove":       budgetNames,
		"rotor bridge token revoke": tokenLabels,
		"rotor pricing remove":      priceModels,
	}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if list, ok := names[c.CommandPath()]; ok {
			c.ValidArgsFunction = ledgerNames(f, list)
		}
		switch c.CommandPath() {
		case "rotor ledger report":
			_ = c.RegisterFlagCompletionFunc("by", completeByKeys)
		case "rotor budget add":
			_ = c.RegisterFlagCompletionFunc("window", cobra.FixedCompletions(windowValues, cobra.ShellCompDirectiveNoFileComp))
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// ledgerNames completes a verb's one argument from the ledger: nothing
// when the ledger is missing or unreadable (completion never creates one).
func ledgerNames(f *Factory, list func(context.Context, ledger.Ledger) ([]string, error)) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		store, err := f.Ledger(ctx)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		all, err := list(ctx, store)
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []cobra.Completion
		for _, n := range all {
			if strings.HasPrefix(n, toComplete) {
				out = append(out, n)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func budgetNames(ctx context.Context, s ledger.Ledger) ([]string, error) {
	bs, err := s.Budgets(ctx)
	var out []string
	for _, b := range bs {
		out = append(out, b.Name)
	}
	return out, err
}

func tokenLabels(ctx context.Context, s ledger.Ledger) ([]string, error) {
	ts, err := s.ClientTokens(ctx)
	var out []string
	for _, t := range ts {
		out = append(out, t.Label)
	}
	return out, err
}

func priceModels(ctx context.Context, s ledger.Ledger) ([]string, error) {
	ps, err := s.Prices(ctx)
	var out []string
	for m := range ps {
		out = append(out, m)
	}
	return out, err
}

// completeByKeys completes the last key of a comma-separated --by list,
// leaving out keys already given.
func completeByKeys(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	done, last := "", toComplete
	if i := strings.LastIndex(toComplete, ","); i >= 0 {
		done, last = toComplete[:i+1], toComplete[i+1:]
	}
	given := map[string]bool{}
	for _, k := range strings.Split(done, ",") {
		given[k] = true
	}
	var out []cobra.Completion
	for _, k := range ledger.ReportKeys {
		if !given[k] && strings.HasPrefix(k, last) {
			out = append(out, done+k)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
}

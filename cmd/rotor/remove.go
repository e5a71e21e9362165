package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/rotorhq/rotor/ledger"
)

// removeOptions serves the verbs that delete one named record from the
// ledger: budget remove, bridge token revoke, pricing remove.
type removeOptions struct {
	IO     *IOStreams
	Ledger func(context.Context) (ledger.Ledger, error)
	// Name is the record's name: the verb's one argument.
	Name string
	// Remove deletes it; ledger.ErrNotFound when there is none.
	Remove func(s ledger.Ledger, ctx context.Context, name string) error
	// NotFound says there is none (a format taking the quoted name), Done
	// that it is gone (a format taking the name).
	NotFound, Done string
}

// newCmdRemove builds such a verb; base holds everything but IO, Ledger
// and Name.
func newCmdRemove(f *Factory, use, short string, base removeOptions, runF func(*removeOptions) error) *cobra.Command {
	opts := &base
	opts.IO, opts.Ledger = f.IO, f.Ledger
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Name = args[0]
			if runF != nil {
				return runF(opts)
			}
			return removeRun(cmd.Context(), opts)
		},
	}
}

func removeRun(ctx context.Context, opts *removeOptions) error {
	store, err := opts.Ledger(ctx)
	if err != nil {
		return err
	}
	if err := opts.Remove(store, ctx, opts.Name); err != nil {
		if errors.Is(err, ledger.ErrNotFound) {
			return usageErrorf(opts.NotFound, opts.Name)
		}
		return err
	}
	fmt.Fprintf(opts.IO.Out, opts.Done+"\n", opts.Name)
	return nil
}

func newCmdBudgetRemove(f *Factory, runF func(*removeOptions) error) *cobra.Command {
	return newCmdRemove(f, "remove NAME", "Remove a budget", removeOptions{Remove: ledger.Ledger.RemoveBudget,
		NotFound: "no budget named %q (see rotor budget list)", Done: "removed budget %s"}, runF)
}

func newCmdTokenRevoke(f *Factory, runF func(*removeOptions) error) *cobra.Command {
	return newCmdRemove(f, "revoke NAME", "Revoke a client token", removeOptions{Remove: ledger.Ledger.RevokeClientToken,
		NotFound: "no token labelled %q (see rotor bridge token list)", Done: "revoked token %s"}, runF)
}

func newCmdPricingRemove(f *Factory, runF func(*removeOptions) error) *cobra.Command {
	return newCmdRemove(f, "remove MODEL", "Remove a model's price", removeOptions{Remove: ledger.Ledger.RemovePrice,
		NotFound: "no price for model %q (see rotor pricing list)", Done: "removed the price of %s"}, runF)
}

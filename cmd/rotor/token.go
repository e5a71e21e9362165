package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/rotorhq/rotor/gateway"
	"github.com/rotorhq/rotor/internal/names"
	"github.com/rotorhq/rotor/internal/tokenfile"
	"github.com/rotorhq/rotor/ledger"
)

func newCmdBridgeToken(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Create, list and revoke bridge client tokens",
		Long: `Client tokens authenticate callers of the bridge. They are stored only as
SHA-256 hashes in the ledger; each usage row records the label of the token
that sent it (rotor ledger report --by client). A revoked token stops working
on a running bridge at its next request.`,
	}
	cmd.AddCommand(newCmdTokenCreate(f, nil), newCmdTokenList(f, nil), newCmdTokenRevoke(f, nil))
	return cmd
}

type tokenCreateOptions struct {
	IO *IOStreams
	// Ledger opens the ledger, creating it if it is missing: create writes.
	Ledger func(context.Context) (ledger.Ledger, error)
	Label  string
}

func newCmdTokenCreate(f *Factory, runF func(*tokenCreateOptions) error) *cobra.Command {
	opts := &tokenCreateOptions{IO: f.IO, Ledger: f.LedgerOrCreate}
	cmd := &cobra.Command{
		Use:   "create --label NAME",
		Short: "Create a client token and print it once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !names.Valid(opts.Label) {
				return usageErrorf("--label %q: use "+names.Rule, opts.Label)
			}
			if opts.Label == gateway.DirectClient {
				return usageErrorf("--label %q is the label of calls made straight to a standalone runtime with its runtime token: choose another", opts.Label)
			}
			if runF != nil {
				return runF(opts)
			}
			return tokenCreateRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Label, "label", "", "the token's label, recorded in each usage row (required)")
	_ = cmd.MarkFlagRequired("label")
	return cmd
}

func tokenCreateRun(ctx context.Context, opts *tokenCreateOptions) error {
	store, err := opts.Ledger(ctx)
	if err != nil {
		return err
	}
	tok := tokenfile.Generate()
	if err := store.AddClientToken(ctx, opts.Label, tok.Hash(), false); err != nil {
		if errors.Is(err, ledger.ErrExists) {
			return usageErrorf("a token labelled %q exists; revoke it first", opts.Label)
		}
		return err
	}
	// The only time the token is shown.
	fmt.Fprintln(opts.IO.Out, tok.Reveal())
	fmt.Fprintf(opts.IO.ErrOut, "created token %q; it is shown once and stored only as a hash\n", opts.Label)
	return nil
}

func newCmdTokenList(f *Factory, runF func(*listOptions) error) *cobra.Command {
	return newCmdList(f, "List client tokens: labels, created, last used (never the tokens)",
		"", tokenListRun, runF)
}

func tokenListRun(ctx context.Context, opts *listOptions) error {
	store, err := opts.Ledger(ctx)
	if err != nil {
		return err
	}
	toks, err := store.ClientTokens(ctx)
	if err != nil {
		return err
	}
	recs := records{Columns: []string{"label", "created", "last_used"}}
	for _, t := range toks {
		last := cell{JSON: nil, Text: "never"}
		if !t.LastUsed.IsZero() {
			last = textCell(t.LastUsed.UTC().Format(time.RFC3339))
		}
		recs.Rows = append(recs.Rows, []cell{textCell(t.Label), textCell(t.CreatedAt.UTC().Format(time.RFC3339)), last})
	}
	return recs.write(opts.IO.Out, opts.Format)
}

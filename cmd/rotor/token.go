package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

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
	var label string
	create := &cobra.Command{
		Use:   "create --label NAME",
		Short: "Create a client token and print it once",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !names.Valid(label) {
				return usageErrorf("--label %q: use "+names.Rule, label)
			}
			store, err := f.LedgerOrCreate(cmd.Context())
			if err != nil {
				return err
			}
			tok := tokenfile.Generate()
			if err := store.AddClientToken(cmd.Context(), label, tok.Hash(), false); err != nil {
				if errors.Is(err, ledger.ErrExists) {
					return usageErrorf("a token labelled %q exists; revoke it first", label)
				}
				return err
			}
			// The only time the token is shown.
			fmt.Fprintln(f.IO.Out, tok.Reveal())
			fmt.Fprintf(f.IO.ErrOut, "created token %q; it is shown once and stored only as a hash\n", label)
			return nil
		},
	}
	create.Flags().StringVar(&label, "label", "", "the token's label, recorded in each usage row (required)")
	_ = create.MarkFlagRequired("label")

	var format string
	list := &cobra.Command{
		Use:   "list",
		Short: "List client tokens: labels, created, last used (never the tokens)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			store, err := f.Ledger(cmd.Context())
			if err != nil {
				return err
			}
			toks, err := store.ClientTokens(cmd.Context())
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
			return recs.write(f.IO.Out, format)
		},
	}
	addFormatFlag(list, &format)

	revoke := &cobra.Command{
		Use:   "revoke NAME",
		Short: "Revoke a client token",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			store, err := f.Ledger(cmd.Context())
			if err != nil {
				return err
			}
			if err := store.RevokeClientToken(cmd.Context(), args[0]); err != nil {
				if errors.Is(err, ledger.ErrNotFound) {
					return usageErrorf("no token labelled %q (see rotor bridge token list)", args[0])
				}
				return err
			}
			fmt.Fprintf(f.IO.Out, "revoked token %s\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(create, list, revoke)
	return cmd
}

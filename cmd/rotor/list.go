package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/rotorhq/rotor/ledger"
)

// listOptions serves the verbs that print the records of one ledger table:
// budget list, bridge token list, pricing list.
type listOptions struct {
	IO     *IOStreams
	Ledger func(context.Context) (ledger.Ledger, error)
	Format string
}

// newCmdList builds such a verb: --format, checked before anything runs,
// then runF (tests) or run.
func newCmdList(f *Factory, short, long string, run func(context.Context, *listOptions) error, runF func(*listOptions) error) *cobra.Command {
	opts := &listOptions{IO: f.IO, Ledger: f.Ledger}
	cmd := &cobra.Command{
		Use:   "list",
		Short: short,
		Long:  long,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(opts.Format); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	addFormatFlag(cmd, &opts.Format)
	return cmd
}

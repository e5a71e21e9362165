package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/rotorhq/rotor/config"
	"github.com/rotorhq/rotor/internal/tokenfile"
	"github.com/rotorhq/rotor/ledger"
)

type initOptions struct {
	IO *IOStreams
	// EnsureHome returns the home folder, creating it if it is missing.
	EnsureHome func() (string, error)
	ConfigPath func() (string, bool, error)
	// Ledger opens the ledger, creating it if it is missing.
	Ledger func(context.Context) (ledger.Ledger, error)
	Force  bool
}

// DefaultTokenLabel is the label of the token in bridge.token.
const DefaultTokenLabel = "default"

func newCmdInit(f *Factory, runF func(*initOptions) error) *cobra.Command {
	opts := &initOptions{IO: f.IO, EnsureHome: f.EnsureHome, ConfigPath: f.ConfigPath, Ledger: f.LedgerOrCreate}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write a starter rotor.yaml and a bridge token",
		Long: `Create the home folder (mode 0700) with a commented starter rotor.yaml and
bridge.token, the default client token for scripts (mode 0600), whose hash is
stored in the ledger under the label "default".

It never overwrites an existing file unless --force is given; with --force a
new token replaces the old one, which stops working.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return initRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Force, "force", false, "overwrite an existing rotor.yaml and bridge.token")
	return cmd
}

func initRun(ctx context.Context, opts *initOptions) error {
	home, err := opts.EnsureHome()
	if err != nil {
		return err
	}
	cfgPath, _, err := opts.ConfigPath()
	if err != nil {
		return err
	}
	tokPath := filepath.Join(home, "bridge.token")
	if !opts.Force {
		for _, p := range []string{cfgPath, tokPath} {
			if _, err := os.Lstat(p); err == nil {
				return usageErrorf("%s already exists; rotor init never overwrites without --force", p)
			}
		}
	}
	if err := writeFileAtomic(cfgPath, config.Starter, 0o600); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "wrote %s\n", cfgPath)
	if err := createDefaultToken(ctx, opts.Ledger, tokPath, opts.Force); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "wrote %s (the default client token, mode 0600)\n", tokPath)
	return nil
}

// createDefaultToken writes a new bridge.token and stores its hash under
// the label default.
func createDefaultToken(ctx context.Context, ledgerOrCreate func(context.Context) (ledger.Ledger, error), path string, overwrite bool) error {
	tok := tokenfile.Generate()
	store, err := ledgerOrCreate(ctx)
	if err != nil {
		return err
	}
	if err := tokenfile.Write(path, tok, overwrite); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return usageErrorf("%s already exists; use --force to replace it", path)
		}
		return err
	}
	if err := store.AddClientToken(ctx, DefaultTokenLabel, tok.Hash(), true); err != nil {
		return fmt.Errorf("store token hash: %w", err)
	}
	return nil
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".rotor-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/rotorhq/rotor/config"
	"github.com/rotorhq/rotor/internal/tokenfile"
)

type initOptions struct {
	f     *Factory
	Force bool
}

// DefaultTokenLabel is the label of the token in bridge.token.
const DefaultTokenLabel = "default"

func newCmdInit(f *Factory, runF func(*initOptions) error) *cobra.Command {
	opts := &initOptions{f: f}
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
			return initRun(cmd, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Force, "force", false, "overwrite an existing rotor.yaml and bridge.token")
	return cmd
}

func initRun(cmd *cobra.Command, opts *initOptions) error {
	f := opts.f
	home, err := f.EnsureHome()
	if err != nil {
		return err
	}
	cfgPath, _, err := f.ConfigPath()
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
	fmt.Fprintf(f.IO.Out, "wrote %s\n", cfgPath)
	if err := createDefaultToken(cmd, f, tokPath, opts.Force); err != nil {
		return err
	}
	fmt.Fprintf(f.IO.Out, "wrote %s (the default client token, mode 0600)\n", tokPath)
	return nil
}

// createDefaultToken writes a new bridge.token and stores its hash under
// the label default.
func createDefaultToken(cmd *cobra.Command, f *Factory, path string, overwrite bool) error {
	tok := tokenfile.Generate()
	store, err := f.LedgerOrCreate(cmd.Context())
	if err != nil {
		return err
	}
	if err := tokenfile.Write(path, tok, overwrite); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return usageErrorf("%s already exists; use --force to replace it", path)
		}
		return err
	}
	if err := store.AddClientToken(cmd.Context(), DefaultTokenLabel, tok.Hash(), true); err != nil {
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

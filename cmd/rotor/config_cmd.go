package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/rotorhq/rotor/config"
)

type configCheckOptions struct {
	f      *Factory
	Format string
}

func newCmdConfig(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Inspect rotor's configuration",
	}
	cmd.AddCommand(newCmdConfigCheck(f, nil))
	return cmd
}

func newCmdConfigCheck(f *Factory, runF func(*configCheckOptions) error) *cobra.Command {
	opts := &configCheckOptions{f: f}
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Validate the configuration and report each credential's key source",
		Long: `Validate rotor.yaml with ROTOR_* variables and flags applied, exactly as
rotor bridge start would, without starting anything. For each credential it
reports whether its key source (api_key_env or api_key_file) is set, never
the key. Exits 2 naming the key when the configuration is invalid.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkFormat(opts.Format); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return configCheckRun(opts)
		},
	}
	addFormatFlag(cmd, &opts.Format)
	return cmd
}

// keySource describes where a credential's key comes from and whether it is
// there, never what it is.
func keySource(f *Factory, home string, cr config.Credential) (source, state string) {
	if cr.APIKeyEnv != "" {
		if v, ok := f.LookupEnv(cr.APIKeyEnv); ok && v != "" {
			return "env " + cr.APIKeyEnv, "set"
		}
		return "env " + cr.APIKeyEnv, "not set"
	}
	p := cr.APIKeyFile
	if !filepath.IsAbs(p) {
		p = filepath.Join(home, p)
	}
	fi, err := os.Stat(p)
	switch {
	case err != nil:
		return "file " + p, "missing"
	case fi.Mode().Perm()&0o077 != 0:
		return "file " + p, "readable by others"
	case fi.Size() == 0:
		return "file " + p, "empty"
	}
	return "file " + p, "set"
}

func configCheckRun(opts *configCheckOptions) error {
	f := opts.f
	cfg, err := f.Config()
	if err != nil {
		return err
	}
	home, err := f.Home()
	if err != nil {
		return err
	}
	path, _, _ := f.ConfigPath()
	recs := records{Columns: []string{"pool", "credential", "enabled", "region", "base_url", "key_source", "key"}}
	missing := 0
	for _, pn := range cfg.PoolNames() {
		for _, cr := range cfg.Pools[pn].Credentials {
			src, state := keySource(f, home, cr)
			if cr.Enabled && state != "set" {
				missing++
			}
			recs.Rows = append(recs.Rows, []cell{textCell(pn), textCell(cr.Name), {JSON: cr.Enabled, Text: fmt.Sprint(cr.Enabled)},
				textCell(cr.Region), textCell(cr.BaseURL), textCell(src), textCell(state)})
		}
	}
	if err := recs.write(f.IO.Out, opts.Format); err != nil {
		return err
	}
	fmt.Fprintf(f.IO.ErrOut, "config ok: %s (model cooldown %s, learned cooldown %s)\n", path, onOff(cfg.ModelCooldown.Enabled), cfg.LearnedCooldown.Mode)
	if missing > 0 {
		fmt.Fprintf(f.IO.ErrOut, "warning: %d enabled credential(s) have no key; they will be skipped\n", missing)
	}
	return nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

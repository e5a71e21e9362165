package main

import (
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rotorhq/rotor/config"
	"github.com/rotorhq/rotor/internal/dburl"
	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/internal/tokenfile"
)

type configCheckOptions struct {
	IO *IOStreams
	// DBPath names the ledger's database (a URL's password is masked in
	// the output).
	DBPath     func() (string, error)
	Config     func() (*config.Config, error)
	Malformed  func() []string
	Home       func() (string, error)
	ConfigPath func() (string, bool, error)
	LookupEnv  func(string) (string, bool)
	// RuntimeToken finds the token a bridge sends to a standalone runtime
	// (bridge.runtime_url), as bridge start does, creating nothing.
	RuntimeToken func(*config.Config) error
	Format       string
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
	opts := &configCheckOptions{IO: f.IO, DBPath: f.DBPath, Config: f.Config, Malformed: f.Malformed, Home: f.Home, ConfigPath: f.ConfigPath, LookupEnv: f.LookupEnv,
		RuntimeToken: func(cfg *config.Config) error { _, _, err := runtimeToken(f, cfg, false); return err }}
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Validate the configuration and report each credential's key source",
		Long: `Validate rotor.yaml with ROTOR_* variables and flags applied, exactly as
rotor bridge start would, without starting anything. For each credential it
reports whether its key source (api_key_env or api_key_file) is set, never
the key. Exits 2 naming the key when the configuration is invalid, and
naming the variable or file when an enabled credential's key cannot be used
(an empty pool is fine). A malformed MODEL_COOLDOWN_*, LEARNED_COOLDOWN_* or
INTELLIGENCE_STORAGE_BACKEND setting is named, under the variable or file
key it came from; it disables its feature, as it would in a running bridge.`,
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

func configCheckRun(opts *configCheckOptions) error {
	cfg, err := opts.Config()
	if err != nil {
		return err
	}
	home, err := opts.Home()
	if err != nil {
		return err
	}
	// A bad --db or ROTOR_DB is refused before anything says ok.
	db := ""
	if opts.DBPath != nil {
		if db, err = opts.DBPath(); err != nil {
			return err
		}
	}
	path, _, _ := opts.ConfigPath()
	recs := records{Columns: []string{"pool", "credential", "enabled", "region", "base_url", "key_source", "key"}}
	var unusable []string
	for _, pn := range cfg.PoolNames() {
		for _, cr := range cfg.Pools[pn].Credentials {
			_, ks := loadKey(opts.LookupEnv, home, cr)
			if cr.Enabled && !ks.usable() {
				unusable = append(unusable, fmt.Sprintf("pools.%s credential %s: %s", pn, cr.Name, ks))
			}
			recs.Rows = append(recs.Rows, []cell{textCell(pn), textCell(cr.Name), {JSON: cr.Enabled, Text: fmt.Sprint(cr.Enabled)},
				textCell(cr.Region), textCell(cr.BaseURL), textCell(ks.source), textCell(ks.state)})
		}
	}
	if err := recs.write(opts.IO.Out, opts.Format); err != nil {
		return err
	}
	if len(unusable) > 0 {
		return usageErrorf("%s: %d enabled credential(s) cannot be used (set the key, or enabled: false):\n  %s", path, len(unusable), strings.Join(unusable, "\n  "))
	}
	if _, err := os.Stat(home); err == nil {
		// bridge start refuses a home others can enter (its tokens and
		// keys live there).
		if err := tokenfile.CheckDir(home); err != nil {
			return tokenErr("bridge start would refuse to start", err)
		}
	}
	if cfg.Bridge.RuntimeURL != "" && opts.RuntimeToken != nil {
		// bridge start refuses to start without the runtime's token.
		if err := opts.RuntimeToken(cfg); err != nil {
			return err
		}
	}
	if malformed := opts.Malformed(); len(malformed) > 0 {
		// The warnings above named each setting once; the value is never shown.
		fmt.Fprintf(opts.IO.ErrOut, "config %s loads with %d malformed setting(s), warned about above: each is ignored and disables its feature (model cooldown %s, learned cooldown %s)\n",
			path, len(malformed), onOff(cfg.ModelCooldown.Enabled), cfg.LearnedCooldown.Mode)
		return nil
	}
	if _, err := os.Stat(path); err != nil {
		path = "no " + path + ", defaults" // a typo in --home shows here
	}
	fmt.Fprintf(opts.IO.ErrOut, "config ok: %s (model cooldown %s, learned cooldown %s)\n", path, onOff(cfg.ModelCooldown.Enabled), cfg.LearnedCooldown.Mode)
	if host, _, err := net.SplitHostPort(cfg.Bridge.Listen); err == nil && !httpx.LoopbackHost(host) {
		fmt.Fprintf(opts.IO.ErrOut, "bridge.listen %s is not a loopback address: bridge start refuses it without --allow-non-loopback\n", cfg.Bridge.Listen)
	}
	if servesNothing(cfg, "bridge") {
		fmt.Fprintln(opts.IO.ErrOut, "no enabled credential: a bridge on this config answers every request 503 no_credentials; add one under pools: (rotor fake-provider prints a section to try)")
	}
	if db != "" {
		fmt.Fprintf(opts.IO.ErrOut, "ledger: %s\n", dburl.Mask(db))
	}
	return nil
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/rotorhq/rotor/config"
	"github.com/rotorhq/rotor/internal/tokenfile"
	"github.com/rotorhq/rotor/ledger"
)

type initOptions struct {
	IO *IOStreams
	// Home returns the home folder without creating it (nil: not asked).
	Home func() (string, error)
	// EnsureHome returns the home folder, creating it if it is missing.
	EnsureHome func() (string, error)
	ConfigPath func() (string, bool, error)
	// Ledger opens the ledger, creating it if it is missing.
	Ledger func(context.Context) (ledger.Ledger, error)
	// Hostname names this machine in the label of a token stored beside
	// another home's default on a shared ledger (os.Hostname).
	Hostname func() (string, error)
	Force    bool
}

// DefaultTokenLabel is the label of the token in bridge.token.
const DefaultTokenLabel = "default"

func newCmdInit(f *Factory, runF func(*initOptions) error) *cobra.Command {
	opts := &initOptions{IO: f.IO, Home: f.Home, EnsureHome: f.EnsureHome, ConfigPath: f.ConfigPath, Ledger: f.initLedger, Hostname: os.Hostname}
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Write a starter rotor.yaml and a bridge token",
		Long: `Create the home folder (mode 0700) with a commented starter rotor.yaml and
bridge.token, the default client token for scripts (mode 0600), whose hash is
stored in the ledger under the label "default". On a ledger shared with other
homes (PostgreSQL) that already holds "default", the label is
"default@<hostname>"; a bridge.token copied from another home whose hash the
ledger holds is kept as it is. Against an empty PostgreSQL ledger, init
creates its schema (rotor ledger migrate).

It never overwrites an existing file unless --force is given; with --force a
new token replaces the old one (under its label), which stops working, and
the replaced rotor.yaml (also one that no longer loads) is kept as
rotor.yaml.old (.old.2, .old.3... once taken), its ledger.url carried into
the new one. The configuration in force is checked, and its ledger opened,
before the token is written; a bad value writes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// The file --config or ROTOR_CONFIG names is the one init
			// writes: missing, it reads as the defaults.
			f.configToCreate = true
			if runF != nil {
				return runF(opts)
			}
			return initRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Force, "force", false, "overwrite an existing rotor.yaml and bridge.token")
	return cmd
}

func initRun(ctx context.Context, opts *initOptions) (err error) {
	if opts.Home != nil {
		// A home folder this init creates goes again if it fails (when
		// nothing was written into it): a bad value writes nothing.
		if h, herr := opts.Home(); herr == nil {
			if _, serr := os.Stat(h); errors.Is(serr, fs.ErrNotExist) {
				defer func() {
					if err != nil {
						_ = os.Remove(h) // only an empty folder
					}
				}()
			}
		}
	}
	home, err := opts.EnsureHome()
	if err != nil {
		return err
	}
	// A home others may enter is one bridge start refuses: say so now,
	// before anything is written into it.
	if err := tokenfile.CheckDir(home); err != nil {
		return tokenErr("refusing to init", err)
	}
	cfgPath, _, err := opts.ConfigPath()
	if err != nil {
		return err
	}
	tokPath := filepath.Join(home, "bridge.token")
	if !opts.Force {
		if _, err := os.Lstat(cfgPath); err == nil {
			return usageErrorf("%s already exists; rotor init never overwrites without --force", cfgPath)
		}
	}
	// A bridge.token whose hash the ledger already holds (a home copied
	// from another machine on a shared ledger) is kept without --force.
	keptAs := ""
	if _, err := os.Lstat(tokPath); err == nil && !opts.Force {
		if keptAs, err = storedTokenLabel(ctx, opts.Ledger, tokPath); err != nil {
			return err
		}
		if keptAs == "" {
			return usageErrorf("%s already exists; rotor init never overwrites without --force", tokPath)
		}
	}
	starter, err := starterFor(cfgPath)
	if err != nil {
		return err
	}
	if !opts.Force {
		// The configuration in force (flags, ROTOR_* variables) is
		// checked, and the ledger it names opened, before anything is
		// written: a bad value or an unreachable ledger leaves no
		// half-made home that the next init refuses.
		if _, err := opts.Ledger(ctx); err != nil {
			return err
		}
		if err := writeFileAtomic(cfgPath, starter, 0o600); err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.Out, "wrote %s\n", cfgPath)
	} else {
		// --force resets a rotor.yaml, also one that no longer loads:
		// the old file is kept beside it, the starter (with the old
		// file's ledger.url, when it names one) written, and only then
		// the configuration read and its ledger opened; if that fails,
		// the old file is put back.
		old, err := keepOld(cfgPath)
		if err != nil {
			return err
		}
		if err := writeFileAtomic(cfgPath, starter, 0o600); err != nil {
			if old != "" {
				_ = os.Rename(old, cfgPath) // a full disk leaves the old file in place
			}
			return err
		}
		if _, err := opts.Ledger(ctx); err != nil {
			if old != "" {
				_ = os.Rename(old, cfgPath)
			} else {
				_ = os.Remove(cfgPath)
			}
			return err
		}
		if old != "" {
			fmt.Fprintf(opts.IO.Out, "moved the old %s to %s\n", filepath.Base(cfgPath), filepath.Base(old))
		}
		fmt.Fprintf(opts.IO.Out, "wrote %s\n", cfgPath)
	}
	if keptAs != "" {
		fmt.Fprintf(opts.IO.Out, "kept %s (the ledger holds it as client token %q)\n", tokPath, keptAs)
		return nil
	}
	label, err := createDefaultToken(ctx, opts.Ledger, opts.Hostname, tokPath, opts.Force)
	if err != nil {
		return err
	}
	if label == DefaultTokenLabel {
		fmt.Fprintf(opts.IO.Out, "wrote %s (the default client token, mode 0600)\n", tokPath)
	} else {
		fmt.Fprintf(opts.IO.Out, "wrote %s (client token %q, mode 0600: the ledger's default token is another home's)\n", tokPath, label)
	}
	return nil
}

// storedTokenLabel returns the label the ledger holds the token in path
// under, or "" when it holds none (or the file cannot be read).
func storedTokenLabel(ctx context.Context, open func(context.Context) (ledger.Ledger, error), path string) (string, error) {
	tok, err := tokenfile.Read(path)
	if err != nil {
		return "", nil
	}
	store, err := open(ctx)
	if err != nil {
		return "", err
	}
	label, ok, err := store.LookupToken(ctx, tok.Hash())
	if err != nil || !ok {
		return "", err
	}
	return label, nil
}

// keepOld renames the file at path, if any, to path.old (path.old.2,
// .3... when that is taken: an earlier --force's copy stays) and returns
// the new name, or "" when there was none.
func keepOld(path string) (string, error) {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	name := path + ".old"
	for n := 2; ; n++ {
		if _, err := os.Lstat(name); errors.Is(err, fs.ErrNotExist) {
			break
		}
		name = fmt.Sprintf("%s.old.%d", path, n)
	}
	if err := os.Rename(path, name); err != nil {
		return "", err
	}
	return name, nil
}

// starterFor returns the starter rotor.yaml to write at path, with the
// ledger.url of the file there now, if it names one: init --force then
// keeps the home on the ledger whose token it replaces (a team's shared
// one), where the bare starter would move it to <home>/rotor.db.
func starterFor(path string) ([]byte, error) {
	old, err := os.ReadFile(path)
	if err != nil {
		return config.Starter, nil
	}
	url := config.LedgerURLOf(old) // also from a file that no longer loads
	if url == "" {
		return config.Starter, nil
	}
	const empty = "\n  url: ''"
	if !bytes.Contains(config.Starter, []byte(empty)) {
		return nil, errors.New("init: the starter rotor.yaml has no ledger url line")
	}
	quoted := "\n  url: '" + strings.ReplaceAll(url, "'", "''") + "'"
	return bytes.Replace(config.Starter, []byte(empty), []byte(quoted), 1), nil
}

// createDefaultToken writes a new bridge.token and stores its hash, and
// returns the label it is stored under: the label of the token it replaces
// (overwrite), else default, else, when another home's token holds
// default on a shared ledger, default@<hostname>.
func createDefaultToken(ctx context.Context, ledgerOrCreate func(context.Context) (ledger.Ledger, error), hostname func() (string, error), path string, overwrite bool) (string, error) {
	tok := tokenfile.Generate()
	store, err := ledgerOrCreate(ctx)
	if err != nil {
		return "", err
	}
	if _, err := os.Lstat(path); err == nil && !overwrite {
		return "", usageErrorf("%s already exists; use --force to replace it", path)
	}
	var label string
	var own bool
	for attempt := 0; ; attempt++ {
		if label, own, err = homeTokenLabel(ctx, store, hostname, path); err != nil {
			return "", err
		}
		// Only the home's own label is replaced; a free one is taken only
		// while still free: another home's init may have taken it since.
		err = store.AddClientToken(ctx, label, tok.Hash(), own)
		if errors.Is(err, ledger.ErrExists) && !own && attempt < 20 {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("store token hash: %w", err)
		}
		break
	}
	if err := tokenfile.Write(path, tok, overwrite); err != nil {
		if !own {
			// The label was free: give it back rather than leave a token
			// whose secret no file holds.
			_ = store.RevokeClientToken(context.WithoutCancel(ctx), label)
		}
		if errors.Is(err, fs.ErrExist) {
			return "", usageErrorf("%s already exists; use --force to replace it", path)
		}
		return "", err
	}
	return label, nil
}

// homeTokenLabel chooses the label of a home's new bridge.token: the
// label of the token the file holds now, if stored; else default when no
// token holds it; else default@<hostname> (DESIGN, "Client tokens on a
// shared ledger": labels stay unique, and one home never takes over
// another's; a second home on one machine gets default@<hostname>-2).
func homeTokenLabel(ctx context.Context, store ledger.Ledger, hostname func() (string, error), path string) (string, bool, error) {
	if old, err := tokenfile.Read(path); err == nil {
		if label, ok, err := store.LookupToken(ctx, old.Hash()); err != nil {
			return "", false, err
		} else if ok {
			return label, true, nil
		}
	}
	toks, err := store.ClientTokens(ctx)
	if err != nil {
		return "", false, err
	}
	taken := func(l string) bool {
		return slices.ContainsFunc(toks, func(t ledger.ClientToken) bool { return t.Label == l })
	}
	if !taken(DefaultTokenLabel) {
		return DefaultTokenLabel, false, nil
	}
	host := "localhost"
	if hostname != nil {
		if h, err := hostname(); err == nil && h != "" {
			host = h
		}
	}
	label := DefaultTokenLabel + "@" + cleanHost(host)
	for n := 2; taken(label); n++ {
		// A second home on this machine: never another home's label.
		label = fmt.Sprintf("%s@%s-%d", DefaultTokenLabel, cleanHost(host), n)
	}
	return label, false, nil
}

// cleanHost keeps a host name to letters, digits, '.', '_' and '-', at
// most 48 of them.
func cleanHost(h string) string {
	b := []byte(h)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			b[i] = '-'
		}
	}
	if len(b) > 48 {
		b = b[:48]
	}
	return string(b)
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

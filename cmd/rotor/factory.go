package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"

	"github.com/rotorhq/rotor/config"
	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/dburl"
	"github.com/rotorhq/rotor/learned"
	"github.com/rotorhq/rotor/ledger"
	"github.com/rotorhq/rotor/ledger/pgledger"
)

// Factory builds the dependencies commands need, lazily and once. Commands
// never read the environment, the clock or the database themselves: they
// take these funcs into their options, and tests fill them with fakes
// (newFixedFactory) without building the binary.
type Factory struct {
	// configToCreate: the configuration file named by --config or
	// ROTOR_CONFIG may be missing, for rotor init, which writes it.
	configToCreate bool
	IO             *IOStreams
	Clock          clock.Clock
	Version        string
	// LookupEnv reads the environment (os.LookupEnv).
	LookupEnv func(string) (string, bool)
	// Home returns the home folder; it does not create it.
	Home func() (string, error)
	// ConfigPath returns the configuration file and whether the user named
	// it explicitly.
	ConfigPath func() (path string, explicit bool, err error)
	// DBPath returns the ledger's database: a SQLite file, or a PostgreSQL
	// URL (print it with dburl.Mask: it may hold a password).
	DBPath func() (string, error)
	// Config loads, overrides and validates the configuration once.
	Config func() (*config.Config, error)
	// Malformed names the spec settings the configuration ignored, by the
	// variable or file key they were read under (after Config).
	Malformed func() []string
	// Logger is the one logger, configured by log.level and log.format.
	Logger func() *slog.Logger
	// Ledger opens an existing ledger once: a missing one is a usage error,
	// for commands that only read or remove.
	Ledger func(context.Context) (ledger.Ledger, error)
	// LedgerOrCreate opens the ledger once, creating it if it is missing:
	// for commands that write.
	LedgerOrCreate func(context.Context) (ledger.Ledger, error)
	// HTTPClient is the client that asks a running bridge (rotor status).
	HTTPClient func() *http.Client

	v *viper.Viper
	// flag sources, to name them in errors
	flagKeys map[string]*pflag.Flag

	home, configFlag, dbFlag string

	cfgOnce   sync.Once
	cfg       *config.Config
	cfgErr    error
	malformed []string

	logOnce sync.Once
	logger  *slog.Logger
	// logLevel is the logger's level, which a reload may change.
	logLevel slog.LevelVar

	storeMu sync.Mutex
	store   ledger.Ledger
}

// NewFactory returns a Factory over the process environment.
func NewFactory(io *IOStreams) *Factory {
	v := viper.New()
	v.SetEnvPrefix("ROTOR")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	for _, k := range config.Keys {
		_ = v.BindEnv(k)
	}
	_ = v.BindEnv("home")
	_ = v.BindEnv("config")
	_ = v.BindEnv("db")
	f := &Factory{IO: io, Clock: clock.Real(), Version: readBuildInfo().Version, LookupEnv: os.LookupEnv, v: v, flagKeys: map[string]*pflag.Flag{}}
	f.Home, f.ConfigPath, f.DBPath = f.defaultHome, f.defaultConfigPath, f.defaultDBPath
	f.Config = func() (*config.Config, error) {
		f.cfgOnce.Do(func() { f.cfg, f.cfgErr = f.loadConfig() })
		return f.cfg, f.cfgErr
	}
	f.Malformed = func() []string { return f.malformed }
	f.Logger = f.defaultLogger
	// Never a redirect: the token would follow it to the same host's
	// other ports.
	f.HTTPClient = func() *http.Client { return bridgeClient }
	f.setLedgerFuncs()
	return f
}

// newFixedFactory returns a Factory over fixed parts: a home folder, a
// validated configuration, an environment and a logger; its ledger is
// <home>/rotor.db. The demo runs on one, and so do the commands' tests.
func newFixedFactory(io *IOStreams, home string, cfg *config.Config, env map[string]string, clk clock.Clock, log *slog.Logger) *Factory {
	f := &Factory{IO: io, Clock: clk, Version: readBuildInfo().Version}
	f.LookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	f.Home = func() (string, error) { return home, nil }
	f.ConfigPath = func() (string, bool, error) { return filepath.Join(home, "rotor.yaml"), false, nil }
	f.DBPath = func() (string, error) { return filepath.Join(home, "rotor.db"), nil }
	f.Config = func() (*config.Config, error) { return cfg, nil }
	f.Malformed = func() []string { return nil }
	f.Logger = func() *slog.Logger { return log }
	// Never a redirect: the token would follow it to the same host's
	// other ports.
	f.HTTPClient = func() *http.Client { return bridgeClient }
	f.setLedgerFuncs()
	return f
}

func (f *Factory) setLedgerFuncs() {
	f.Ledger = func(ctx context.Context) (ledger.Ledger, error) { return f.ledger(ctx, false) }
	f.LedgerOrCreate = func(ctx context.Context) (ledger.Ledger, error) { return f.ledger(ctx, true) }
}

// bindFlag makes a flag set a config key (flag > ROTOR_* env > file >
// default).
func (f *Factory) bindFlag(key string, fl *pflag.Flag) {
	_ = f.v.BindPFlag(key, fl)
	f.flagKeys[key] = fl
}

// defaultHome returns the home folder: --home, ROTOR_HOME,
// $XDG_CONFIG_HOME/rotor, or ~/.config/rotor. It does not create it.
func (f *Factory) defaultHome() (string, error) {
	if f.home != "" {
		return filepath.Abs(f.home)
	}
	h, err := f.envPath("home")
	if err != nil {
		return "", err
	}
	if h != "" {
		return filepath.Abs(h)
	}
	if x, ok := f.LookupEnv("XDG_CONFIG_HOME"); ok && x != "" {
		return filepath.Join(x, "rotor"), nil
	}
	dir, err := os.UserHomeDir()
	if err != nil {
		return "", usageErrorf("cannot find a home folder for rotor: %v; set --home or ROTOR_HOME", err)
	}
	return filepath.Join(dir, ".config", "rotor"), nil
}

// EnsureHome creates the home folder with mode 0700 if it is missing.
// The ledger's location (--db, ROTOR_DB) is checked first: bad input
// creates nothing, and rotor init creates the home before it opens the
// ledger.
func (f *Factory) EnsureHome() (string, error) {
	home, err := f.Home()
	if err != nil {
		return "", err
	}
	if _, err := f.dbOverride(); err != nil {
		return "", err
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", fmt.Errorf("create home folder %s: %w", home, err)
	}
	return home, nil
}

// defaultConfigPath returns --config, ROTOR_CONFIG or <home>/rotor.yaml,
// and whether the user named it explicitly.
func (f *Factory) defaultConfigPath() (string, bool, error) {
	if f.configFlag != "" {
		return f.configFlag, true, nil
	}
	c, err := f.envPath("config")
	if err != nil {
		return "", false, err
	}
	if c != "" {
		return c, true, nil
	}
	home, err := f.Home()
	if err != nil {
		return "", false, err
	}
	return filepath.Join(home, "rotor.yaml"), false, nil
}

// envPath returns the ROTOR_* variable of key (home or config): ""
// when it is unset or empty (then ignored, as every empty ROTOR_* is), a
// usage error naming it when it is white space only (a folder or file
// named " " is never meant).
func (f *Factory) envPath(key string) (string, error) {
	if f.v == nil {
		return "", nil
	}
	v := f.v.GetString(key)
	if v != "" && strings.TrimSpace(v) == "" {
		return "", usageErrorf("ROTOR_%s: give a value, not white space", strings.ToUpper(key))
	}
	return v, nil
}

// dbOverride returns the ledger's location from --db or ROTOR_DB, checked
// (dburl.Check) and ready to open, or "" when neither is set. A bad one is
// a usage error naming the flag or variable.
func (f *Factory) dbOverride() (string, error) {
	if f.dbFlag != "" {
		db, err := checkLocation(f.dbFlag)
		if err != nil {
			return "", &UsageError{Err: fmt.Errorf("--db: %w", err)}
		}
		return db, nil
	}
	if f.v == nil {
		return "", nil
	}
	d := f.v.GetString("db")
	if d == "" {
		return "", nil
	}
	db, err := checkLocation(d)
	if err != nil {
		return "", &UsageError{Err: fmt.Errorf("ROTOR_DB: %w", err)}
	}
	return db, nil
}

// defaultDBPath returns the ledger's database: --db, ROTOR_DB, ledger.url
// (ROTOR_LEDGER_URL, the file) or <home>/rotor.db. Each is checked
// (dburl.Check: loadConfig checks ledger.url) and a PostgreSQL URL's
// scheme is returned in lower case.
func (f *Factory) defaultDBPath() (string, error) {
	if db, err := f.dbOverride(); err != nil || db != "" {
		return db, err
	}
	c, err := f.Config()
	if err != nil {
		return "", err
	}
	if c.Ledger.URL != "" {
		db, err := checkLocation(c.Ledger.URL)
		if err != nil {
			return "", &config.FieldError{Field: "ledger.url", Err: err}
		}
		return db, nil
	}
	home, err := f.Home()
	if err != nil {
		return "", err
	}
	return filepath.Join(home, "rotor.db"), nil
}

func (f *Factory) loadConfig() (*config.Config, error) {
	path, explicit, err := f.ConfigPath()
	if err != nil {
		return nil, err
	}
	c := config.Default()
	data, err := os.ReadFile(path)
	switch {
	case err == nil:
		if c, err = config.ParseFile(data); err != nil {
			var fe *config.FieldError
			if errors.As(err, &fe) {
				fe.Source = path
			}
			return nil, err
		}
	case errors.Is(err, fs.ErrNotExist) && (!explicit || f.configToCreate):
		// No file: defaults (init is about to write the one named).
	default:
		return nil, usageErrorf("read config: %v", err)
	}
	for _, k := range config.Keys {
		if !f.v.IsSet(k) {
			continue
		}
		raw := f.v.GetString(k)
		if k == "ledger.url" {
			// Checked before Set trims it: white space around a
			// location is refused wherever it is read.
			if _, err := checkLocation(raw); err != nil {
				return nil, &config.FieldError{Field: k, Source: config.EnvName(k), Err: err}
			}
		}
		if err := c.Set(k, raw); err != nil {
			var fe *config.FieldError
			if errors.As(err, &fe) {
				fe.Source = config.EnvName(k)
				if fl, ok := f.flagKeys[k]; ok && fl.Changed {
					fe.Source = "--" + fl.Name
				}
			}
			return nil, err
		}
	}
	if err := c.Validate(); err != nil {
		var fe *config.FieldError
		if errors.As(err, &fe) && fe.Source == "" {
			fe.Source = path
			for _, k := range config.Keys {
				if (k == fe.Field || strings.HasPrefix(fe.Field, k+"[")) && f.v.IsSet(k) {
					fe.Source = config.EnvName(k)
					if fl, ok := f.flagKeys[k]; ok && fl.Changed {
						fe.Source = "--" + fl.Name
					}
				}
			}
		}
		return nil, err
	}
	// ledger.url from the file is checked here (from ROTOR_LEDGER_URL,
	// above): config may not import dburl.
	if u := c.Ledger.URL; u != "" {
		if _, err := checkLocation(u); err != nil {
			return nil, &config.FieldError{Field: "ledger.url", Source: path, Err: err}
		}
	}
	log := f.loggerFor(&c)
	warn := func(_, source string) {
		f.malformed = append(f.malformed, source)
		log.Warn("malformed setting ignored; its feature is disabled", "setting", source)
	}
	c.ResolveSpec(f.LookupEnv, warn)
	// The policy is learned's to parse; checking it here names it where it
	// was read (learned_cooldown.policy_json in the file), for config
	// check too, and the runtime then finds learning off without a second
	// warning.
	if lc := &c.LearnedCooldown; lc.Mode != "off" {
		if _, err := learned.ParsePolicy(lc.PolicyJSON); err != nil {
			// ParsePolicy's errors name the entry and field, never a value.
			src := config.SpecSource(f.LookupEnv, config.EnvLearnedPolicy)
			f.malformed = append(f.malformed, src)
			log.Warn("malformed setting ignored; its feature is disabled", "setting", src, "reason", err.Error())
			lc.Mode = "off"
		}
	}
	return &c, nil
}

// defaultLogger returns the logger configured by log.level and log.format;
// before the configuration loads (or when it fails) a text logger at info.
func (f *Factory) defaultLogger() *slog.Logger {
	f.logOnce.Do(func() {
		c, err := f.Config()
		if err != nil {
			d := config.Default()
			c = &d
		}
		f.logger = f.loggerFor(c)
	})
	return f.logger
}

func (f *Factory) loggerFor(c *config.Config) *slog.Logger {
	if f.logger != nil {
		return f.logger
	}
	f.setLogLevel(c.Log.Level)
	return newLogger(f.IO.ErrOut, &f.logLevel, c.Log.Format)
}

// NewLogger builds the one slog logger. Attribute keys that name secrets
// are redacted as a backstop; secret.Value already prints itself redacted.
func NewLogger(w io.Writer, level, format string) *slog.Logger {
	var lv slog.LevelVar
	var l slog.Level
	_ = l.UnmarshalText([]byte(level))
	lv.Set(l)
	return newLogger(w, &lv, format)
}

func newLogger(w io.Writer, lv slog.Leveler, format string) *slog.Logger {
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: redactAttr}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

func redactAttr(_ []string, a slog.Attr) slog.Attr {
	switch strings.ToLower(a.Key) {
	case "authorization", "api_key", "apikey", "token", "key", "secret", "password":
		return slog.String(a.Key, "[redacted]")
	}
	return a
}

// ledger opens the ledger once. Unless create is set, a missing database
// is a usage error naming the home folder when that is missing too (a typo
// in --home), else the database: commands that only read or remove never
// create a home or an empty ledger. With create, the home folder is
// created too when the database lives there.
func (f *Factory) ledger(ctx context.Context, create bool) (ledger.Ledger, error) {
	f.storeMu.Lock()
	defer f.storeMu.Unlock()
	if f.store != nil {
		return f.store, nil
	}
	c, err := f.Config()
	if err != nil {
		return nil, err
	}
	if !create {
		if err := f.ledgerExists(); err != nil {
			return nil, err
		}
	}
	return f.openLedgerLocked(ctx, c, nil)
}

// ledgerExists returns a usage error when the database file is missing. A
// PostgreSQL database is always there: its schema check says the rest.
func (f *Factory) ledgerExists() error {
	path, err := f.DBPath()
	if err != nil {
		return err
	}
	if dburl.IsPostgres(path) {
		return nil
	}
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		return nil // there, or an error that opening will name
	}
	if f.dbInHome() {
		home, err := f.Home()
		if err != nil {
			return err
		}
		if _, err := os.Stat(home); errors.Is(err, fs.ErrNotExist) {
			return usageErrorf("home folder %s does not exist: check --home or ROTOR_HOME, or run rotor init", home)
		}
	}
	return usageErrorf("no ledger at %s: nothing is recorded yet (rotor init creates it), or check --db or ROTOR_DB", path)
}

// dbInHome reports whether the ledger is <home>/rotor.db (no --db, no
// ROTOR_DB, no ledger.url; always for a fixed factory, which reads no
// flags).
func (f *Factory) dbInHome() bool {
	if f.dbFlag != "" || (f.v != nil && f.v.GetString("db") != "") {
		return false
	}
	c, err := f.Config()
	return err != nil || c.Ledger.URL == ""
}

// openLedgerLocked opens the ledger at DBPath with cfg's settings,
// reporting commits to onCommit when set, and keeps it for Close. It is
// the one place that chooses the engine: a postgres:// URL opens the
// PostgreSQL ledger (never migrating it: `rotor ledger migrate` does), any
// other path the SQLite file (creating the home folder when the ledger
// lives there). The caller holds storeMu.
func (f *Factory) openLedgerLocked(ctx context.Context, cfg *config.Config, onCommit func(writes int, d time.Duration)) (ledger.Ledger, error) {
	path, err := f.DBPath()
	if err != nil {
		return nil, err
	}
	var s ledger.Ledger
	if dburl.IsPostgres(path) {
		s, err = openPostgres(ctx, path, f.pgOptions(cfg, onCommit))
	} else {
		if f.dbInHome() {
			if _, err := f.EnsureHome(); err != nil {
				return nil, err
			}
		}
		s, err = ledger.Open(ctx, path, ledger.Options{Clock: f.Clock, Logger: f.Logger(), Synchronous: cfg.Ledger.Synchronous,
			BusyTimeout: cfg.Ledger.BusyTimeout, OnCommit: onCommit})
	}
	if err != nil {
		return nil, ledgerOpenErr(path, err)
	}
	f.store = s
	return s, nil
}

// pgOptions are the PostgreSQL ledger's options from cfg. A real clock is
// left out: times then come from the database's now(), one clock for every
// machine; a fixed factory's test clock is passed on.
func (f *Factory) pgOptions(cfg *config.Config, onCommit func(writes int, d time.Duration)) pgledger.Options {
	o := pgledger.Options{Logger: f.Logger(), MaxConns: int(cfg.Ledger.MaxConns), ConnectTimeout: cfg.Ledger.ConnectTimeout, OnCommit: onCommit}
	if f.v == nil {
		o.Clock = f.Clock
	}
	return o
}

// ledgerOpenErr names the database (its password masked) in an open
// failure and gives it its exit status: an older or empty schema is the
// user's to migrate (exit 2); anything else, a newer schema or a database
// that cannot be reached, exits 1.
func ledgerOpenErr(path string, err error) error {
	where := dburl.Mask(path)
	msg := scrubURL(err.Error(), path)
	if !strings.Contains(msg, where) {
		msg = where + ": " + msg
	}
	err = &maskedError{msg: msg, err: err}
	if errors.Is(err, ledger.ErrSchemaTooOld) {
		return &UsageError{Err: err}
	}
	return err
}

// Close releases what the factory opened.
func (f *Factory) Close() {
	f.storeMu.Lock()
	defer f.storeMu.Unlock()
	if f.store != nil {
		f.store.Close()
		f.store = nil
	}
}

// checkLocation checks a ledger's location as dburl.Check does and, for a
// PostgreSQL URL, reads its parameters as the driver will
// (pgledger.CheckURL): a bad sslmode or connect_timeout is bad input,
// refused before anything is opened, not a failure to open.
func checkLocation(raw string) (string, error) {
	loc, err := dburl.Check(raw)
	if err == nil && dburl.IsPostgres(loc) {
		err = pgledger.CheckURL(loc)
	}
	if err != nil {
		return "", err
	}
	return loc, nil
}

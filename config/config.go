package config

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rotorhq/rotor/internal/defaults"
	rotornames "github.com/rotorhq/rotor/internal/names"
)

// Pool names: each serves the model prefix of the same name.
const (
	PoolAPI = rotornames.PoolAPI
	PoolZDR = rotornames.PoolZDR
)

// Config is rotor's whole configuration. Default() fills every field.
type Config struct {
	CatalogTTL      time.Duration
	CatalogTimeout  time.Duration
	Log             Log
	Runtime         Runtime
	Bridge          Bridge
	Routes          Routes
	Ledger          Ledger
	ModelCooldown   ModelCooldown
	LearnedCooldown LearnedCooldown
	// Pools maps a pool name (api, zdr) to its pool.
	Pools map[string]Pool
}

// Log configures log/slog output.
type Log struct {
	Level  string // debug, info, warn, error
	Format string // text, json
}

// Runtime configures the runtime HTTP server.
type Runtime struct {
	Listen         string
	Deadline       time.Duration
	TokenFile      string
	AllowedOrigins []string
	// ErrorBodyIdle ends the read of a provider's error body after this long
	// without data (the spec's 5 s).
	ErrorBodyIdle time.Duration
	// MaxBufferedMB bounds the bytes buffered across all requests in flight.
	MaxBufferedMB int64
	// ReadHeaderTimeout closes a connection whose request headers have not
	// all arrived this long after it started sending them (slowloris). It
	// applies to the bridge and the runtime servers.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, body included, on the
	// bridge and the runtime servers.
	ReadTimeout time.Duration
	// GenerationDeadline bounds a whole request on the OpenAI routes.
	GenerationDeadline time.Duration
	// StreamIdleTimeout cuts a stream whose provider is silent this long.
	StreamIdleTimeout time.Duration
	// ShutdownGrace is how long shutdown waits for requests and streams
	// in flight before it cuts them.
	ShutdownGrace time.Duration
}

// Routes configures the OpenAI-compatible routes.
type Routes struct {
	// DefaultPool is the pool a bare model name uses there; empty
	// requires a prefix.
	DefaultPool string
}

// Bridge configures the authenticated local bridge.
type Bridge struct {
	Listen         string
	AllowedOrigins []string
	// RuntimeURL, when set, is a standalone runtime to forward to; empty
	// means the runtime runs in-process.
	RuntimeURL string
}

// Ledger configures the usage ledger: SQLite (the default) or PostgreSQL.
type Ledger struct {
	// URL names the ledger's database: a SQLite file or a postgres:// URL.
	// Empty means <home>/rotor.db; --db and ROTOR_DB win over it.
	URL string
	// ConnectTimeout is how long PostgreSQL is retried at start.
	ConnectTimeout time.Duration
	// MaxConns bounds this process's PostgreSQL connections.
	MaxConns int64
	// Synchronous is SQLite's synchronous setting: full or normal.
	Synchronous string
	// ReservationGrace is how long after a request's deadline an unsettled
	// reservation is declared abandoned (counted as unknown usage).
	ReservationGrace time.Duration
	// BusyTimeout is how long a ledger write waits for a lock held by
	// another connection or process before admission fails closed.
	BusyTimeout time.Duration
}

// ModelCooldown holds the resolved MODEL_COOLDOWN_* settings.
type ModelCooldown struct {
	Enabled    bool
	MaxSeconds int64
	// raw values from the file, resolved by ResolveSpec.
	rawEnabled, rawMax *string
}

// LearnedCooldown holds the resolved LEARNED_COOLDOWN_* settings and
// INTELLIGENCE_STORAGE_BACKEND. PolicyJSON is validated by package learned.
type LearnedCooldown struct {
	Mode       string // off, shadow, apply
	PolicyJSON string
	Storage    string // memory, sqlite
	// Adapt is learned_cooldown.adapt (ROTOR_LEARNED_COOLDOWN_ADAPT), not
	// a spec setting: validated strictly, off by default. In apply mode it
	// lets the learner track a reset that moves (package learned, adapt.go).
	Adapt                          bool
	rawMode, rawPolicy, rawStorage *string
}

// Pool is one credential pool.
type Pool struct {
	FirstKeyFallback bool
	AuthRest         time.Duration
	PreferActive     bool
	// QuotaBuckets maps a bucket name to the models that share it.
	QuotaBuckets map[string][]string
	Credentials  []Credential
}

// Credential is one provider credential. It names where its key lives; the
// key itself is never part of the configuration.
type Credential struct {
	Name       string
	Enabled    bool
	Region     string
	BaseURL    string
	APIKeyEnv  string
	APIKeyFile string
	Visibility Visibility
	// ModelProfiles maps an upstream model name to its operator profile.
	ModelProfiles map[string]ModelProfile
}

// Visibility is a credential's model allow and deny globs (path.Match
// syntax). An empty Allow allows every model.
type Visibility struct {
	Allow []string
	Deny  []string
}

// ModelProfile is what the operator has verified about a model on a
// credential.
type ModelProfile struct {
	SupportedEndpoints []string
}

// Defaults.
const (
	DefaultBridgeListen   = "127.0.0.1:8787"
	DefaultRuntimeListen  = "127.0.0.1:8788"
	DefaultMaxCooldown    = defaults.MaxCooldownSeconds
	DefaultAuthRest       = defaults.AuthRest
	DefaultDeadline       = defaults.Deadline
	DefaultCatalogTTL     = defaults.CatalogTTL
	DefaultCatalogTimeout = defaults.CatalogTimeout
	DefaultErrorBodyIdle  = defaults.ErrorBodyIdle
	DefaultMaxBufferedMB  = defaults.MaxBufferedMB
	// MaxBufferedMBLimit is the largest runtime.max_buffered_mb: 1 TiB.
	MaxBufferedMBLimit       = 1 << 20
	DefaultReservationGrace  = 5 * time.Minute
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultBusyTimeout       = 5 * time.Second
	DefaultConnectTimeout    = 10 * time.Second
	DefaultMaxConns          = 8
	DefaultRegion            = "default"
)

// ErrInvalid is the sentinel every FieldError unwraps to.
var ErrInvalid = errors.New("invalid configuration")

// FieldError names the configuration key that is wrong and why.
type FieldError struct {
	// Field is the key's path, e.g. "pools.api.credentials[0].base_url".
	Field string
	// Source says where the value came from: a file path, an environment
	// variable or a flag. May be empty.
	Source string
	Err    error
}

func (e *FieldError) Error() string {
	if e.Source != "" {
		return fmt.Sprintf("%s (from %s): %v", e.Field, e.Source, e.Err)
	}
	return fmt.Sprintf("%s: %v", e.Field, e.Err)
}

// Unwrap lets errors.Is(err, ErrInvalid) succeed.
func (e *FieldError) Unwrap() []error { return []error{ErrInvalid, e.Err} }

func fieldErr(field string, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Err: fmt.Errorf(format, args...)}
}

// CheckLogLevel reports whether level is a log.level rotor knows.
func CheckLogLevel(level string) error {
	switch level {
	case "debug", "info", "warn", "error":
		return nil
	}
	return fmt.Errorf("must be debug, info, warn or error, not %q", level)
}

// CheckLogFormat reports whether format is a log.format rotor knows.
func CheckLogFormat(format string) error {
	switch format {
	case "text", "json":
		return nil
	}
	return fmt.Errorf("must be text or json, not %q", format)
}

// Validate checks the whole configuration and returns the first problem as
// a *FieldError.
func (c *Config) Validate() error {
	pos := func(field string, d time.Duration) error {
		if d <= 0 {
			return fieldErr(field, "must be a positive duration")
		}
		return nil
	}
	if d := c.Ledger.BusyTimeout; d > 0 && d < time.Millisecond {
		return fieldErr("ledger.busy_timeout", "must be at least 1ms (SQLite counts milliseconds), not %s", d)
	}
	for _, check := range []error{
		pos("catalog_ttl", c.CatalogTTL),
		pos("catalog_timeout", c.CatalogTimeout),
		pos("runtime.deadline", c.Runtime.Deadline),
		pos("runtime.error_body_idle", c.Runtime.ErrorBodyIdle),
		pos("ledger.reservation_grace", c.Ledger.ReservationGrace),
		pos("runtime.read_header_timeout", c.Runtime.ReadHeaderTimeout),
		pos("runtime.read_timeout", c.Runtime.ReadTimeout),
		pos("runtime.generation_deadline", c.Runtime.GenerationDeadline),
		pos("runtime.stream_idle_timeout", c.Runtime.StreamIdleTimeout),
		pos("runtime.shutdown_grace", c.Runtime.ShutdownGrace),
		pos("ledger.busy_timeout", c.Ledger.BusyTimeout),
		pos("ledger.connect_timeout", c.Ledger.ConnectTimeout),
	} {
		if check != nil {
			return check
		}
	}
	switch c.Routes.DefaultPool {
	case "", "api", "zdr":
	default:
		return fieldErr("routes.default_pool", "must be api, zdr or empty, not %q", c.Routes.DefaultPool)
	}
	if err := CheckLogLevel(c.Log.Level); err != nil {
		return fieldErr("log.level", "%w", err)
	}
	if err := CheckLogFormat(c.Log.Format); err != nil {
		return fieldErr("log.format", "%w", err)
	}
	switch c.Ledger.Synchronous {
	case "full", "normal":
	default:
		return fieldErr("ledger.synchronous", "must be full or normal, not %q", c.Ledger.Synchronous)
	}
	if c.Ledger.MaxConns < 1 || c.Ledger.MaxConns > 1000 {
		return fieldErr("ledger.max_conns", "must be 1 through 1000, not %d", c.Ledger.MaxConns)
	}
	if c.Runtime.MaxBufferedMB < 65 {
		return fieldErr("runtime.max_buffered_mb", "must be at least 65 (a full 64 MiB body and the byte that tells it is not larger), not %d", c.Runtime.MaxBufferedMB)
	}
	if c.Runtime.MaxBufferedMB > MaxBufferedMBLimit {
		// In bytes it must fit an int64: 2^44 MiB and up wrapped around
		// (2^44+1 became 1 MiB, and every large request was refused).
		return fieldErr("runtime.max_buffered_mb", "must be at most %d (1 TiB), not %d", MaxBufferedMBLimit, c.Runtime.MaxBufferedMB)
	}
	if err := checkListen("runtime.listen", c.Runtime.Listen); err != nil {
		return err
	}
	if err := checkListen("bridge.listen", c.Bridge.Listen); err != nil {
		return err
	}
	if c.Runtime.TokenFile == "" {
		return fieldErr("runtime.token_file", "must not be empty")
	}
	if u := c.Bridge.RuntimeURL; u != "" {
		if err := checkBaseURL(u); err != nil {
			return fieldErr("bridge.runtime_url", "%v", err)
		}
	}
	for i, o := range c.Runtime.AllowedOrigins {
		if err := checkOrigin(o); err != nil {
			return fieldErr(fmt.Sprintf("runtime.allowed_origins[%d]", i), "%v", err)
		}
	}
	for i, o := range c.Bridge.AllowedOrigins {
		if err := checkOrigin(o); err != nil {
			return fieldErr(fmt.Sprintf("bridge.allowed_origins[%d]", i), "%v", err)
		}
	}
	return c.validatePools()
}

func (c *Config) validatePools() error {
	names := map[string]string{}
	for _, pn := range c.PoolNames() {
		p := c.Pools[pn]
		base := "pools." + pn
		if pn != PoolAPI && pn != PoolZDR {
			return fieldErr(base, "unknown pool (pools are api and zdr, one per model prefix)")
		}
		if p.AuthRest <= 0 {
			return fieldErr(base+".auth_rest", "must be a positive duration")
		}
		inBucket := map[string]string{}
		for _, b := range sortedKeys(p.QuotaBuckets) {
			field := base + ".quota_buckets." + b
			if strings.TrimSpace(b) == "" {
				return fieldErr(base+".quota_buckets", "bucket names must not be empty")
			}
			if len(p.QuotaBuckets[b]) == 0 {
				return fieldErr(field, "must list at least one model")
			}
			for _, m := range p.QuotaBuckets[b] {
				if m == "" {
					return fieldErr(field, "model names must not be empty")
				}
				if other, ok := inBucket[m]; ok && other != b {
					return fieldErr(field, "model %q is already in bucket %q", m, other)
				}
				inBucket[m] = b
			}
		}
		for i, cr := range p.Credentials {
			f := fmt.Sprintf("%s.credentials[%d]", base, i)
			if !rotornames.Valid(cr.Name) {
				return fieldErr(f+".name", "must be "+rotornames.Rule+" (a label, not a secret), not %q", cr.Name)
			}
			if prev, dup := names[cr.Name]; dup {
				return fieldErr(f+".name", "duplicate credential name %q (also %s)", cr.Name, prev)
			}
			names[cr.Name] = f
			if cr.BaseURL == "" {
				return fieldErr(f+".base_url", "is required")
			}
			if err := checkBaseURL(cr.BaseURL); err != nil {
				return fieldErr(f+".base_url", "%v", err)
			}
			if (cr.APIKeyEnv == "") == (cr.APIKeyFile == "") {
				return fieldErr(f, "set exactly one of api_key_env and api_key_file")
			}
			if cr.APIKeyEnv != "" && !envName.MatchString(cr.APIKeyEnv) {
				// Not quoted: a key pasted here by mistake would be echoed.
				return fieldErr(f+".api_key_env", "is not a variable name (letters, digits and _, not starting with a digit): it names the variable that holds the key, not the key")
			}
			if cr.APIKeyEnv != "" && keyShaped(cr.APIKeyEnv) {
				// A key of letters, digits and _ (Groq's gsk_..., hex)
				// passes as a name, and an unset name is echoed as
				// "env NAME is not set" in logs and answers.
				return fieldErr(f+".api_key_env", "looks like a key itself (24 or more characters mixing lowercase letters and digits): it names the variable that holds the key, such as PROVIDER_KEY_A")
			}
			if cr.APIKeyFile != "" && !strings.ContainsAny(cr.APIKeyFile, `/\.`) && holdsKey(cr.APIKeyFile) {
				// A key pasted in place of the path: a missing file is
				// echoed as "file PATH is missing" by config check, the
				// bridge's log and every 503 no_credentials answer.
				return fieldErr(f+".api_key_file", "looks like a key itself (no folder or extension, and a run of 20 or more letters and digits mixing lowercase letters and digits): it names the file that holds the key, such as keys/team-a")
			}
			if cr.Region == "" {
				return fieldErr(f+".region", "must not be empty")
			}
			for j, g := range append(append([]string{}, cr.Visibility.Allow...), cr.Visibility.Deny...) {
				if _, err := path.Match(g, ""); err != nil || g == "" {
					return fieldErr(f+".visibility", "bad glob %q (entry %d)", g, j)
				}
			}
			for _, m := range sortedKeys(cr.ModelProfiles) {
				for _, e := range cr.ModelProfiles[m].SupportedEndpoints {
					if !strings.HasPrefix(e, "/") {
						return fieldErr(f+".model_profiles."+m+".supported_endpoints", "endpoints are paths like /v1/decisions, not %q", e)
					}
				}
			}
		}
	}
	return nil
}

var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// holdsKey reports whether name holds a run of 20 or more letters and
// digits, with at least 4 lowercase letters and 4 digits: a key's body
// (sk-proj-..., gsk_..., hex), not a file name's words and dates
// (openai-key-2026-12-06).
func holdsKey(name string) bool {
	return slices.ContainsFunc(strings.FieldsFunc(name, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
	}), func(run string) bool {
		return len(run) >= 20 && mixed(run)
	})
}

// mixed reports whether s holds at least 4 lowercase letters and 4 digits.
func mixed(s string) bool {
	var lower, digits int
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z':
			lower++
		case r >= '0' && r <= '9':
			digits++
		}
	}
	return lower >= 4 && digits >= 4
}

// keyShaped reports whether a variable name looks like a key pasted in its
// place: long, with lowercase letters and digits mixed, as random keys are
// and variable names (PROVIDER_KEY_A, openai_key_2) are not.
func keyShaped(name string) bool {
	return len(name) >= 24 && mixed(name)
}

// PoolNames returns the configured pool names in sorted order.
func (c *Config) PoolNames() []string { return sortedKeys(c.Pools) }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func checkListen(field, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fieldErr(field, "want host:port, got %q", addr)
	}
	if host == "" {
		return fieldErr(field, "host is empty in %q; use 127.0.0.1", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fieldErr(field, "bad port in %q", addr)
	}
	return nil
}

// checkBaseURL checks a provider or runtime URL. Its errors never quote
// the URL: a key pasted into one (a ?key= query, user info, or the key
// itself in place of the URL) would reach the terminal, the bridge log
// and a reload's error body.
func checkBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return errors.New("is not a URL (want http://host[:port][/path] or https://...)")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return errors.New("must be an http or https URL")
	}
	if u.Host == "" {
		return errors.New("has no host")
	}
	if u.User != nil {
		return errors.New("must not carry user info (keys belong in api_key_env or api_key_file)")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return errors.New("must not have a query or fragment (keys belong in api_key_env or api_key_file)")
	}
	return nil
}

func checkOrigin(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || (u.Path != "" && u.Path != "/") {
		return fmt.Errorf("an origin is scheme://host[:port], not %q", s)
	}
	return nil
}

// EnabledCredentials returns the pool's enabled credentials in configured
// order.
func (p Pool) EnabledCredentials() []Credential {
	var out []Credential
	for _, c := range p.Credentials {
		if c.Enabled {
			out = append(out, c)
		}
	}
	return out
}

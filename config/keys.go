package config

import (
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/rotorhq/rotor/internal/defaults"
	"github.com/rotorhq/rotor/internal/dur"
)

// field registers one key of rotor.yaml below a mapping of type T: where it
// lives in T, its default and the starter file's comment. The tables below
// are the only place a key is named: the file walker, Set, Keys, Default and
// the starter are all driven by them, so adding a key is one table row (and
// its struct field). TestEveryFieldRegisteredOnce holds that line.
//
// The kind of a key is the type ptr returns: *string, *bool, *int64,
// *time.Duration, *[]string (a YAML list; comma-separated in a variable),
// or one of the nested collections the walker knows (pools, quota buckets,
// credentials, model profiles).
type field[T any] struct {
	// key is the dotted path below T's mapping: "runtime.deadline" is the
	// deadline key of the runtime section.
	key string
	// ptr returns the field the key sets. Nil for a refused key.
	ptr func(*T) any
	// def is the default, of ptr's element type; nil leaves the zero value.
	def any
	// doc is the starter file's comment on the key.
	doc string
	// override lists the key in Keys: ROTOR_* variables and flags may set it.
	override bool
	// fold lower-cases a value set by Set from a variable or flag (the file
	// is case-sensitive).
	fold bool
	// clean normalizes a string read from the file.
	clean func(string) string
	// spec names the spec's variable of a spec setting. The file's value is
	// kept raw in *raw and resolved by ResolveSpec, where a malformed value
	// disables its feature instead of failing the start.
	spec string
	raw  func(*T) **string
	// refuse, when set, is the error (with a %d for the line) for a key that
	// is known only to be refused.
	refuse string
	// example is the value the starter's commented example shows (nested
	// collections only); empty leaves the key out of the example.
	example string
}

// settings are the top-level keys of rotor.yaml, in the starter's order.
var settings = []field[Config]{
	{key: "catalog_ttl", ptr: func(c *Config) any { return &c.CatalogTTL }, def: DefaultCatalogTTL, override: true,
		doc: "a credential's catalog (GET {base_url}/v1/models) stays fresh this long"},
	{key: "catalog_timeout", ptr: func(c *Config) any { return &c.CatalogTimeout }, def: DefaultCatalogTimeout, override: true,
		doc: "one catalog fetch never takes longer than this"},
	{key: "log.level", ptr: func(c *Config) any { return &c.Log.Level }, def: "info", override: true, fold: true,
		doc: "debug, info, warn, error"},
	{key: "log.format", ptr: func(c *Config) any { return &c.Log.Format }, def: "text", override: true, fold: true,
		doc: "text or json (logs go to stderr)"},
	{key: "runtime.listen", ptr: func(c *Config) any { return &c.Runtime.Listen }, def: DefaultRuntimeListen, override: true},
	{key: "runtime.deadline", ptr: func(c *Config) any { return &c.Runtime.Deadline }, def: DefaultDeadline, override: true,
		doc: "shared by discovery, admission, body reads and retries"},
	{key: "runtime.generation_deadline", ptr: func(c *Config) any { return &c.Runtime.GenerationDeadline }, def: defaults.GenerationDeadline, override: true,
		doc: "bounds a whole request on the OpenAI routes (responses, chat, embeddings)"},
	{key: "runtime.stream_idle_timeout", ptr: func(c *Config) any { return &c.Runtime.StreamIdleTimeout }, def: defaults.StreamIdleTimeout, override: true,
		doc: "a stream whose provider is silent this long is cut"},
	{key: "runtime.shutdown_grace", ptr: func(c *Config) any { return &c.Runtime.ShutdownGrace }, def: defaults.ShutdownGrace, override: true,
		doc: "on SIGINT/SIGTERM, requests and streams in flight get this long, then are cut (row code server_shutdown)"},
	{key: "runtime.token_file", ptr: func(c *Config) any { return &c.Runtime.TokenFile }, def: "runtime.token", override: true,
		doc: "bearer token of a standalone runtime, relative to the home folder"},
	{key: "runtime.allowed_origins", ptr: func(c *Config) any { return &c.Runtime.AllowedOrigins }, override: true,
		doc: "browser origins that get CORS headers"},
	{key: "runtime.error_body_idle", ptr: func(c *Config) any { return &c.Runtime.ErrorBodyIdle }, def: DefaultErrorBodyIdle, override: true,
		doc: "a provider error body is read until this long passes without data"},
	{key: "runtime.max_buffered_mb", ptr: func(c *Config) any { return &c.Runtime.MaxBufferedMB }, def: int64(DefaultMaxBufferedMB), override: true,
		doc: "bytes buffered across all requests in flight"},
	{key: "runtime.read_header_timeout", ptr: func(c *Config) any { return &c.Runtime.ReadHeaderTimeout }, def: DefaultReadHeaderTimeout, override: true,
		doc: "a connection still sending its headers after this is closed (slowloris); bridge and runtime"},
	{key: "runtime.read_timeout", ptr: func(c *Config) any { return &c.Runtime.ReadTimeout }, def: DefaultReadTimeout, override: true,
		doc: "reading a whole request, body included, is cut after this; bridge and runtime"},
	{key: "routes.default_pool", ptr: func(c *Config) any { return &c.Routes.DefaultPool }, override: true, fold: true,
		doc: "the pool (api or zdr) a bare model name uses on the OpenAI routes; empty: a prefix is required"},
	{key: "bridge.listen", ptr: func(c *Config) any { return &c.Bridge.Listen }, def: DefaultBridgeListen, override: true,
		doc: "a non-loopback address needs --allow-non-loopback"},
	{key: "bridge.allowed_origins", ptr: func(c *Config) any { return &c.Bridge.AllowedOrigins }, override: true},
	{key: "bridge.runtime_url", ptr: func(c *Config) any { return &c.Bridge.RuntimeURL }, override: true,
		doc: "empty: the runtime runs inside the bridge"},
	{key: "ledger.url", ptr: func(c *Config) any { return &c.Ledger.URL }, override: true,
		doc: "empty: <home>/rotor.db (SQLite); or a SQLite file, or a postgres:// URL for a team's shared ledger (--db and ROTOR_DB win)"},
	{key: "ledger.connect_timeout", ptr: func(c *Config) any { return &c.Ledger.ConnectTimeout }, def: DefaultConnectTimeout, override: true,
		doc: "PostgreSQL: how long a start retries an unreachable database, then exits 1"},
	{key: "ledger.max_conns", ptr: func(c *Config) any { return &c.Ledger.MaxConns }, def: int64(DefaultMaxConns), override: true,
		doc: "PostgreSQL: connections this process keeps at most"},
	{key: "ledger.synchronous", ptr: func(c *Config) any { return &c.Ledger.Synchronous }, def: "normal", override: true, fold: true,
		doc: "normal: a committed usage row survives any process crash; full: power loss too (slower)"},
	{key: "ledger.reservation_grace", ptr: func(c *Config) any { return &c.Ledger.ReservationGrace }, def: DefaultReservationGrace, override: true,
		doc: "an unsettled reservation counts as unknown usage this long after its deadline"},
	{key: "ledger.busy_timeout", ptr: func(c *Config) any { return &c.Ledger.BusyTimeout }, def: DefaultBusyTimeout, override: true,
		doc: "a write waits this long for another connection's lock, then admission fails closed (503)"},
	{key: "model_cooldown.enabled", spec: EnvModelCooldownEnabled, def: false,
		ptr: func(c *Config) any { return &c.ModelCooldown.Enabled }, raw: func(c *Config) **string { return &c.ModelCooldown.rawEnabled }},
	{key: "model_cooldown.max_seconds", spec: EnvModelCooldownMax, def: int64(DefaultMaxCooldown), doc: "1 through 2147483647",
		ptr: func(c *Config) any { return &c.ModelCooldown.MaxSeconds }, raw: func(c *Config) **string { return &c.ModelCooldown.rawMax }},
	{key: "learned_cooldown.mode", spec: EnvLearnedMode, def: "off", doc: "off, shadow or apply",
		ptr: func(c *Config) any { return &c.LearnedCooldown.Mode }, raw: func(c *Config) **string { return &c.LearnedCooldown.rawMode }},
	{key: "learned_cooldown.policy_json", spec: EnvLearnedPolicy, def: "{}", doc: `{"buckets":[{"provider":"api","model":"decide-mini","quota_bucket":null}]}`,
		ptr: func(c *Config) any { return &c.LearnedCooldown.PolicyJSON }, raw: func(c *Config) **string { return &c.LearnedCooldown.rawPolicy }},
	{key: "learned_cooldown.adapt", ptr: func(c *Config) any { return &c.LearnedCooldown.Adapt }, def: false, override: true,
		doc: "rotor's own setting, off by default: apply tracks a reset that moves (README, Cooldowns); departs from the spec"},
	{key: "learned_cooldown.storage", spec: EnvStorageBackend, def: "memory", doc: "memory, or sqlite (the ledger database; d1 is an alias)",
		ptr: func(c *Config) any { return &c.LearnedCooldown.Storage }, raw: func(c *Config) **string { return &c.LearnedCooldown.rawStorage }},
	{key: "pools", ptr: func(c *Config) any { return &c.Pools }, def: map[string]Pool{}},
}

// poolFields are the keys of one pool (pools.api, pools.zdr).
var poolFields = []field[Pool]{
	{key: "first_key_fallback", ptr: func(p *Pool) any { return &p.FirstKeyFallback },
		doc: "legacy: the first key once per request when every key rests (model cooldown off only)"},
	{key: "auth_rest", ptr: func(p *Pool) any { return &p.AuthRest }, def: DefaultAuthRest,
		doc: "how long a credential rests after an auth rejection"},
	{key: "prefer_active", ptr: func(p *Pool) any { return &p.PreferActive },
		doc: "keep using the last credential that succeeded"},
	{key: "quota_buckets", ptr: func(p *Pool) any { return &p.QuotaBuckets },
		doc: "e.g. {shared-decide: [decide-mini, decide-large]}"},
	{key: "credentials", ptr: func(p *Pool) any { return &p.Credentials }},
}

// credentialFields are the keys of one credential.
var credentialFields = []field[Credential]{
	{key: "name", ptr: func(c *Credential) any { return &c.Name }, example: "team-a", doc: "a label, not a secret"},
	{key: "enabled", ptr: func(c *Credential) any { return &c.Enabled }, def: true, example: "true"},
	{key: "region", ptr: func(c *Credential) any { return &c.Region }, def: DefaultRegion, example: "us"},
	{key: "base_url", ptr: func(c *Credential) any { return &c.BaseURL }, example: "https://us.provider.example",
		clean: func(s string) string { return strings.TrimRight(s, "/") }},
	{key: "api_key_env", ptr: func(c *Credential) any { return &c.APIKeyEnv }, example: "PROVIDER_KEY_A", doc: "or api_key_file: keys/team-a"},
	{key: "api_key_file", ptr: func(c *Credential) any { return &c.APIKeyFile }},
	// Never echo the value: it is a secret.
	{key: "api_key", refuse: "inline keys are refused (line %d); name an environment variable with api_key_env or a file with api_key_file"},
	{key: "visibility.allow", ptr: func(c *Credential) any { return &c.Visibility.Allow }, example: `["decide-*"]`, doc: "path.Match globs; empty allows every model"},
	{key: "visibility.deny", ptr: func(c *Credential) any { return &c.Visibility.Deny }, example: `["decide-old"]`},
	{key: "model_profiles", ptr: func(c *Credential) any { return &c.ModelProfiles }, example: `{decide-mini: {supported_endpoints: ["/v1/decisions"]}}`},
}

// profileFields are the keys of one model profile.
var profileFields = []field[ModelProfile]{
	{key: "supported_endpoints", ptr: func(p *ModelProfile) any { return &p.SupportedEndpoints }},
}

// Keys lists the scalar keys that ROTOR_* variables and flags may set;
// cmd/rotor binds EnvName(key) for each.
var Keys = overrideKeys()

func overrideKeys() []string {
	var out []string
	for _, f := range settings {
		if f.override {
			out = append(out, f.key)
		}
	}
	return out
}

// Default returns the configuration used when no file sets anything.
func Default() Config { return defaultsOf(settings) }

func defaultsOf[T any](fields []field[T]) T {
	var v T
	for _, f := range fields {
		if f.def == nil || f.ptr == nil {
			continue
		}
		d := reflect.ValueOf(f.def)
		if d.Kind() == reflect.Map {
			// Every Config gets a map of its own.
			m := reflect.MakeMapWithSize(d.Type(), d.Len())
			for it := d.MapRange(); it.Next(); {
				m.SetMapIndex(it.Key(), it.Value())
			}
			d = m
		}
		reflect.ValueOf(f.ptr(&v)).Elem().Set(d)
	}
	return v
}

// specFileKey is the rotor.yaml key of the spec setting name.
func specFileKey(name string) string {
	for _, f := range settings {
		if f.spec == name {
			return f.key
		}
	}
	return ""
}

// EnvName returns the ROTOR_* variable for a key: ROTOR_RUNTIME_LISTEN for
// runtime.listen.
func EnvName(key string) string {
	return "ROTOR_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// Set overrides one of Keys from a string. List keys take comma-separated
// values. The error is a *FieldError naming the key.
func (c *Config) Set(key, value string) error {
	var f *field[Config]
	for i := range settings {
		if settings[i].override && settings[i].key == key {
			f = &settings[i]
		}
	}
	if f == nil {
		return fieldErr(key, "unknown key")
	}
	value = strings.TrimSpace(value)
	switch p := f.ptr(c).(type) {
	case *time.Duration:
		d, err := dur.Parse(value)
		if err != nil {
			return &FieldError{Field: key, Err: err}
		}
		*p = d
	case *string:
		if f.fold {
			value = strings.ToLower(value)
		}
		*p = value
	case *int64:
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return fieldErr(key, "not an integer: %q", value)
		}
		*p = n
	case *bool:
		b, err := strconv.ParseBool(value)
		if err != nil {
			return fieldErr(key, "want true or false, not %q", value)
		}
		*p = b
	case *[]string:
		*p = nil
		for _, s := range strings.Split(value, ",") {
			if s = strings.TrimSpace(s); s != "" {
				*p = append(*p, s)
			}
		}
	default:
		return fieldErr(key, "cannot be set from a variable or flag")
	}
	return nil
}

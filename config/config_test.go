package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

const goodFile = `
catalog_ttl: 5m
runtime: {listen: 127.0.0.1:9000, deadline: 30s}
pools:
  api:
    auth_rest: 120s
    quota_buckets: {shared: [decide-mini, decide-large]}
    credentials:
      - name: team-a
        region: us
        base_url: https://us.provider.example/
        api_key_env: PROVIDER_KEY_A
        visibility: {allow: ["decide-*"], deny: ["decide-old"]}
        model_profiles:
          Decide-Mini.v2: {supported_endpoints: ["/v1/decisions"]}
      - name: team-b
        enabled: false
        region: eu
        base_url: http://127.0.0.1:9999
        api_key_file: keys/b
  zdr:
    credentials: []
`

func TestParseFileGood(t *testing.T) {
	c, err := ParseFile([]byte(goodFile))
	if err != nil {
		t.Fatalf("ParseFile: %v", err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if c.CatalogTTL != 5*time.Minute || c.Runtime.Deadline != 30*time.Second || c.Runtime.Listen != "127.0.0.1:9000" {
		t.Errorf("scalars not read: %+v", c)
	}
	api := c.Pools["api"]
	if api.AuthRest != 120*time.Second || len(api.Credentials) != 2 {
		t.Fatalf("pool api = %+v", api)
	}
	a := api.Credentials[0]
	if a.BaseURL != "https://us.provider.example" {
		t.Errorf("base_url trailing slash kept: %q", a.BaseURL)
	}
	// Model names keep their case and dots (viper would fold and split them).
	if got := a.ModelProfiles["Decide-Mini.v2"].SupportedEndpoints; !reflect.DeepEqual(got, []string{"/v1/decisions"}) {
		t.Errorf("model profile lost: %+v", a.ModelProfiles)
	}
	if !a.Enabled || api.Credentials[1].Enabled {
		t.Errorf("enabled flags wrong: %v %v", a.Enabled, api.Credentials[1].Enabled)
	}
	// Packages pool and decisions apply them (TestQuotaBucketSharedByMemberModels,
	// TestEligibilityRequiresCatalogVisibilityAndProfile).
	if got := api.QuotaBuckets["shared"]; !reflect.DeepEqual(got, []string{"decide-mini", "decide-large"}) {
		t.Errorf("quota bucket shared = %q", got)
	}
	if v := a.Visibility; !reflect.DeepEqual(v, Visibility{Allow: []string{"decide-*"}, Deny: []string{"decide-old"}}) {
		t.Errorf("visibility = %+v", v)
	}
}

func TestStarterParsesToDefaults(t *testing.T) {
	c, err := ParseFile(Starter)
	if err != nil {
		t.Fatalf("starter does not parse: %v", err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("starter does not validate: %v", err)
	}
	c.ResolveSpec(func(string) (string, bool) { return "", false }, func(s, _ string) { t.Errorf("starter setting %s malformed", s) })
	d := Default()
	d.ResolveSpec(func(string) (string, bool) { return "", false }, nil)
	c.Pools, d.Pools = nil, nil
	if !reflect.DeepEqual(c, d) {
		t.Errorf("starter differs from defaults:\n got %+v\nwant %+v", c, d)
	}
}

// TestParseFileErrorsNameTheKey: every bad file fails with the key's path
// in the message and never with the secret it may hold.
func TestParseFileErrorsNameTheKey(t *testing.T) {
	tests := []struct {
		name, file, field string
	}{
		{"unknown top key", "colour: blue", "colour"},
		{"unknown pool field", "pools: {api: {weight: 3}}", "pools.api.weight"},
		{"unknown pool", "pools: {openai: {}}", "pools.openai"},
		{"inline api_key", "pools: {api: {credentials: [{name: a, base_url: 'http://x', api_key: sk-secret-123}]}}", "pools.api.credentials[0].api_key"},
		{"missing base_url", "pools: {api: {credentials: [{name: a, api_key_env: K}]}}", "pools.api.credentials[0].base_url"},
		{"duplicate credential", "pools: {api: {credentials: [{name: a, base_url: 'http://x', api_key_env: K}]}, zdr: {credentials: [{name: a, base_url: 'http://y', api_key_env: K}]}}", "name"},
		{"bad duration", "catalog_ttl: soon", "catalog_ttl"},
		{"negative duration", "runtime: {deadline: -5s}", "runtime.deadline"},
		{"bad auth_rest", "pools: {api: {auth_rest: 5 minutes}}", "pools.api.auth_rest"},
		{"no key source", "pools: {api: {credentials: [{name: a, base_url: 'http://x'}]}}", "pools.api.credentials[0]"},
		{"two key sources", "pools: {api: {credentials: [{name: a, base_url: 'http://x', api_key_env: K, api_key_file: f}]}}", "pools.api.credentials[0]"},
		{"bad base_url", "pools: {api: {credentials: [{name: a, base_url: 'ftp://x', api_key_env: K}]}}", "pools.api.credentials[0].base_url"},
		{"bad log level", "log: {level: loud}", "log.level"},
		{"bad listen", "bridge: {listen: localhost}", "bridge.listen"},
		{"duplicate key", "catalog_ttl: 1m\ncatalog_ttl: 2m", "catalog_ttl"},
		{"model in two buckets", "pools: {api: {quota_buckets: {a: [m], b: [m]}}}", "pools.api.quota_buckets.b"},
		{"bad glob", "pools: {api: {credentials: [{name: a, base_url: 'http://x', api_key_env: K, visibility: {allow: ['[']}}]}}", "pools.api.credentials[0].visibility"},
		{"unknown credential field", "pools: {api: {credentials: [{name: a, colour: red}]}}", "pools.api.credentials[0].colour"},
		{"bad sync", "ledger: {synchronous: sometimes}", "ledger.synchronous"},
		{"not a mapping", "runtime: 5", "runtime"},
		{"bad bool", "pools: {api: {prefer_active: maybe}}", "pools.api.prefer_active"},
		// Aliases are refused by name, not as a wrong type: a walker that
		// followed them would let a small file expand without bound.
		{"alias value", "pools:\n  api:\n    credentials:\n      - {name: a, base_url: &u 'http://x', api_key_env: K}\n      - {name: b, base_url: *u, api_key_env: K}", "pools.api.credentials[1].base_url"},
		{"alias list", "pools:\n  api:\n    credentials:\n      - {name: a, base_url: 'http://x', api_key_env: K, visibility: {allow: &g ['a*']}}\n      - {name: b, base_url: 'http://x', api_key_env: L, visibility: {allow: *g}}", "pools.api.credentials[1].visibility.allow"},
		{"alias section", "runtime: &r {deadline: 5s}\nbridge: *r", "bridge"},
		{"alias spec setting", "model_cooldown: {max_seconds: &m 60}\nlearned_cooldown: {mode: *m}", "learned_cooldown.mode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseFile([]byte(tt.file))
			if err == nil {
				err = c.Validate()
			}
			if err == nil {
				t.Fatal("accepted")
			}
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not a *FieldError", err)
			}
			if !strings.Contains(fe.Field, tt.field) {
				t.Errorf("error names %q, want %q (%v)", fe.Field, tt.field, err)
			}
			if strings.Contains(err.Error(), "sk-secret") {
				t.Errorf("error echoes the inline key: %v", err)
			}
			if strings.HasPrefix(tt.name, "alias") && !strings.Contains(err.Error(), "alias") {
				t.Errorf("error %v does not say the value is an alias", err)
			}
		})
	}
}

// A file of comments alone (every line commented out) is the defaults, as
// an empty one is.
func TestParseFileCommentsOnlyIsTheDefaults(t *testing.T) {
	for _, file := range []string{"", "\n  \n", "{}\n", "# every setting commented out\n  # catalog_ttl: 5m\n\n"} {
		c, err := ParseFile([]byte(file))
		if err != nil {
			t.Errorf("ParseFile(%q): %v, want the defaults", file, err)
			continue
		}
		if !reflect.DeepEqual(c, Default()) {
			t.Errorf("ParseFile(%q) = %+v, want the defaults", file, c)
		}
	}
	if Blank([]byte("# a comment\ncatalog_ttl: 5m # and another\n")) {
		t.Error("a file with a setting is blank")
	}
}

func TestSetOverridesNameTheKey(t *testing.T) {
	c := Default()
	if err := c.Set("runtime.deadline", "90s"); err != nil || c.Runtime.Deadline != 90*time.Second {
		t.Fatalf("Set runtime.deadline = %v, %v", c.Runtime.Deadline, err)
	}
	if err := c.Set("bridge.allowed_origins", "http://a.test, http://b.test"); err != nil || len(c.Bridge.AllowedOrigins) != 2 {
		t.Fatalf("Set allowed_origins = %v, %v", c.Bridge.AllowedOrigins, err)
	}
	err := c.Set("catalog_ttl", "eventually")
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "catalog_ttl" {
		t.Errorf("bad duration error = %v, want FieldError for catalog_ttl", err)
	}
	for _, k := range Keys {
		if err := c.Set(k, ""); err != nil && strings.Contains(err.Error(), "unknown key") {
			t.Errorf("Keys lists %q but Set does not know it", k)
		}
	}
	if EnvName("runtime.listen") != "ROTOR_RUNTIME_LISTEN" {
		t.Errorf("EnvName = %q", EnvName("runtime.listen"))
	}
}

func env(m map[string]string) Lookup {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func strp(s string) *string { return &s }

// Spec (model-cooldown.md, "Enable with"/"Disable with"): default off,
// empty values use defaults, whitespace ignored, maximum an integer from 1
// through 2147483647, malformed settings logged once per setting name
// without the value and disabling the feature.
func TestModelCooldownSettings(t *testing.T) {
	tests := []struct {
		name        string
		env         map[string]string
		fileEnabled *string
		fileMax     *string
		wantEnabled bool
		wantMax     int64
		wantWarn    []string
	}{
		{"default off", nil, nil, nil, false, 3600, nil},
		{"enabled", map[string]string{"MODEL_COOLDOWN_ENABLED": "true"}, nil, nil, true, 3600, nil},
		{"whitespace ignored", map[string]string{"MODEL_COOLDOWN_ENABLED": "  true\t", "MODEL_COOLDOWN_MAX_SECONDS": " 120 "}, nil, nil, true, 120, nil},
		{"empty enabled means default", map[string]string{"MODEL_COOLDOWN_ENABLED": ""}, strp("true"), nil, false, 3600, nil},
		{"empty max means 3600", map[string]string{"MODEL_COOLDOWN_ENABLED": "true", "MODEL_COOLDOWN_MAX_SECONDS": ""}, nil, strp("10"), true, 3600, nil},
		{"explicit false", map[string]string{"MODEL_COOLDOWN_ENABLED": "false"}, strp("true"), nil, false, 3600, nil},
		{"env wins over file", map[string]string{"MODEL_COOLDOWN_MAX_SECONDS": "60"}, strp("true"), strp("90"), true, 60, nil},
		{"rotor prefix after spec name", map[string]string{"ROTOR_MODEL_COOLDOWN_ENABLED": "true"}, nil, nil, true, 3600, nil},
		{"spec name wins over rotor prefix", map[string]string{"MODEL_COOLDOWN_ENABLED": "false", "ROTOR_MODEL_COOLDOWN_ENABLED": "true"}, nil, nil, false, 3600, nil},
		{"file value", nil, strp("true"), strp("15"), true, 15, nil},
		{"malformed enabled disables", map[string]string{"MODEL_COOLDOWN_ENABLED": "sometimes"}, nil, nil, false, 3600, []string{"MODEL_COOLDOWN_ENABLED"}},
		{"max zero disables", map[string]string{"MODEL_COOLDOWN_ENABLED": "true", "MODEL_COOLDOWN_MAX_SECONDS": "0"}, nil, nil, false, 3600, []string{"MODEL_COOLDOWN_MAX_SECONDS"}},
		{"max above int32 disables", map[string]string{"MODEL_COOLDOWN_ENABLED": "true", "MODEL_COOLDOWN_MAX_SECONDS": "2147483648"}, nil, nil, false, 3600, []string{"MODEL_COOLDOWN_MAX_SECONDS"}},
		{"max at int32 accepted", map[string]string{"MODEL_COOLDOWN_ENABLED": "true", "MODEL_COOLDOWN_MAX_SECONDS": "2147483647"}, nil, nil, true, 2147483647, nil},
		{"max fraction disables", map[string]string{"MODEL_COOLDOWN_ENABLED": "true", "MODEL_COOLDOWN_MAX_SECONDS": "1.5"}, nil, nil, false, 3600, []string{"MODEL_COOLDOWN_MAX_SECONDS"}},
		{"max signed disables", map[string]string{"MODEL_COOLDOWN_ENABLED": "true", "MODEL_COOLDOWN_MAX_SECONDS": "+5"}, nil, nil, false, 3600, []string{"MODEL_COOLDOWN_MAX_SECONDS"}},
		{"both malformed warn once each", map[string]string{"MODEL_COOLDOWN_ENABLED": "x", "MODEL_COOLDOWN_MAX_SECONDS": "y"}, nil, nil, false, 3600, []string{"MODEL_COOLDOWN_ENABLED", "MODEL_COOLDOWN_MAX_SECONDS"}},
		{"malformed file value disables", nil, strp("ja"), nil, false, 3600, []string{"MODEL_COOLDOWN_ENABLED"}},
		// A boolean is true, 1, yes or on (false, 0, no or off) in any case.
		{"TRUE", map[string]string{"MODEL_COOLDOWN_ENABLED": "TRUE"}, nil, nil, true, 3600, nil},
		{"Yes", map[string]string{"MODEL_COOLDOWN_ENABLED": "Yes"}, nil, nil, true, 3600, nil},
		{"on", map[string]string{"MODEL_COOLDOWN_ENABLED": "on"}, nil, nil, true, 3600, nil},
		{"1", map[string]string{"MODEL_COOLDOWN_ENABLED": "1"}, nil, nil, true, 3600, nil},
		{"OFF over the file", map[string]string{"MODEL_COOLDOWN_ENABLED": "OFF"}, strp("true"), nil, false, 3600, nil},
		{"file On", nil, strp("On"), nil, true, 3600, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var warned []string
			got := ResolveModelCooldown(env(tt.env), tt.fileEnabled, tt.fileMax, func(s, _ string) { warned = append(warned, s) })
			if got.Enabled != tt.wantEnabled || got.MaxSeconds != tt.wantMax {
				t.Errorf("got enabled=%v max=%d, want %v %d", got.Enabled, got.MaxSeconds, tt.wantEnabled, tt.wantMax)
			}
			if !reflect.DeepEqual(warned, tt.wantWarn) {
				t.Errorf("warnings %v, want %v", warned, tt.wantWarn)
			}
		})
	}
}

func TestLearnedSettings(t *testing.T) {
	tests := []struct {
		name        string
		env         map[string]string
		wantMode    string
		wantStorage string
		wantPolicy  string
		wantWarn    []string
	}{
		{"default off", nil, "off", "memory", "{}", nil},
		{"empty uses defaults", map[string]string{"LEARNED_COOLDOWN_MODE": "", "LEARNED_COOLDOWN_POLICY_JSON": " "}, "off", "memory", "{}", nil},
		{"shadow", map[string]string{"LEARNED_COOLDOWN_MODE": "shadow", "LEARNED_COOLDOWN_POLICY_JSON": `{"buckets":[]}`}, "shadow", "memory", `{"buckets":[]}`, nil},
		{"apply sqlite", map[string]string{"LEARNED_COOLDOWN_MODE": "apply", "INTELLIGENCE_STORAGE_BACKEND": "sqlite"}, "apply", "sqlite", "{}", nil},
		{"d1 alias", map[string]string{"LEARNED_COOLDOWN_MODE": "apply", "INTELLIGENCE_STORAGE_BACKEND": "d1"}, "apply", "sqlite", "{}", nil},
		// The backend is read in any case.
		{"SQLite", map[string]string{"LEARNED_COOLDOWN_MODE": "apply", "INTELLIGENCE_STORAGE_BACKEND": "SQLite"}, "apply", "sqlite", "{}", nil},
		{"D1", map[string]string{"LEARNED_COOLDOWN_MODE": "shadow", "INTELLIGENCE_STORAGE_BACKEND": "D1"}, "shadow", "sqlite", "{}", nil},
		{"MEMORY", map[string]string{"LEARNED_COOLDOWN_MODE": "shadow", "INTELLIGENCE_STORAGE_BACKEND": "MEMORY"}, "shadow", "memory", "{}", nil},
		{"malformed mode disables", map[string]string{"LEARNED_COOLDOWN_MODE": "always"}, "off", "memory", "{}", []string{"LEARNED_COOLDOWN_MODE"}},
		{"malformed backend disables", map[string]string{"LEARNED_COOLDOWN_MODE": "apply", "INTELLIGENCE_STORAGE_BACKEND": "redis"}, "off", "memory", "{}", []string{"INTELLIGENCE_STORAGE_BACKEND"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var warned []string
			got := ResolveLearned(env(tt.env), nil, nil, nil, func(s, _ string) { warned = append(warned, s) })
			if got.Mode != tt.wantMode || got.Storage != tt.wantStorage || got.PolicyJSON != tt.wantPolicy {
				t.Errorf("got %+v, want mode %s storage %s policy %s", got, tt.wantMode, tt.wantStorage, tt.wantPolicy)
			}
			if !reflect.DeepEqual(warned, tt.wantWarn) {
				t.Errorf("warnings %v, want %v", warned, tt.wantWarn)
			}
		})
	}
}

// FuzzParseFile: the loader never panics, and whatever it accepts and
// validates re-validates after a second parse of the same bytes.
func FuzzParseFile(f *testing.F) {
	f.Add([]byte(goodFile))
	f.Add(Starter)
	f.Add([]byte("pools: {api: {credentials: [{name: a, api_key: x}]}}"))
	f.Add([]byte("runtime: {deadline: 7d12h}"))
	f.Add([]byte("{"))
	f.Add([]byte("- a\n- b"))
	f.Add([]byte("pools: !!binary aGVsbG8="))
	f.Add([]byte("a: &x [*x]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseFile(data)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v is not a *FieldError", err)
			}
			return
		}
		if c.Validate() != nil {
			return
		}
		c2, err := ParseFile(data)
		if err != nil || c2.Validate() != nil {
			t.Fatalf("second parse differs: %v", err)
		}
	})
}

// Issue 14, item 17: a malformed spec setting is reported under the name
// the user must fix: the file's YAML key, or the variable that was set.
func TestMalformedSpecSettingNamedWhereItWasRead(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		file string
		want []string
	}{
		{"file", nil, "model_cooldown: {enabled: maybe, max_seconds: x}\nlearned_cooldown: {mode: loud, storage: redis}\n",
			[]string{"model_cooldown.enabled", "model_cooldown.max_seconds", "learned_cooldown.mode", "learned_cooldown.storage"}},
		{"spec variable", map[string]string{"MODEL_COOLDOWN_MAX_SECONDS": "x"}, "", []string{"MODEL_COOLDOWN_MAX_SECONDS"}},
		{"rotor variable over the file", map[string]string{"ROTOR_LEARNED_COOLDOWN_MODE": "loud"}, "learned_cooldown: {mode: shadow}\n", []string{"ROTOR_LEARNED_COOLDOWN_MODE"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseFile([]byte(tt.file))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			c.ResolveSpec(env(tt.env), func(_, source string) { got = append(got, source) })
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("warned %v, want %v", got, tt.want)
			}
		})
	}
}

// The numeric ranges the README states are exact: ledger.max_conns is 1
// through 1000, runtime.max_buffered_mb at least 65 (a full 64 MiB body and
// the byte that tells it is not larger), and a listen port at most 65535.
// A value one past either end is refused with a FieldError naming the key,
// at start, instead of being taken (and failing later in a way that names
// no key, or not at all); the end values themselves are accepted.
func TestValidateRangeEnds(t *testing.T) {
	tests := []validateCase{
		{"max_conns 1", func(c *Config) { c.Ledger.MaxConns = 1 }, ""},
		{"max_conns 1000", func(c *Config) { c.Ledger.MaxConns = 1000 }, ""},
		{"max_conns 0", func(c *Config) { c.Ledger.MaxConns = 0 }, "ledger.max_conns"},
		{"max_conns 1001", func(c *Config) { c.Ledger.MaxConns = 1001 }, "ledger.max_conns"},
		{"max_buffered_mb 65", func(c *Config) { c.Runtime.MaxBufferedMB = 65 }, ""},
		{"max_buffered_mb 64", func(c *Config) { c.Runtime.MaxBufferedMB = 64 }, "runtime.max_buffered_mb"},
		{"max_buffered_mb 1 TiB", func(c *Config) { c.Runtime.MaxBufferedMB = 1 << 20 }, ""},
		// 2^44+1 MiB overflowed int64 bytes and wrapped to 1 MiB.
		{"max_buffered_mb 2^44+1", func(c *Config) { c.Runtime.MaxBufferedMB = 1<<44 + 1 }, "runtime.max_buffered_mb"},
		{"max_buffered_mb over 1 TiB", func(c *Config) { c.Runtime.MaxBufferedMB = 1<<20 + 1 }, "runtime.max_buffered_mb"},
		{"runtime port 65535", func(c *Config) { c.Runtime.Listen = "127.0.0.1:65535" }, ""},
		{"runtime port 65536", func(c *Config) { c.Runtime.Listen = "127.0.0.1:65536" }, "runtime.listen"},
		{"bridge port 65536", func(c *Config) { c.Bridge.Listen = "127.0.0.1:65536" }, "bridge.listen"},
	}
	checkValidate(t, tests)
}

// Values that could never work are refused at start, naming the key,
// instead of being taken and failing silently: an allowed origin with a
// path ("https://app.example/app") never equals the Origin a browser sends
// (scheme://host[:port] only), so that app would never get CORS headers;
// and an api_key_env that is not a variable name ("PROVIDER-KEY") names a
// variable no shell can set, so the credential could never find its key.
func TestValidateRefusesOriginPathAndBadEnvName(t *testing.T) {
	cred := func(env string) map[string]Pool {
		return map[string]Pool{PoolAPI: {AuthRest: time.Minute, Credentials: []Credential{
			{Name: "a", Enabled: true, Region: "us", BaseURL: "https://p.example", APIKeyEnv: env},
		}}}
	}
	tests := []validateCase{
		{"origin", func(c *Config) { c.Runtime.AllowedOrigins = []string{"https://app.example"} }, ""},
		{"origin with slash", func(c *Config) { c.Bridge.AllowedOrigins = []string{"http://127.0.0.1:3000/"} }, ""},
		{"runtime origin with a path", func(c *Config) {
			c.Runtime.AllowedOrigins = []string{"https://ok.example", "https://app.example/app"}
		}, "runtime.allowed_origins[1]"},
		{"bridge origin with a path", func(c *Config) { c.Bridge.AllowedOrigins = []string{"http://localhost:3000/ui"} }, "bridge.allowed_origins[0]"},
		{"api_key_env", func(c *Config) { c.Pools = cred("PROVIDER_KEY_A") }, ""},
		{"api_key_env with a dash", func(c *Config) { c.Pools = cred("PROVIDER-KEY") }, "pools.api.credentials[0].api_key_env"},
		{"api_key_env with a leading digit", func(c *Config) { c.Pools = cred("1KEY") }, "pools.api.credentials[0].api_key_env"},
		{"api_key_env with a dollar", func(c *Config) { c.Pools = cred("$KEY") }, "pools.api.credentials[0].api_key_env"},
		// Long names are names, in either case, with a few digits.
		{"api_key_env long", func(c *Config) { c.Pools = cred("OPENAI_API_KEY_TEAM_PLATFORM_2026") }, ""},
		{"api_key_env long lowercase", func(c *Config) { c.Pools = cred("openai_api_key_for_team_b2") }, ""},
	}
	checkValidate(t, tests)
}

// A ROTOR_* variable or flag is read the way a shell user writes it: the
// enumerated keys (log level and format, ledger.synchronous,
// routes.default_pool) take any case, so ROTOR_LOG_LEVEL=DEBUG is debug
// rather than a start refused for "DEBUG"; and a list key takes
// comma-separated values where empty items (a trailing comma, a doubled
// one, or an empty variable) are dropped, so they never become an empty
// origin that fails validation, and an empty variable clears the list.
func TestSetFoldsCaseAndDropsEmptyListItems(t *testing.T) {
	c := Default()
	for key, value := range map[string]string{
		"log.level": "DEBUG", "log.format": "Json", "ledger.synchronous": "FULL", "routes.default_pool": " ZDR ",
	} {
		if err := c.Set(key, value); err != nil {
			t.Fatalf("Set(%q, %q) = %v", key, value, err)
		}
	}
	if c.Log.Level != "debug" || c.Log.Format != "json" || c.Ledger.Synchronous != "full" || c.Routes.DefaultPool != "zdr" {
		t.Errorf("folded values = %q %q %q %q, want debug json full zdr", c.Log.Level, c.Log.Format, c.Ledger.Synchronous, c.Routes.DefaultPool)
	}
	if err := c.Set("bridge.allowed_origins", "http://a.test,, http://b.test ,"); err != nil {
		t.Fatal(err)
	}
	if want := []string{"http://a.test", "http://b.test"}; !reflect.DeepEqual(c.Bridge.AllowedOrigins, want) {
		t.Errorf("allowed_origins = %q, want %q", c.Bridge.AllowedOrigins, want)
	}
	c.Runtime.AllowedOrigins = []string{"http://c.test"}
	if err := c.Set("runtime.allowed_origins", ""); err != nil || len(c.Runtime.AllowedOrigins) != 0 {
		t.Errorf("Set(runtime.allowed_origins, \"\") = %q, %v; want the list cleared", c.Runtime.AllowedOrigins, err)
	}
	if err := c.Validate(); err != nil {
		t.Errorf("Validate = %v", err)
	}
}

// The configuration file is capped at MaxFileSize (1 MiB) bytes: a file of
// exactly that size is read, one byte more is refused as a whole-file
// error, before YAML parsing starts, so a runaway file cannot make start
// parse an unbounded document.
func TestParseFileSizeCap(t *testing.T) {
	head := "catalog_ttl: 2m\n"
	exact := head + strings.Repeat("#", MaxFileSize-len(head)-1) + "\n"
	c, err := ParseFile([]byte(exact))
	if err != nil || c.CatalogTTL != 2*time.Minute {
		t.Fatalf("ParseFile of %d bytes = %v, catalog_ttl %v; want it read", len(exact), err, c.CatalogTTL)
	}
	_, err = ParseFile([]byte(exact + "\n"))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "(file)" || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("ParseFile of %d bytes = %v, want a (file) error saying it is larger than %d bytes", len(exact)+1, err, MaxFileSize)
	}
}

// validateCase is a change to the default config and the key Validate
// must name ("" means accepted).
type validateCase struct {
	name  string
	set   func(*Config)
	field string
}

func checkValidate(t *testing.T, tests []validateCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.set(&c)
			err := c.Validate()
			if tt.field == "" {
				if err != nil {
					t.Errorf("Validate = %v, want accepted", err)
				}
				return
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Errorf("Validate = %v, want a FieldError naming %s", err, tt.field)
			}
		})
	}
}

// A key pasted into a URL or in place of a variable or file name is refused
// without being echoed: the error reaches the terminal, the bridge log and
// a reload's error body (README, Security: keys never reach a log line or
// an error body). Each error still names the field.
func TestURLAndEnvNameErrorsDoNotEchoTheValue(t *testing.T) {
	const secret = "sk-SECRET0123456789abcdef"
	cred := func(c Credential) map[string]Pool {
		c.Name, c.Enabled, c.Region = "a", true, "us"
		return map[string]Pool{PoolAPI: {AuthRest: time.Minute, Credentials: []Credential{c}}}
	}
	base := func(u string) func(*Config) {
		return func(c *Config) { c.Pools = cred(Credential{BaseURL: u, APIKeyEnv: "KEY"}) }
	}
	tests := []struct {
		name, field string
		set         func(*Config)
	}{
		{"base_url query", "pools.api.credentials[0].base_url", base("https://api.example/?key=" + secret)},
		{"base_url fragment", "pools.api.credentials[0].base_url", base("https://api.example/#" + secret)},
		{"base_url user info", "pools.api.credentials[0].base_url", base("https://u:" + secret + "@api.example/")},
		{"base_url unparsable", "pools.api.credentials[0].base_url", base("https://u:" + secret + "@api.example:port/")},
		{"base_url is the key", "pools.api.credentials[0].base_url", base(secret)},
		{"base_url without a host", "pools.api.credentials[0].base_url", base("https:///" + secret)},
		{"base_url scheme", "pools.api.credentials[0].base_url", base("ftp://api.example/" + secret)},
		{"runtime_url query", "bridge.runtime_url", func(c *Config) { c.Bridge.RuntimeURL = "http://127.0.0.1:8788/?token=" + secret }},
		{"api_key_env is the key", "pools.api.credentials[0].api_key_env", func(c *Config) {
			c.Pools = cred(Credential{BaseURL: "https://api.example", APIKeyEnv: secret})
		}},
		// Keys of letters, digits and _ only pass as variable names.
		{"api_key_env is an underscore key", "pools.api.credentials[0].api_key_env", func(c *Config) {
			c.Pools = cred(Credential{BaseURL: "https://api.example", APIKeyEnv: "gsk_R4nd0mSECRET3cr3tK3yV4lu3AbCdEf0123"})
		}},
		{"api_key_env is a hex key", "pools.api.credentials[0].api_key_env", func(c *Config) {
			c.Pools = cred(Credential{BaseURL: "https://api.example", APIKeyEnv: "aSECRET9f3c1e0b7d2a4f6e8c0b1d3f5a7e9c2b4"})
		}},
		// A missing key file is echoed as "file PATH is missing" by config
		// check, the bridge's log and every 503 no_credentials answer.
		{"api_key_file is the key", "pools.api.credentials[0].api_key_file", func(c *Config) {
			c.Pools = cred(Credential{BaseURL: "https://api.example", APIKeyFile: "sk-proj-SECRET0123456789abcdefXYZ"})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.set(&c)
			err := c.Validate()
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Fatalf("Validate = %v, want a FieldError naming %s", err, tt.field)
			}
			if strings.Contains(err.Error(), "SECRET") {
				t.Errorf("error echoes the value: %v", err)
			}
		})
	}
}

// A key file's name of words and dates, or one with a folder or an
// extension, is a file name, never taken for a key.
func TestKeyFileNamesAreNotKeys(t *testing.T) {
	for _, name := range []string{"openai-key-2026-12-06-prod", "team-a", "keys/sk-proj-Abc123dEf456gHi789jKl012mNo", "abc0123456789defghij0123.key", "PROVIDERKEYTEAMA20261206"} {
		c := Default()
		c.Pools = map[string]Pool{PoolAPI: {AuthRest: time.Minute, Credentials: []Credential{{Name: "a", Enabled: true, Region: "us", BaseURL: "https://api.example", APIKeyFile: name}}}}
		if err := c.Validate(); err != nil {
			t.Errorf("api_key_file %q: %v, want accepted", name, err)
		}
	}
}

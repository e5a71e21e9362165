package config

import (
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// Every duration key a ROTOR_* variable or flag may set is refused at 0,
// naming the key: a zero deadline, grace or timeout would cut every request
// (or none) instead of failing the start. So is a pool's auth_rest.
func TestEveryDurationKeyMustBePositive(t *testing.T) {
	for _, k := range Keys {
		c := Default()
		if _, ok := lookup(settings, k).ptr(&c).(*time.Duration); !ok {
			continue
		}
		t.Run(k, func(t *testing.T) {
			c := Default()
			if err := c.Set(k, "0s"); err != nil {
				t.Fatal(err)
			}
			var fe *FieldError
			if err := c.Validate(); !errors.As(err, &fe) || fe.Field != k {
				t.Errorf("%s=0s: Validate = %v, want a FieldError naming %s", k, err, k)
			}
		})
	}
	c, err := ParseFile([]byte("pools: {api: {auth_rest: 0s}}"))
	if err != nil {
		t.Fatal(err)
	}
	var fe *FieldError
	if err := c.Validate(); !errors.As(err, &fe) || fe.Field != "pools.api.auth_rest" {
		t.Errorf("auth_rest 0s: Validate = %v, want a FieldError naming pools.api.auth_rest", err)
	}
}

// Values that could never work are refused, naming the key; the ends of
// each rule are taken.
func TestValidateRefusesWhatCannotWork(t *testing.T) {
	cred := func(set func(*Credential)) func(*Config) {
		return func(c *Config) {
			cr := Credential{Name: "a", Enabled: true, Region: "us", BaseURL: "https://p.example", APIKeyEnv: "PROVIDER_KEY_A"}
			set(&cr)
			c.Pools = map[string]Pool{PoolAPI: {AuthRest: time.Minute, Credentials: []Credential{cr}}}
		}
	}
	f := "pools.api.credentials[0]"
	tests := []validateCase{
		{"busy_timeout 1ms", func(c *Config) { c.Ledger.BusyTimeout = time.Millisecond }, ""},
		{"busy_timeout 999us", func(c *Config) { c.Ledger.BusyTimeout = 999 * time.Microsecond }, "ledger.busy_timeout"},
		{"empty token_file", func(c *Config) { c.Runtime.TokenFile = "" }, "runtime.token_file"},
		// The file is case-sensitive: ZDR is no pool.
		{"default_pool ZDR", func(c *Config) { c.Routes.DefaultPool = "ZDR" }, "routes.default_pool"},
		{"synchronous off", func(c *Config) { c.Ledger.Synchronous = "off" }, "ledger.synchronous"},
		{"empty model in a bucket", func(c *Config) {
			c.Pools = map[string]Pool{PoolAPI: {AuthRest: time.Minute, QuotaBuckets: map[string][]string{"b": {"m", ""}}}}
		}, "pools.api.quota_buckets.b"},
		{"empty region", cred(func(cr *Credential) { cr.Region = "" }), f + ".region"},
		{"empty glob", cred(func(cr *Credential) { cr.Visibility.Deny = []string{""} }), f + ".visibility"},
		{"endpoint not a path", cred(func(cr *Credential) {
			cr.ModelProfiles = map[string]ModelProfile{"m": {SupportedEndpoints: []string{"v1/decisions"}}}
		}), f + ".model_profiles.m.supported_endpoints"},
		// The key heuristics' ends: 24 characters with 4 lowercase letters
		// and 4 digits is a key pasted as a name; 23 is a name.
		{"api_key_env 24 key-shaped", cred(func(cr *Credential) { cr.APIKeyEnv = "ABCDEFGHIJKLMNOPabcd1234" }), f + ".api_key_env"},
		{"api_key_env 23", cred(func(cr *Credential) { cr.APIKeyEnv = "ABCDEFGHIJKLMNOabcd1234" }), ""},
		{"api_key_file run of 20", cred(func(cr *Credential) { cr.APIKeyEnv, cr.APIKeyFile = "", "ABCDEFGHIJKLabcd1234" }), f + ".api_key_file"},
		{"api_key_file run of 19", cred(func(cr *Credential) { cr.APIKeyEnv, cr.APIKeyFile = "", "ABCDEFGHIJKabcd1234" }), ""},
	}
	checkValidate(t, tests)
}

// A credential without base_url says it is required, not that "" is a bad
// URL.
func TestMissingBaseURLSaysRequired(t *testing.T) {
	c, err := ParseFile([]byte("pools: {api: {credentials: [{name: a, api_key_env: K}]}}"))
	if err == nil {
		err = c.Validate()
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "pools.api.credentials[0].base_url" || !strings.Contains(err.Error(), "required") {
		t.Errorf("Validate = %v, want pools.api.credentials[0].base_url: is required", err)
	}
}

// A dotted key in the file is a key nobody wrote the schema for, even when
// it spells a nested one: "log.level: debug" is refused, not taken.
func TestParseFileRefusesDottedKey(t *testing.T) {
	_, err := ParseFile([]byte("log.level: debug"))
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "log.level" {
		t.Errorf("ParseFile = %v, want a FieldError naming log.level", err)
	}
}

// The README's defaults (Configuration).
func TestDocumentedDefaults(t *testing.T) {
	d := Default()
	if d.Ledger.Synchronous != "normal" {
		t.Errorf("ledger.synchronous default = %q, want normal", d.Ledger.Synchronous)
	}
	c, err := ParseFile([]byte("pools: {api: {credentials: [{name: a, base_url: 'http://x', api_key_env: K}]}}"))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Pools[PoolAPI]
	if p.AuthRest != 300*time.Second {
		t.Errorf("auth_rest default = %v, want 5m0s", p.AuthRest)
	}
	if r := p.Credentials[0].Region; r != "default" {
		t.Errorf("region default = %q, want default", r)
	}
}

// Every ROTOR_<KEY> variable the README names for a setting overrides
// that setting (is one of Keys): read from the README itself, so that a
// setting that stopped taking its variable is caught.
func TestEveryDocumentedVariableIsAKey(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	// The spec's own settings take ROTOR_ and the spec's name (spec.go).
	spec := []string{EnvModelCooldownEnabled, EnvModelCooldownMax, EnvLearnedMode, EnvLearnedPolicy, EnvStorageBackend}
	documented := 0
	for _, f := range settings {
		v := EnvName(f.key)
		if !regexp.MustCompile(`\b`+v+`\b`).Match(readme) || slices.Contains(spec, strings.TrimPrefix(v, "ROTOR_")) {
			continue
		}
		documented++
		if !slices.Contains(Keys, f.key) {
			t.Errorf("README documents %s, but it does not override %s", v, f.key)
		}
	}
	if documented < 20 {
		t.Errorf("README names %d settings' variables; want them all found (the README moved?)", documented)
	}
}

// The keys a reload refuses (shared/DESIGN.md, "Reload").
func TestRestartOnlyKeys(t *testing.T) {
	for _, k := range []string{
		"runtime.listen", "bridge.listen", "bridge.runtime_url", "runtime.token_file",
		"runtime.allowed_origins", "bridge.allowed_origins", "runtime.read_header_timeout",
		"runtime.read_timeout", "log.format", "model_cooldown.enabled", "learned_cooldown.storage",
		"ledger.url", "ledger.busy_timeout",
	} {
		if !RestartOnly(k) {
			t.Errorf("RestartOnly(%q) = false, want true", k)
		}
	}
	for _, k := range []string{"log.level", "catalog_ttl", "runtime.deadline", "pools"} {
		if RestartOnly(k) {
			t.Errorf("RestartOnly(%q) = true, want false", k)
		}
	}
}

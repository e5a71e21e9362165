package config

import (
	"strconv"
	"strings"
)

// Lookup reads a variable: the value and whether it is set at all.
type Lookup func(name string) (string, bool)

// Warn reports a malformed spec setting: setting is the spec's name
// (MODEL_COOLDOWN_MAX_SECONDS), source the name it was read under, which
// the user must fix: that variable, its ROTOR_-prefixed twin, or the file's
// key (model_cooldown.max_seconds). The value is never passed: it may be a
// secret pasted in the wrong place.
type Warn func(setting, source string)

// The settings the spec names.
const (
	EnvModelCooldownEnabled = "MODEL_COOLDOWN_ENABLED"
	EnvModelCooldownMax     = "MODEL_COOLDOWN_MAX_SECONDS"
	EnvLearnedMode          = "LEARNED_COOLDOWN_MODE"
	EnvLearnedPolicy        = "LEARNED_COOLDOWN_POLICY_JSON"
	EnvStorageBackend       = "INTELLIGENCE_STORAGE_BACKEND"
)

// MaxCooldownSeconds is the largest MODEL_COOLDOWN_MAX_SECONDS.
const MaxCooldownSeconds = 2147483647

// SpecSource is the name a spec setting is read under: the spec's
// variable when set, else its ROTOR_-prefixed twin when set, else the
// file's key. Warnings name it, so the user fixes the right place.
func SpecSource(env Lookup, name string) string {
	for _, n := range []string{name, "ROTOR_" + name} {
		if _, ok := env(n); ok {
			return n
		}
	}
	return specFileKey(name)
}

// specValue finds a spec setting by precedence (SpecSource); source is the
// name it was found under. A variable set to an empty (or blank) value
// means the default, and so does an empty file value.
func specValue(env Lookup, name string, file *string) (v string, set bool, source string) {
	source = SpecSource(env, name)
	if v, ok := env(source); ok {
		v = strings.TrimSpace(v)
		return v, v != "", source
	}
	if file != nil {
		v := strings.TrimSpace(*file)
		return v, v != "", source
	}
	return "", false, ""
}

// ResolveSpec resolves MODEL_COOLDOWN_*, LEARNED_COOLDOWN_* and
// INTELLIGENCE_STORAGE_BACKEND as the spec says: defaults for empty values,
// whitespace ignored, and a malformed value reported once by name (never by
// value) and disabling its feature.
func (c *Config) ResolveSpec(env Lookup, warn Warn) {
	c.ModelCooldown = ResolveModelCooldown(env, c.ModelCooldown.rawEnabled, c.ModelCooldown.rawMax, warn)
	adapt := c.LearnedCooldown.Adapt // rotor's own key, already validated
	c.LearnedCooldown = ResolveLearned(env, c.LearnedCooldown.rawMode, c.LearnedCooldown.rawPolicy, c.LearnedCooldown.rawStorage, warn)
	c.LearnedCooldown.Adapt = adapt
}

// ResolveModelCooldown parses the model cooldown settings. fileEnabled and
// fileMax are the file's raw values or nil.
func ResolveModelCooldown(env Lookup, fileEnabled, fileMax *string, warn Warn) ModelCooldown {
	out := Default().ModelCooldown
	malformed := false
	if v, set, src := specValue(env, EnvModelCooldownEnabled, fileEnabled); set {
		b, ok := parseBool(v)
		if !ok {
			warn(EnvModelCooldownEnabled, src)
			malformed = true
		}
		out.Enabled = b
	}
	if v, set, src := specValue(env, EnvModelCooldownMax, fileMax); set {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 || n > MaxCooldownSeconds || !allDigits(v) {
			warn(EnvModelCooldownMax, src)
			malformed = true
		} else {
			out.MaxSeconds = n
		}
	}
	if malformed {
		out.Enabled = false
	}
	return out
}

// ResolveLearned parses the learned cooldown settings. The policy JSON is
// passed through for package learned to validate.
func ResolveLearned(env Lookup, fileMode, filePolicy, fileStorage *string, warn Warn) LearnedCooldown {
	out := Default().LearnedCooldown
	malformed := false
	if v, set, src := specValue(env, EnvLearnedMode, fileMode); set {
		switch v {
		case "off", "shadow", "apply":
			out.Mode = v
		default:
			warn(EnvLearnedMode, src)
			malformed = true
		}
	}
	// The policy is JSON: keep it byte for byte apart from surrounding
	// blanks; package learned decides whether it is well formed.
	if v, set, _ := specValue(env, EnvLearnedPolicy, filePolicy); set {
		out.PolicyJSON = v
	}
	if v, set, src := specValue(env, EnvStorageBackend, fileStorage); set {
		switch strings.ToLower(v) {
		case "memory":
			out.Storage = "memory"
		case "sqlite", "d1":
			out.Storage = "sqlite"
		default:
			warn(EnvStorageBackend, src)
			malformed = true
		}
	}
	if malformed {
		out.Mode = "off"
	}
	return out
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func parseBool(s string) (bool, bool) {
	switch strings.ToLower(s) {
	case "true", "1", "yes", "on":
		return true, true
	case "false", "0", "no", "off":
		return false, true
	}
	return false, false
}

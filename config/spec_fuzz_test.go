package config

import (
	"strconv"
	"strings"
	"testing"
)

// FuzzCooldownSettings (issue 8, case 15): the cooldown settings parser
// (ResolveModelCooldown, ResolveLearned) never panics; a malformed value is
// warned about by its setting's name only, at most once, and disables its
// feature; every accepted value is in range. where picks, per setting, the
// spec's variable, the ROTOR_-prefixed one, the file, or nothing.
func FuzzCooldownSettings(f *testing.F) {
	f.Add("true", "3600", "apply", `{"buckets":[]}`, "sqlite", uint16(0))
	f.Add("  TRUE\t", " 120 ", "shadow", "{}", "d1", uint16(0x155))
	f.Add("sometimes", "0", "always", "", "redis", uint16(0x2aa))
	f.Add("yes", "2147483647", "off", "not json", "MEMORY", uint16(0x3ff))
	f.Add("1", "2147483648", "Apply", "{", "d2", uint16(0x0f0))
	f.Add("on", "+5", "", "\x00", "sqlite ", uint16(0x00f))
	f.Add("no", "1.5", "shadow\n", "sk-canary-pasted-here", "", uint16(0x111))
	f.Add("off", "-1", "apply", "{}", "Memory", uint16(0x333))
	f.Add("", "", "", "", "", uint16(0))
	f.Add("true", "９", "apply", "{}", "sqlite", uint16(0))
	f.Add("true", "0x10", "apply", "{}", "sqlite", uint16(0))
	f.Add("true", "00000000000000000000000000000000007", "apply", "{}", "sqlite", uint16(0))
	f.Fuzz(func(t *testing.T, enabled, max, mode, policy, storage string, where uint16) {
		values := map[string]string{
			EnvModelCooldownEnabled: enabled,
			EnvModelCooldownMax:     max,
			EnvLearnedMode:          mode,
			EnvLearnedPolicy:        policy,
			EnvStorageBackend:       storage,
		}
		order := []string{EnvModelCooldownEnabled, EnvModelCooldownMax, EnvLearnedMode, EnvLearnedPolicy, EnvStorageBackend}
		envVars := map[string]string{}
		file := map[string]*string{}
		for i, name := range order {
			v := values[name]
			switch (where >> (2 * i)) & 3 {
			case 0:
				envVars[name] = v
			case 1:
				envVars["ROTOR_"+name] = v
			case 2:
				file[name] = &v
			}
		}
		lookup := func(k string) (string, bool) { v, ok := envVars[k]; return v, ok }
		// effective is the raw value the parser must read for a setting, and
		// whether it counts as set (blank means the default).
		effective := func(name string) (string, bool) {
			for _, n := range []string{name, "ROTOR_" + name} {
				if v, ok := envVars[n]; ok {
					return strings.TrimSpace(v), strings.TrimSpace(v) != ""
				}
			}
			if p := file[name]; p != nil {
				return strings.TrimSpace(*p), strings.TrimSpace(*p) != ""
			}
			return "", false
		}

		warned := map[string]int{}
		warn := func(setting, _ string) { warned[setting]++ }
		mc := ResolveModelCooldown(lookup, file[EnvModelCooldownEnabled], file[EnvModelCooldownMax], warn)
		lc := ResolveLearned(lookup, file[EnvLearnedMode], file[EnvLearnedPolicy], file[EnvStorageBackend], warn)

		for setting, n := range warned {
			if _, known := values[setting]; !known || setting == EnvLearnedPolicy {
				// The warning carries a name, never a value: anything else
				// may be a secret pasted into the wrong variable.
				t.Fatalf("warned about %q, which is not a setting name", setting)
			}
			if n != 1 {
				t.Errorf("warned %d times about %s, want once", n, setting)
			}
		}

		// Model cooldown: accepted values are in range; a malformed one
		// disables the feature.
		if mc.MaxSeconds < 1 || mc.MaxSeconds > MaxCooldownSeconds {
			t.Errorf("MaxSeconds = %d, outside 1..%d", mc.MaxSeconds, MaxCooldownSeconds)
		}
		if (warned[EnvModelCooldownEnabled] > 0 || warned[EnvModelCooldownMax] > 0) && mc.Enabled {
			t.Error("a malformed model cooldown setting left the feature enabled")
		}
		if v, set := effective(EnvModelCooldownMax); set && warned[EnvModelCooldownMax] == 0 {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n != mc.MaxSeconds {
				t.Errorf("max %q accepted as %d", v, mc.MaxSeconds)
			}
		} else if mc.MaxSeconds != DefaultMaxCooldown {
			t.Errorf("max unset or malformed, MaxSeconds = %d, want the default %d", mc.MaxSeconds, DefaultMaxCooldown)
		}
		if v, set := effective(EnvModelCooldownEnabled); mc.Enabled && (!set || !strings.EqualFold(v, "true") && v != "1" && !strings.EqualFold(v, "yes") && !strings.EqualFold(v, "on")) {
			t.Errorf("enabled from %q (set %v)", v, set)
		}

		// Learned cooldown.
		switch lc.Mode {
		case "off", "shadow", "apply":
		default:
			t.Errorf("Mode = %q", lc.Mode)
		}
		switch lc.Storage {
		case "memory", "sqlite":
		default:
			t.Errorf("Storage = %q", lc.Storage)
		}
		if (warned[EnvLearnedMode] > 0 || warned[EnvStorageBackend] > 0) && lc.Mode != "off" {
			t.Errorf("a malformed learned setting left mode %q", lc.Mode)
		}
		if v, set := effective(EnvLearnedMode); lc.Mode != "off" && (!set || v != lc.Mode) {
			t.Errorf("mode %q from %q (set %v)", lc.Mode, v, set)
		}
		if v, set := effective(EnvLearnedPolicy); set && lc.PolicyJSON != v || !set && lc.PolicyJSON != "{}" {
			t.Errorf("policy %q from %q (set %v): kept byte for byte apart from surrounding blanks, or the default", lc.PolicyJSON, v, set)
		}
	})
}

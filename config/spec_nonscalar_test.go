package config

import (
	"reflect"
	"testing"
)

// TestNonScalarSpecSettingIsMalformedNotFatal: DESIGN says the spec's
// settings behave as the spec says wherever they come from: a malformed
// value logs one warning (naming where it was read, never the value) and
// disables its feature. A YAML list or mapping where the file wants the
// setting's one value is such a malformed value, not a config error that
// stops rotor (exit 2).
func TestNonScalarSpecSettingIsMalformedNotFatal(t *testing.T) {
	for _, tt := range []struct{ file, warn string }{
		{"learned_cooldown: {mode: shadow, policy_json: {buckets: []}}\n", "learned_cooldown.policy_json"},
		{"learned_cooldown: {mode: [shadow]}\n", "learned_cooldown.mode"},
		{"learned_cooldown: {mode: shadow, storage: [sqlite]}\n", "learned_cooldown.storage"},
	} {
		c, err := ParseFile([]byte(tt.file))
		if err != nil {
			t.Errorf("ParseFile(%q) = %v; want it loaded, the setting malformed", tt.file, err)
			continue
		}
		var warned []string
		c.ResolveSpec(env(nil), func(_, source string) { warned = append(warned, source) })
		// The policy is validated by package learned (the factory): here
		// only mode and storage warn; the policy must reach it malformed.
		if tt.warn == "learned_cooldown.policy_json" {
			if c.LearnedCooldown.Mode != "shadow" || c.LearnedCooldown.PolicyJSON == "" || c.LearnedCooldown.PolicyJSON == "{}" {
				t.Errorf("%q: resolved %+v; want mode shadow and a policy that does not parse", tt.file, c.LearnedCooldown)
			}
			continue
		}
		if !reflect.DeepEqual(warned, []string{tt.warn}) || c.LearnedCooldown.Mode != "off" {
			t.Errorf("%q: warned %v, mode %s; want [%s], off", tt.file, warned, c.LearnedCooldown.Mode, tt.warn)
		}
	}
}

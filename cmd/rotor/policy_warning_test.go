package main

import (
	"strings"
	"testing"
)

// TestMalformedPolicyWarningNamesTheEntry: README, Learned cooldown:
// a policy refused by rotor's own limits (a name with white space around
// it) is refused "with a warning naming the entry", never its value.
func TestMalformedPolicyWarningNamesTheEntry(t *testing.T) {
	f, _, errOut := testFactory(t)
	env := map[string]string{
		"LEARNED_COOLDOWN_MODE":        "shadow",
		"LEARNED_COOLDOWN_POLICY_JSON": `{"buckets":[{"provider":"api","model":"ok","quota_bucket":null},{"provider":"api","model":"sk-canary-77 ","quota_bucket":null}]}`,
	}
	f.LookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfg, err := f.Config()
	if err != nil {
		t.Fatal(err)
	}
	log := errOut.String()
	if cfg.LearnedCooldown.Mode != "off" || strings.Count(log, "malformed") != 1 {
		t.Fatalf("mode %s, log %q; want off and one warning", cfg.LearnedCooldown.Mode, log)
	}
	if strings.Contains(log, "sk-canary-77") {
		t.Fatalf("warning quotes the value: %q", log)
	}
	if !strings.Contains(log, "bucket 1") {
		t.Errorf("warning %q does not name the entry (bucket 1)", log)
	}
}

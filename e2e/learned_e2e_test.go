package e2e

import (
	"context"
	"strings"
	"testing"

	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/internal/testutil/ledgertest"
	"github.com/rotorhq/rotor/ledger"
)

// The bridge wires the learner: in shadow mode with SQLite storage, a
// natural throttle produces a shadow report (an opaque bucket digest, never
// a name or key) and a learned-state row in the ledger database.
func TestLearnedCooldownShadowWiredThroughBridge(t *testing.T) {
	e := newE2E(t)
	prov, keys := e.provider("")
	e.env = append(e.env,
		"MODEL_COOLDOWN_ENABLED=true",
		"LEARNED_COOLDOWN_MODE=shadow",
		`LEARNED_COOLDOWN_POLICY_JSON={"buckets":[{"provider":"api","model":"decide-mini","quota_bucket":null}]}`,
		"INTELLIGENCE_STORAGE_BACKEND=d1",
	)
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	tok := e.token()
	prov.Script(keys["team-a"], "", fp.RateLimited("2"))
	if r := call(t, "POST", b.url+"/v1/decisions", tok, decideBody); r.status != 200 || r.header.Get("X-Rotor-Attempts") != "2" {
		t.Fatalf("throttled then failed over: %d attempts %s", r.status, r.header.Get("X-Rotor-Attempts"))
	}
	b.stop()
	var report string
	for _, l := range strings.Split(b.stderr.String(), "\n") {
		if strings.Contains(l, "learned cooldown suggestion") {
			report = l
		}
	}
	if report == "" || !strings.Contains(report, "bucket=") || strings.Contains(report, "decide-mini") || strings.Contains(report, keys["team-a"]) {
		t.Errorf("shadow report = %q, want one with an opaque bucket digest only\n%s", report, b.stderr)
	}
	s, err := ledger.Open(context.Background(), e.db(), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n int
	if err := ledgertest.DB(t, e.db()).QueryRow(`SELECT COUNT(*) FROM learned_cooldown`).Scan(&n); err != nil || n != 1 {
		t.Errorf("learned_cooldown rows = %d, %v; want 1 (sqlite storage via the d1 alias)", n, err)
	}
}

// A malformed policy disables tuning with one warning naming the setting,
// never its value, and the bridge serves on.
func TestMalformedLearnedPolicyWarnsOnceAndServes(t *testing.T) {
	e := newE2E(t)
	e.provider("")
	e.env = append(e.env, "LEARNED_COOLDOWN_MODE=apply", `LEARNED_COOLDOWN_POLICY_JSON={"buckets":[{"provider":"api","model":"decide-*","quota_bucket":null,"secret":"sk-pasted"}]}`)
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	if r := call(t, "POST", b.url+"/v1/decisions", e.token(), decideBody); r.status != 200 {
		t.Errorf("bridge with a malformed policy answered %d", r.status)
	}
	b.stop()
	logs := b.stderr.String()
	if strings.Count(logs, "LEARNED_COOLDOWN_POLICY_JSON") != 1 || strings.Contains(logs, "sk-pasted") || strings.Contains(logs, "decide-*") {
		t.Errorf("want exactly one warning naming the setting without its value:\n%s", logs)
	}
}

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// scripts/quickstart.sh runs the README's Quick start against `rotor
// fake-provider` (init, the fake's keys and pools: section, config check,
// a budget, a price, the bridge, a chat completion and a decision, the
// report) and stops what it started; the fake provider exits 0 on SIGTERM.
// It never touches the caller's own rotor: with ROTOR_DB, ROTOR_RUN_DIR
// and ROTOR_CONFIG set (a user's exported settings), nothing is written
// there.
func TestQuickstartScriptAgainstFakeProvider(t *testing.T) {
	e := newE2E(t)
	tmp, mine := t.TempDir(), t.TempDir()
	env := append(e.env, "FAKE_LISTEN=127.0.0.1:0", "BRIDGE_LISTEN=127.0.0.1:0", "TMPDIR="+tmp,
		"ROTOR_DB="+filepath.Join(mine, "ledger.db"), "ROTOR_RUN_DIR="+filepath.Join(mine, "run"),
		"ROTOR_CONFIG="+filepath.Join(mine, "rotor.yaml"))
	r := e.exec(env, "bash", filepath.Join("..", "scripts", "quickstart.sh"))
	if r.code != 0 {
		t.Fatalf("quickstart.sh: exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	_, report, ok := strings.Cut(r.stdout, "$ rotor ledger report")
	if !ok {
		t.Fatalf("no report in:\n%s", r.stdout)
	}
	for _, want := range []string{"chat.completions", "gpt-4o-mini", "decisions", "decide-mini", "unknown"} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q:\n%s", want, report)
		}
	}
	for _, want := range []string{"export ROTOR_FAKE_KEY_1=", "config ok", "daily-tokens", `"usage"`, "quickstart: ok"} {
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("quickstart output lacks %q:\n%s\n%s", want, r.stdout, r.stderr)
		}
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("quickstart.sh left %v behind", left)
	}
	if touched, _ := os.ReadDir(mine); len(touched) != 0 {
		t.Errorf("quickstart.sh wrote %v into the caller's ROTOR_DB, ROTOR_RUN_DIR or ROTOR_CONFIG folder", touched)
	}
}

package e2e

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/testutil"
	"github.com/rotorhq/rotor/internal/testutil/ledgertest"
	"github.com/rotorhq/rotor/ledger"
)

// e2e is a temp home for one test and a way to run the binary in it.
type e2e struct {
	t    *testing.T
	bin  string // the rotor binary; its folder is first on PATH
	home string
	env  []string
}

// newE2E gives a test a temp home and the rotor binary built with tags
// (none: the release binary).
func newE2E(t *testing.T, tags ...string) *e2e {
	t.Helper()
	bin, err := rotorBinary(strings.Join(tags, ","))
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(t.TempDir(), "home")
	return &e2e{t: t, bin: bin, home: home, env: []string{"ROTOR_HOME=" + home, "PATH=" + filepath.Dir(bin) + ":" + os.Getenv("PATH"), "HOME=" + t.TempDir()}}
}

type result struct {
	stdout, stderr string
	code           int
}

func (e *e2e) run(args ...string) result {
	e.t.Helper()
	return e.exec(e.env, e.bin, args...)
}

// exec runs name with args in env, for at most a minute, and returns its
// output and exit code; a command that cannot run fails the test.
func (e *e2e) exec(env []string, name string, args ...string) result {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		e.t.Fatalf("run %s %v: %v", filepath.Base(name), args, err)
	}
	return result{out.String(), errb.String(), code}
}

func (e *e2e) mustRun(args ...string) result {
	e.t.Helper()
	r := e.run(args...)
	if r.code != 0 {
		e.t.Fatalf("rotor %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

func (e *e2e) db() string { return filepath.Join(e.home, "rotor.db") }

func parseJSON(t *testing.T, s string) []map[string]any {
	t.Helper()
	var v []map[string]any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("output is not a JSON array of objects: %v\n%s", err, s)
	}
	return v
}

func parseCSV(t *testing.T, s string) []map[string]string {
	t.Helper()
	rows, err := csv.NewReader(strings.NewReader(s)).ReadAll()
	if err != nil || len(rows) == 0 {
		t.Fatalf("output is not CSV with a header: %v\n%s", err, s)
	}
	var out []map[string]string
	for _, r := range rows[1:] {
		m := map[string]string{}
		for i, h := range rows[0] {
			m[h] = r[i]
		}
		out = append(out, m)
	}
	return out
}

func TestInitWritesStarterAndTokenAndNeverOverwrites(t *testing.T) {
	e := newE2E(t)
	e.mustRun("init")
	fi, err := os.Stat(e.home)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("home mode = %v, %v; want 0700", fi.Mode().Perm(), err)
	}
	for _, name := range []string{"bridge.token", "rotor.yaml", "rotor.db"} {
		fi, err := os.Stat(filepath.Join(e.home, name))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s mode = %v, %v; want 0600", name, fi.Mode().Perm(), err)
		}
	}
	tok, _ := os.ReadFile(filepath.Join(e.home, "bridge.token"))
	r := e.run("init")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "--force") {
		t.Errorf("second init: exit %d, stderr %q; want 2 mentioning --force", r.code, r.stderr)
	}
	if again, _ := os.ReadFile(filepath.Join(e.home, "bridge.token")); !bytes.Equal(tok, again) {
		t.Error("init without --force changed the token")
	}
	e.mustRun("init", "--force")
	if again, _ := os.ReadFile(filepath.Join(e.home, "bridge.token")); bytes.Equal(tok, again) {
		t.Error("init --force kept the old token")
	}
	// The starter validates and the default token's hash is stored.
	e.mustRun("config", "check")
	s, err := ledger.Open(context.Background(), e.db(), ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	toks, _ := s.ClientTokens(context.Background())
	if len(toks) != 1 || toks[0].Label != "default" {
		t.Errorf("stored tokens = %+v, want one labelled default", toks)
	}
	if strings.Contains(e.run("bridge", "--help").stdout+r.stdout+r.stderr, strings.TrimSpace(string(tok))) {
		t.Error("token printed")
	}
}

func TestBudgetAddListRemove(t *testing.T) {
	e := newE2E(t)
	if r := e.mustRun("budget", "add", "--tokens", "2000000", "--window", "day", "--name", "daily-tokens"); !strings.Contains(r.stdout, "at most 2000000 tokens per") {
		t.Errorf("budget add --tokens said %q", r.stdout)
	}
	e.mustRun("budget", "add", "--requests", "500", "--window", "1h")
	r := e.mustRun("budget", "add", "--cost", "12.5", "--window", "month")
	if !strings.Contains(r.stdout, "at most $12.5 per") || strings.Contains(r.stdout, "USD") {
		t.Errorf("budget add --cost said %q, want the limit in dollars once", r.stdout)
	}
	if !strings.Contains(r.stderr, "policy_blocked") {
		t.Errorf("--cost gave no warning about Decisions: %q", r.stderr)
	}
	list := parseJSON(t, e.mustRun("budget", "list", "--format", "json").stdout)
	if len(list) != 3 {
		t.Fatalf("budget list json = %v, want 3 budgets", list)
	}
	byName := map[string]map[string]any{}
	for _, b := range list {
		byName[b["name"].(string)] = b
	}
	if b := byName["daily-tokens"]; b["limit"] != float64(2000000) || b["state"] != "ok" || b["window"] != "day" || b["unit"] != "tokens" || b["frees_at"] != nil {
		t.Errorf("daily-tokens = %v", b)
	}
	if b := byName["requests-1h"]; b["limit"] != float64(500) || b["remaining"] != float64(500) {
		t.Errorf("requests-1h (default name) = %v", b)
	}
	if b := byName["cost-month"]; b["limit"] != float64(12500000) || b["unit"] != "micro_usd" {
		t.Errorf("cost-month = %v", b)
	}
	rows := parseCSV(t, e.mustRun("budget", "list", "--format", "csv").stdout)
	if len(rows) != 3 || rows[0]["name"] != "cost-month" || rows[0]["limit"] != "12500000" {
		t.Errorf("budget list csv = %v", rows)
	}
	if out := e.mustRun("budget", "list").stdout; !strings.Contains(out, "daily-tokens") || !strings.Contains(out, "FREES AT") {
		t.Errorf("table output:\n%s", out)
	}
	e.mustRun("budget", "remove", "cost-month")
	if r := e.run("budget", "remove", "cost-month"); r.code != ExitUsage || !strings.Contains(r.stderr, "cost-month") {
		t.Errorf("removing a missing budget: exit %d %q", r.code, r.stderr)
	}
	if n := len(parseJSON(t, e.mustRun("budget", "list", "--format", "json").stdout)); n != 2 {
		t.Errorf("%d budgets after remove, want 2", n)
	}
}

func TestBudgetAddReplaceIsIdempotent(t *testing.T) {
	e := newE2E(t)
	for _, n := range []string{"1000", "1000", "3000"} {
		e.mustRun("budget", "add", "--tokens", n, "--window", "day", "--name", "daily", "--replace")
	}
	list := parseJSON(t, e.mustRun("budget", "list", "--format", "json").stdout)
	if len(list) != 1 || list[0]["limit"] != float64(3000) {
		t.Errorf("after three --replace runs: %v, want one budget of 3000", list)
	}
}

// TestBadInputChangesNothing: every bad command exits 2 (the user must
// change it) or 1 (the environment is wrong) with a clear message, and
// leaves the database byte for byte as it was.
func TestBadInputChangesNothing(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(e *e2e)
		args    []string
		code    int
		message string
	}{
		{"two limits", nil, []string{"budget", "add", "--requests", "5", "--tokens", "5", "--window", "day"}, 2, "exactly one"},
		{"no limit", nil, []string{"budget", "add", "--window", "day"}, 2, "exactly one"},
		{"negative limit", nil, []string{"budget", "add", "--requests", "-5", "--window", "day"}, 2, "--requests"},
		{"zero limit", nil, []string{"budget", "add", "--tokens", "0", "--window", "day"}, 2, "--tokens"},
		{"bad cost", nil, []string{"budget", "add", "--cost", "1.0000001", "--window", "day"}, 2, "--cost"},
		{"bad window", nil, []string{"budget", "add", "--requests", "5", "--window", "fortnight"}, 2, "--window"},
		{"missing window", nil, []string{"budget", "add", "--requests", "5"}, 2, "--window"},
		{"bad name", nil, []string{"budget", "add", "--requests", "5", "--window", "day", "--name", "no spaces"}, 2, "--name"},
		{"unknown format", nil, []string{"budget", "list", "--format", "xml"}, 2, "--format"},
		{"unknown flag", nil, []string{"budget", "list", "--colour"}, 2, "colour"},
		{"duplicate without replace", nil, []string{"budget", "add", "--requests", "9", "--window", "day", "--name", "existing"}, 2, "--replace"},
		{"bad report key", nil, []string{"ledger", "report", "--by", "colour"}, 2, "--by"},
		{"since and from", nil, []string{"ledger", "report", "--since", "1h", "--from", "yesterday"}, 2, "--since"},
		{"bad from", nil, []string{"ledger", "report", "--from", "last tuesday"}, 2, "--from"},
		{"corrupt database", func(e *e2e) {
			os.WriteFile(e.db(), bytes.Repeat([]byte("not a database "), 100), 0o600)
		}, []string{"budget", "add", "--requests", "5", "--window", "day"}, 1, "rotor.db"},
		{"schema from a newer rotor", func(e *e2e) {
			s, _ := ledger.Open(context.Background(), e.db(), ledger.Options{})
			s.Close()
			db := ledgertest.DB(e.t, e.db())
			var v int
			db.QueryRow("PRAGMA user_version").Scan(&v)
			db.Exec(fmt.Sprintf("PRAGMA user_version = %d", v+7))
			db.Close()
		}, []string{"budget", "add", "--requests", "5", "--window", "day"}, 1, "newer"},
		{"read-only database", func(e *e2e) {
			testutil.MakeReadOnly(e.t, e.db())
		}, []string{"budget", "add", "--requests", "5", "--window", "hour", "--name", "other"}, 1, "read-only"},
		// A server records every request: on a ledger it cannot write it
		// would look healthy and answer every request 503.
		{"bridge on a read-only database", func(e *e2e) {
			e.mustRun("init") // nothing left for the server to write at start
			testutil.MakeReadOnly(e.t, e.db())
		}, []string{"bridge", "start", "--listen", "127.0.0.1:0"}, 1, "read-only"},
		{"runtime on a read-only database", func(e *e2e) {
			e.mustRun("init") // nothing left for the server to write at start
			testutil.MakeReadOnly(e.t, e.db())
		}, []string{"runtime", "start", "--listen", "127.0.0.1:0"}, 1, "read-only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newE2E(t)
			e.mustRun("budget", "add", "--requests", "5", "--window", "day", "--name", "existing")
			if tt.prepare != nil {
				tt.prepare(e)
			}
			before, err := os.ReadFile(e.db())
			if err != nil {
				t.Fatal(err)
			}
			r := e.run(tt.args...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.message) {
				t.Errorf("exit %d, stderr %q; want exit %d mentioning %q", r.code, r.stderr, tt.code, tt.message)
			}
			after, _ := os.ReadFile(e.db())
			if !bytes.Equal(before, after) {
				t.Error("database changed")
			}
		})
	}
}

func seedUsage(t *testing.T, dbPath string, at time.Time, n int) {
	t.Helper()
	s, err := ledger.Open(context.Background(), dbPath, ledger.Options{Clock: fixedClock(at)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("seed-%d-%d", at.Unix(), i)
		if err := s.Reserve(ctx, ledger.Reservation{RequestID: id, Operation: "decisions", Pool: "api", Model: "decide-mini", Client: "default"}, nil); err != nil {
			t.Fatal(err)
		}
		if err := s.Settle(ctx, ledger.Settlement{RequestID: id, Model: "decide-mini", Credential: []string{"team-a", "team-b"}[i%2], Status: 200,
			InputTokens: ledger.Known(7), OutputTokens: ledger.Known(3), TotalTokens: ledger.Known(10)}); err != nil {
			t.Fatal(err)
		}
	}
}

func TestLedgerReportFormats(t *testing.T) {
	e := newE2E(t)
	e.mustRun("init")
	now := time.Now().UTC()
	seedUsage(t, e.db(), now.Add(-2*time.Hour), 4)
	seedUsage(t, e.db(), now.Add(-30*time.Hour), 3) // outside the default 24h

	rows := parseJSON(t, e.mustRun("ledger", "report", "--format", "json").stdout)
	if len(rows) != 1 {
		t.Fatalf("default report = %v, want one operation row", rows)
	}
	r := rows[0]
	want := map[string]any{"operation": "decisions", "requests": float64(4), "input_tokens": float64(28), "output_tokens": float64(12), "total_tokens": float64(40), "cost_usd": nil, "errors": float64(0),
		"known_cost_usd": float64(0), "unknown_cost_rows": float64(4), "unknown_token_rows": float64(0),
		// Decisions rows record no cached or reasoning tokens: unknown, not 0.
		"cached_input_tokens": nil, "reasoning_tokens": nil}
	for k, v := range want {
		if got, ok := r[k]; !ok || got != v {
			t.Errorf("%s = %v, want %v (unknown is null, never 0)", k, got, v)
		}
	}
	csvRows := parseCSV(t, e.mustRun("ledger", "report", "--since", "7d", "--by", "credential,day", "--format", "csv").stdout)
	var total int
	for _, row := range csvRows {
		if row["cost_usd"] != "unknown" {
			t.Errorf("csv cost_usd = %q, want unknown", row["cost_usd"])
		}
		var n int
		fmt.Sscan(row["requests"], &n)
		total += n
	}
	if total != 7 || len(csvRows) != 4 {
		t.Errorf("7d by credential,day: %d rows summing %d requests, want 4 rows and 7: %v", len(csvRows), total, csvRows)
	}
	header := strings.SplitN(e.mustRun("ledger", "report", "--by", "model,day", "--format", "csv").stdout, "\n", 2)[0]
	if header != "model,day,requests,input_tokens,output_tokens,total_tokens,cost_usd,errors,cached_input_tokens,reasoning_tokens,known_cost_usd,unknown_cost_rows,unknown_token_rows" {
		t.Errorf("csv header = %q", header)
	}
	// Half-open UTC dates.
	day := now.Add(-30 * time.Hour).Format("2006-01-02")
	next := now.Add(-30*time.Hour).AddDate(0, 0, 1).Format("2006-01-02")
	rows = parseJSON(t, e.mustRun("ledger", "report", "--from", day, "--to", next, "--by", "day", "--format", "json").stdout)
	if len(rows) != 1 || rows[0]["day"] != day || rows[0]["requests"] != float64(3) {
		t.Errorf("report for %s = %v, want 3 requests that day", day, rows)
	}
	if out := e.mustRun("ledger", "report").stdout; !strings.Contains(out, "unknown") {
		t.Errorf("table does not print unknown cost:\n%s", out)
	}
}

func TestConfigCheck(t *testing.T) {
	e := newE2E(t)
	e.mustRun("init")
	cfg := `pools:
  api:
    credentials:
      - {name: team-a, base_url: "http://127.0.0.1:1", api_key_env: ROTOR_TEST_KEY_A}
      - {name: team-b, base_url: "http://127.0.0.1:2", api_key_env: ROTOR_TEST_KEY_B}
`
	os.WriteFile(filepath.Join(e.home, "rotor.yaml"), []byte(cfg), 0o600)
	e.env = append(e.env, "ROTOR_TEST_KEY_A=sk-canary-value-123456")
	r := e.run("config", "check", "--format", "json")
	rows := parseJSON(t, r.stdout)
	if len(rows) != 2 || rows[0]["key"] != "set" || rows[1]["key"] != "not set" {
		t.Errorf("config check = %v, want team-a set and team-b not set", rows)
	}
	if r.code != ExitUsage || !strings.Contains(r.stderr, "ROTOR_TEST_KEY_B") {
		t.Errorf("config check with team-b unset: exit %d %q, want 2 naming ROTOR_TEST_KEY_B", r.code, r.stderr)
	}
	if strings.Contains(r.stdout+r.stderr, "sk-canary") {
		t.Error("config check printed a key")
	}
	os.WriteFile(filepath.Join(e.home, "rotor.yaml"), []byte("pools:\n  api:\n    weight: 3\n"), 0o600)
	if r := e.run("config", "check"); r.code != ExitUsage || !strings.Contains(r.stderr, "pools.api.weight") {
		t.Errorf("bad key: exit %d %q, want 2 naming pools.api.weight", r.code, r.stderr)
	}
	os.WriteFile(filepath.Join(e.home, "rotor.yaml"), []byte("catalog_ttl: 1m\n"), 0o600)
	e.env = append(e.env, "ROTOR_RUNTIME_DEADLINE=soon")
	if r := e.run("config", "check"); r.code != ExitUsage || !strings.Contains(r.stderr, "ROTOR_RUNTIME_DEADLINE") {
		t.Errorf("bad env: exit %d %q, want 2 naming ROTOR_RUNTIME_DEADLINE", r.code, r.stderr)
	}
}

func TestMalformedSpecSettingWarnsOnceWithoutValue(t *testing.T) {
	e := newE2E(t)
	e.env = append(e.env, "MODEL_COOLDOWN_MAX_SECONDS=sk-oops-pasted-a-key", "LEARNED_COOLDOWN_MODE=loud")
	r := e.mustRun("config", "check")
	if strings.Count(r.stderr, "MODEL_COOLDOWN_MAX_SECONDS") != 1 || strings.Count(r.stderr, "LEARNED_COOLDOWN_MODE") != 1 {
		t.Errorf("want one warning per setting:\n%s", r.stderr)
	}
	if strings.Contains(r.stderr, "sk-oops") || strings.Contains(r.stderr, "loud") {
		t.Errorf("warning shows the value:\n%s", r.stderr)
	}
	if !strings.Contains(r.stderr, "model cooldown off") {
		t.Errorf("malformed setting did not disable the feature:\n%s", r.stderr)
	}
}

func TestVersionAndCompletion(t *testing.T) {
	e := newE2E(t)
	if out := e.mustRun("version").stdout; !strings.HasPrefix(out, "rotor ") {
		t.Errorf("version = %q", out)
	}
	if out := e.mustRun("completion", "bash").stdout; !strings.Contains(out, "rotor") {
		t.Error("no bash completion")
	}
	if r := e.run("no-such-command"); r.code != ExitUsage && r.code != ExitError {
		t.Errorf("unknown command exit %d", r.code)
	}
}

func TestScripts(t *testing.T) {
	e := newE2E(t)
	e.mustRun("init")
	script := func(name string, env ...string) result {
		return e.exec(append(append([]string{}, e.env...), env...), "bash", filepath.Join("..", "scripts", name))
	}
	for i := 0; i < 2; i++ {
		if r := script("daily-budget.sh", "ROTOR_DAILY_TOKENS=750000"); r.code != 0 {
			t.Fatalf("daily-budget.sh: exit %d\n%s%s", r.code, r.stdout, r.stderr)
		}
	}
	if r := script("daily-budget.sh", "ROTOR_DAILY_TOKENS=900000"); r.code != 0 {
		t.Fatalf("daily-budget.sh: %s", r.stderr)
	}
	list := parseJSON(t, e.mustRun("budget", "list", "--format", "json").stdout)
	if len(list) != 1 || list[0]["limit"] != float64(900000) || list[0]["window"] != "day" {
		t.Errorf("after three cron runs: %v, want one daily budget of 900000", list)
	}
	seedUsage(t, e.db(), time.Now().UTC().Truncate(24*time.Hour).Add(-12*time.Hour), 2)
	r := script("report-yesterday.sh")
	if r.code != 0 {
		t.Fatalf("report-yesterday.sh: exit %d %s", r.code, r.stderr)
	}
	rows := parseCSV(t, r.stdout)
	if len(rows) != 2 || rows[0]["model"] != "decide-mini" || rows[0]["cost_usd"] != "unknown" {
		t.Errorf("yesterday's report = %v", rows)
	}
}

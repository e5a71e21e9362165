package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// dirState lists a folder's files with their contents, to prove a command
// left it as it was.
func dirState(t *testing.T, dir string) map[string]string {
	t.Helper()
	state := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		state[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return state
}

func sameState(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// Issue 14, item 13: the demo runs in a home of its own whatever --home,
// ROTOR_HOME or ROTOR_DB say (an exhausted demo budget in the user's
// ledger blocked their real bridge for an hour), and --keep DIR leaves its
// files in a new DIR, never an existing one.
func TestDemoNeverWritesIntoUsersLedger(t *testing.T) {
	e := newE2E(t)
	e.mustRun("init")
	before := dirState(t, e.home)
	env := e.env
	e.env = append(e.env, "ROTOR_DB="+e.db())
	r := e.mustRun("demo", "--requests", "3", "--home", e.home)
	e.env = env
	if !strings.Contains(r.stdout, "ledger report") {
		t.Errorf("demo did not run to its report:\n%s", r.stdout)
	}
	if !sameState(before, dirState(t, e.home)) {
		t.Error("demo --home changed the user's home folder")
	}
	if list := parseJSON(t, e.mustRun("budget", "list", "--format", "json").stdout); len(list) != 0 {
		t.Errorf("user's ledger has budgets after the demo: %v", list)
	}

	existing := t.TempDir()
	os.WriteFile(filepath.Join(existing, "notes.txt"), []byte("mine"), 0o600)
	keptBefore := dirState(t, existing)
	if r := e.run("demo", "--keep", existing); r.code != ExitUsage || !strings.Contains(r.stderr, existing) {
		t.Errorf("demo --keep EXISTING: exit %d %q, want 2 naming it", r.code, r.stderr)
	}
	if !sameState(keptBefore, dirState(t, existing)) {
		t.Error("demo --keep wrote into an existing folder")
	}

	kept := filepath.Join(t.TempDir(), "demo")
	r = e.mustRun("demo", "--keep", kept)
	if !strings.Contains(r.stdout, kept) {
		t.Errorf("demo --keep does not say where its files are:\n%s", r.stdout)
	}
	rows := parseJSON(t, e.mustRun("ledger", "report", "--home", kept, "--by", "credential", "--format", "json").stdout)
	if len(rows) < 2 {
		t.Errorf("kept demo ledger has %d credentials, want more than one: %v", len(rows), rows)
	}
	// The report the demo ends with suggesting sees every row the demo
	// wrote, at once: its clock skipped past the cooldowns, but no row is
	// dated after real time (the default range ends now).
	all := parseJSON(t, e.mustRun("ledger", "rows", "--home", kept, "--from", "2000-01-01", "--to", "2999-01-01", "--format", "json").stdout)
	now := parseJSON(t, e.mustRun("ledger", "rows", "--home", kept, "--format", "json").stdout)
	if len(now) != len(all) || len(all) == 0 {
		t.Errorf("ledger rows right after the demo: %d of its %d rows (the others dated after now)", len(now), len(all))
	}
	if !sameState(before, dirState(t, e.home)) {
		t.Error("demo --keep changed the user's home folder")
	}
}

// userCommands lists every command a user can run, by its words after
// "rotor", and whether it only groups subcommands: what each --help lists
// under "Available Commands", but help.
func userCommands(e *e2e) (cmds [][]string, group []bool) {
	e.t.Helper()
	var walk func(path []string)
	walk = func(path []string) {
		help := e.mustRun(append(slices.Clone(path), "--help")...).stdout
		var subs []string
		if _, list, ok := strings.Cut(help, "\nAvailable Commands:\n"); ok {
			for _, line := range strings.Split(list, "\n") {
				f := strings.Fields(line)
				if !strings.HasPrefix(line, "  ") || len(f) == 0 {
					break
				}
				if f[0] != "help" {
					subs = append(subs, f[0])
				}
			}
		}
		if len(path) > 0 {
			cmds = append(cmds, path)
			group = append(group, len(subs) > 0)
		}
		for _, sub := range subs {
			walk(append(slices.Clone(path), sub))
		}
	}
	walk(nil)
	return cmds, group
}

// Issue 14, item 14: every usage error exits 2 naming what to change, and
// changes nothing: an extra argument on every command (cobra called it an
// "unknown command" and exited 1), a missing argument, a missing required
// flag, an empty value, an unknown subcommand.
func TestEveryUsageErrorExitsTwo(t *testing.T) {
	e := newE2E(t)
	cmds, group := userCommands(e)
	if len(cmds) < 15 {
		t.Fatalf("found only %d commands: %v", len(cmds), cmds)
	}
	type usageCase struct {
		args    []string
		message string
	}
	var cases []usageCase
	for i, c := range cmds {
		// A fixed argument first, so commands taking one NAME get two.
		args := append(append([]string{}, c...), "first", "extra")
		msg := `"extra"; usage: rotor ` + strings.Join(c, " ")
		if group[i] {
			msg = `unknown command "first"`
		}
		cases = append(cases, usageCase{args, msg})
	}
	cases = append(cases,
		usageCase{[]string{"ledger", "report", "extra"}, `unexpected argument "extra"`},
		usageCase{[]string{"budget", "remove"}, "missing argument"},
		usageCase{[]string{"bridge", "token", "revoke"}, "missing argument"},
		usageCase{[]string{"bridge", "token", "create"}, "--label is required"},
		usageCase{[]string{"budget", "add", "--requests", "5", "--window", "day", "--name", ""}, "--name"},
		usageCase{[]string{"bridge", "token", "create", "--label", ""}, "--label"},
		usageCase{[]string{"--home", "", "budget", "list"}, "--home"},
		usageCase{[]string{"ledger", "report", "--by", " "}, "--by"},
		usageCase{[]string{"budget", "frob"}, `unknown command "frob"`},
		usageCase{[]string{"frob"}, `unknown command "frob"`},
	)
	for _, tc := range cases {
		r := e.run(tc.args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, tc.message) {
			t.Errorf("rotor %q: exit %d, stderr %q; want 2 mentioning %q", tc.args, r.code, r.stderr, tc.message)
		}
	}
	if _, err := os.Stat(e.home); err == nil {
		t.Error("a refused command created the home folder")
	}
	// Groups without a subcommand still print their help.
	if r := e.run("budget"); r.code != ExitOK || !strings.Contains(r.stdout, "remove") {
		t.Errorf("rotor budget: exit %d, stdout %q; want its help", r.code, r.stdout)
	}
}

// Issue 14, item 15: a refused budget says why (errors.Unwrap left only
// "invalid budget").
func TestBudgetAddErrorsKeepTheirReason(t *testing.T) {
	e := newE2E(t)
	for _, tc := range []struct {
		args   []string
		reason string
	}{
		{[]string{"--cost", "1.1234567"}, "at most 6 decimals"},
		{[]string{"--cost", "lots"}, "want a positive USD amount"},
		{[]string{"--cost", "1.-5"}, "want a positive USD amount"},
		{[]string{"--cost", "99999999999999"}, "too large"},
		{[]string{"--requests", "5", "--name", "a/b"}, "letters, digits"},
	} {
		r := e.run(append([]string{"budget", "add", "--window", "day"}, tc.args...)...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, tc.reason) {
			t.Errorf("budget add %q: exit %d, stderr %q; want 2 saying %q", tc.args, r.code, r.stderr, tc.reason)
		}
	}
}

// Issue 14, item 16: a command that refuses creates nothing first: the
// runtime checks its address before writing runtime.token, and a command
// that reads or removes never creates a home or an empty ledger (a typo in
// --home listed no budgets and exited 0).
func TestRefusingCommandsCreateNothing(t *testing.T) {
	e := newE2E(t)
	if r := e.run("runtime", "start", "--listen", "[::]:0"); r.code != ExitUsage || !strings.Contains(r.stderr, "--allow-non-loopback") {
		t.Errorf("runtime start on [::]: exit %d %q, want 2", r.code, r.stderr)
	}
	if _, err := os.Stat(e.home); err == nil {
		t.Errorf("a refused runtime start created %s: %v", e.home, dirState(t, e.home))
	}

	typo := filepath.Join(t.TempDir(), "typo")
	for _, args := range [][]string{
		{"budget", "list"}, {"budget", "remove", "daily"}, {"ledger", "report"}, {"ledger", "migrate"},
		{"bridge", "token", "list"}, {"bridge", "token", "revoke", "ci"},
	} {
		r := e.run(append([]string{"--home", typo}, args...)...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, typo) {
			t.Errorf("rotor --home TYPO %q: exit %d %q; want 2 naming the home", args, r.code, r.stderr)
		}
		if _, err := os.Stat(typo); err == nil {
			t.Fatalf("rotor --home TYPO %q created it", args)
		}
	}

	e.mustRun("init")
	missing := filepath.Join(e.home, "other.db")
	if r := e.run("--db", missing, "budget", "list"); r.code != ExitUsage || !strings.Contains(r.stderr, missing) {
		t.Errorf("budget list --db MISSING: exit %d %q; want 2 naming it", r.code, r.stderr)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Error("budget list created a database")
	}
}

// Issue 14, item 17: config check exits 2 naming each enabled credential
// whose key cannot be used (an empty pool is fine); a malformed spec
// setting from the file is named by its YAML key, with no "ok" over it;
// and the bridge's 503 no_credentials says which credentials and why.
func TestUnusableCredentialsNamedByConfigCheckAndThe503(t *testing.T) {
	e := newE2E(t)
	e.mustRun("init")
	write := func(cfg string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(e.home, "rotor.yaml"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("pools:\n  api:\n    credentials: []\n")
	if r := e.run("config", "check"); r.code != ExitOK || !strings.Contains(r.stderr, "config ok") {
		t.Errorf("empty pool: exit %d %q, want 0 and ok", r.code, r.stderr)
	}

	write(`pools:
  api:
    credentials:
      - {name: team-a, base_url: "http://127.0.0.1:1", api_key_env: CLI_KEY_A, model_profiles: {decide-mini: {supported_endpoints: [/v1/decisions]}}}
      - {name: team-b, base_url: "http://127.0.0.1:2", api_key_file: keys/team-b, model_profiles: {decide-mini: {supported_endpoints: [/v1/decisions]}}}
      - {name: team-off, enabled: false, base_url: "http://127.0.0.1:3", api_key_env: CLI_KEY_OFF}
`)
	r := e.run("config", "check")
	for _, want := range []string{"env CLI_KEY_A is not set", filepath.Join(e.home, "keys", "team-b") + " is missing", "team-a", "team-b"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("config check stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if r.code != ExitUsage || strings.Contains(r.stderr, "CLI_KEY_OFF") || strings.Contains(r.stderr, "config ok") {
		t.Errorf("config check: exit %d\n%s\nwant 2, naming only the enabled credentials, no ok", r.code, r.stderr)
	}

	// The bridge serves anyway and tells a caller why the pool is empty.
	e.env = append(e.env, "CLI_KEY_A=")
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	reply := call(t, "POST", b.url+"/v1/decisions", e.token(), decideBody)
	var body struct {
		Error struct{ Code, Message string }
	}
	json.Unmarshal([]byte(reply.body), &body)
	if reply.status != 503 || body.Error.Code != "no_credentials" ||
		!strings.Contains(body.Error.Message, "team-a: env CLI_KEY_A is not set") || !strings.Contains(body.Error.Message, "team-b: file ") {
		t.Errorf("no usable credential: %d %s; want 503 no_credentials naming why", reply.status, reply.body)
	}
	b.stop()

	write("model_cooldown: {enabled: true, max_seconds: sk-pasted-by-mistake}\n")
	r = e.run("config", "check")
	if r.code != ExitOK || !strings.Contains(r.stderr, "model_cooldown.max_seconds") || strings.Contains(r.stderr, "MODEL_COOLDOWN_MAX_SECONDS") ||
		strings.Contains(r.stderr, "config ok") || strings.Contains(r.stderr, "sk-pasted") || !strings.Contains(r.stderr, "model cooldown off") {
		t.Errorf("malformed file setting: exit %d\n%s\nwant it named model_cooldown.max_seconds, without its value and without ok", r.code, r.stderr)
	}
	e.env = append(e.env, "ROTOR_MODEL_COOLDOWN_MAX_SECONDS=often")
	if r := e.run("config", "check"); !strings.Contains(r.stderr, "setting=ROTOR_MODEL_COOLDOWN_MAX_SECONDS") {
		t.Errorf("malformed ROTOR_ variable not named as set:\n%s", r.stderr)
	}
}

// Issue 14, item 18: rotor status finds a bridge on a free port through
// <home>/bridge.json, which the bridge removes at a clean stop; its help
// says what its json is.
func TestStatusFindsBridgeOnFreePort(t *testing.T) {
	e := newE2E(t)
	e.provider("")
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	raw, err := os.ReadFile(filepath.Join(e.home, "bridge.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		PID int
		URL string
	}
	if err := json.Unmarshal(raw, &rec); err != nil || rec.URL != b.url || rec.PID != b.cmd.Process.Pid {
		t.Errorf("bridge.json = %s (%v), want pid %d and url %s", raw, err, b.cmd.Process.Pid, b.url)
	}
	if r := e.run("status", "--format", "json"); r.code != ExitOK || !strings.Contains(r.stdout, `"pools"`) {
		t.Errorf("status without --url: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if code := b.stop(); code != 0 {
		t.Errorf("bridge exit %d", code)
	}
	if _, err := os.Stat(filepath.Join(e.home, "bridge.json")); err == nil {
		t.Error("bridge.json left behind after a clean stop")
	}
	if r := e.run("status"); r.code != ExitError || !strings.Contains(r.stderr, "bridge.listen") {
		t.Errorf("status with no bridge: exit %d %q", r.code, r.stderr)
	}
	help := e.mustRun("status", "--help").stdout
	if !strings.Contains(help, "bridge.json") || !strings.Contains(help, "one object") || strings.Contains(help, "array of row objects") {
		t.Errorf("status --help does not describe its json and URL truthfully:\n%s", help)
	}
}

// Issue 14, item 19: without ldflags, rotor version says the module
// version and VCS revision that Go stamped into the binary (the
// versionFrom table is in cmd/rotor/version_test.go).
func TestVersionFromBuildInfoWithoutLdflags(t *testing.T) {
	e := newE2E(t)
	// The real binary says what `go version -m` finds in it.
	out, err := exec.Command("go", "version", "-m", e.bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var modVersion, revision string
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) >= 3 && fields[0] == "mod":
			modVersion = fields[2]
		case len(fields) >= 2 && fields[0] == "build" && strings.HasPrefix(fields[1], "vcs.revision="):
			revision = strings.TrimPrefix(fields[1], "vcs.revision=")
		}
	}
	got := e.mustRun("version").stdout
	if modVersion == "" || !strings.HasPrefix(got, "rotor "+modVersion) || !strings.Contains(got, revision) {
		t.Errorf("rotor version = %q; go version -m says module %q revision %q", got, modVersion, revision)
	}
	if r := e.mustRun("--version"); r.stdout != got {
		t.Errorf("--version = %q, version = %q", r.stdout, got)
	}
}

// rotor help TOPIC shows a command's help; a topic rotor does not know
// exits 2 naming it, as an unknown command does (cobra's own help printed
// the root's help and exited 0).
func TestHelpOfAnUnknownTopicExits2(t *testing.T) {
	e := newE2E(t)
	if r := e.run("help", "budget", "add"); r.code != 0 || !strings.Contains(r.stdout, "--requests") {
		t.Errorf("rotor help budget add: exit %d %q", r.code, r.stdout)
	}
	for _, args := range [][]string{{"help", "bogus"}, {"help", "budget", "bogus"}} {
		r := e.run(args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, "unknown help topic") || !strings.Contains(r.stderr, "bogus") {
			t.Errorf("rotor %v: exit %d %q; want 2 naming the topic", args, r.code, r.stderr)
		}
	}
}

// --url of rotor status and rotor bridge reload is the bridge's URL: a
// host:port without a scheme, or another scheme, exits 2 naming the flag
// instead of failing as an unreachable bridge (exit 1).
func TestBridgeURLFlagIsChecked(t *testing.T) {
	e := newE2E(t)
	if r := e.run("init"); r.code != 0 {
		t.Fatalf("init: exit %d %s", r.code, r.stderr)
	}
	for _, cmd := range [][]string{{"status"}, {"bridge", "reload"}} {
		for _, u := range []string{"localhost:8787", "127.0.0.1:8787", "ftp://127.0.0.1:8787", "http://",
			"http://127.0.0.1:99999", "http://127.0.0.1:abc", "http://127.0.0.1:0", "http://u:hunter2@127.0.0.1:8787"} {
			r := e.run(append(cmd, "--url", u)...)
			if r.code != ExitUsage || !strings.Contains(r.stderr, "--url") || strings.Contains(r.stderr, "hunter2") {
				t.Errorf("rotor %v --url %s: exit %d %q; want 2 naming --url, no password", cmd, u, r.code, r.stderr)
			}
		}
	}
	for _, addr := range []string{"127.0.0.1:99999", "127.0.0.1:abc", "127.0.0.1"} {
		if r := e.run("fake-provider", "--listen", addr); r.code != ExitUsage || !strings.Contains(r.stderr, "--listen") {
			t.Errorf("rotor fake-provider --listen %s: exit %d %q; want 2 naming --listen", addr, r.code, r.stderr)
		}
	}
}

// rotor status with a token others can read refuses to send it (exit 2),
// and says so: nothing is starting.
func TestStatusRefusesAnUnsafeTokenWithoutSayingStart(t *testing.T) {
	e := newE2E(t)
	if r := e.run("init"); r.code != 0 {
		t.Fatalf("init: exit %d %s", r.code, r.stderr)
	}
	if err := os.Chmod(e.home, 0o755); err != nil {
		t.Fatal(err)
	}
	r := e.run("status")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "refusing to send its token") || strings.Contains(r.stderr, "start") {
		t.Errorf("rotor status with a 0755 home: exit %d %q; want 2, refusing to send its token", r.code, r.stderr)
	}
}

// A bad list item from a ROTOR_ variable is blamed on the variable, not on
// rotor.yaml (which need not exist): the field Validate names carries the
// item's index (runtime.allowed_origins[1]).
func TestBadListItemFromEnvNamesTheVariable(t *testing.T) {
	e := newE2E(t)
	if err := os.MkdirAll(e.home, 0o700); err != nil {
		t.Fatal(err)
	}
	e.env = append(e.env, "ROTOR_RUNTIME_ALLOWED_ORIGINS=http://localhost:3000,localhost:3001")
	r := e.run("config", "check")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "(from ROTOR_RUNTIME_ALLOWED_ORIGINS)") || strings.Contains(r.stderr, "rotor.yaml") {
		t.Errorf("config check with a bad origin in the environment: exit %d %q; want 2 naming ROTOR_RUNTIME_ALLOWED_ORIGINS", r.code, r.stderr)
	}
}

// fake-provider listens on loopback only and has no --allow-non-loopback:
// its refusal does not suggest the flag, as the bridge's and runtime's do.
func TestFakeProviderRefusesNonLoopbackWithoutAFlagItLacks(t *testing.T) {
	e := newE2E(t)
	r := e.run("fake-provider", "--listen", "0.0.0.0:0")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "loopback only") || strings.Contains(r.stderr, "--allow-non-loopback") {
		t.Errorf("fake-provider on 0.0.0.0: exit %d %q; want 2 saying loopback only, without a flag it does not take", r.code, r.stderr)
	}
	if r := e.run("runtime", "start", "--listen", "0.0.0.0:0"); r.code != ExitUsage || !strings.Contains(r.stderr, "--allow-non-loopback") {
		t.Errorf("runtime start on 0.0.0.0: exit %d %q; want 2 naming --allow-non-loopback", r.code, r.stderr)
	}
}

// rotor init writes the configuration file --config names even when it
// does not exist yet (it is the file init creates), and an init that fails
// leaves no home folder it created behind.
func TestInitWithANewConfigFileAndAFailedInitLeavesNoHome(t *testing.T) {
	e := newE2E(t)
	cfg := filepath.Join(t.TempDir(), "elsewhere", "rotor.yaml")
	if err := os.MkdirAll(filepath.Dir(cfg), 0o700); err != nil {
		t.Fatal(err)
	}
	r := e.run("--config", cfg, "init")
	if r.code != 0 {
		t.Fatalf("init --config NEWFILE: exit %d %s", r.code, r.stderr)
	}
	if _, err := os.Stat(cfg); err != nil {
		t.Errorf("init --config NEWFILE did not write it: %v", err)
	}
	if r := e.run("--config", cfg, "config", "check"); r.code != 0 {
		t.Errorf("config check on the new file: exit %d %s", r.code, r.stderr)
	}

	notDB := filepath.Join(t.TempDir(), "not.db")
	if err := os.WriteFile(notDB, []byte("not a database\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(t.TempDir(), "new-home")
	if r := e.run("--home", home, "--db", notDB, "init"); r.code == 0 {
		t.Fatal("init on a file that is not a ledger: exit 0")
	}
	if _, err := os.Stat(home); err == nil {
		t.Errorf("the failed init left the home folder %s it created", home)
	}
}

// rotor init refuses a home folder others may enter, which bridge start
// would refuse, before it writes anything there.
func TestInitRefusesAHomeOthersMayEnter(t *testing.T) {
	e := newE2E(t)
	if err := os.MkdirAll(e.home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(e.home, 0o755); err != nil {
		t.Fatal(err)
	}
	r := e.run("init")
	if r.code != ExitUsage || !strings.Contains(r.stderr, "chmod 700 "+e.home) {
		t.Errorf("init in a 0755 home: exit %d %q; want 2 saying chmod 700", r.code, r.stderr)
	}
	if entries, _ := os.ReadDir(e.home); len(entries) != 0 {
		t.Errorf("the refused init left %d files in the home folder", len(entries))
	}
	if err := os.Chmod(e.home, 0o700); err != nil {
		t.Fatal(err)
	}
	e.mustRun("init")
}

// A bad --log-level or --log-format is a usage error (exit 2, naming the
// flag) for every command, also those that load no configuration
// (version, demo, fake-provider), and the demo logs at the level and in
// the format given.
func TestLogFlagsAreCheckedEverywhereAndTheDemoHonoursThem(t *testing.T) {
	e := newE2E(t)
	for _, args := range [][]string{
		{"version", "--log-level", "bogus"},
		{"demo", "--log-level", "bogus"},
		{"fake-provider", "--log-level", "bogus"},
		{"version", "--log-format", "xml"},
		{"demo", "--log-format", "xml"},
	} {
		r := e.run(args...)
		if r.code != ExitUsage || !strings.Contains(r.stderr, args[1]) {
			t.Errorf("rotor %v: exit %d %q; want 2 naming %s", args, r.code, r.stderr, args[1])
		}
		if r.stdout != "" {
			t.Errorf("rotor %v printed %q before refusing", args, r.stdout)
		}
	}
	r := e.mustRun("demo", "--requests", "2", "--log-level", "info", "--log-format", "json")
	if !strings.Contains(r.stderr, `"msg":"request"`) {
		t.Errorf("demo --log-level info --log-format json wrote no JSON request log:\n%s", r.stderr)
	}
	if r := e.mustRun("demo", "--requests", "2"); strings.Contains(r.stderr, "msg=request") {
		t.Errorf("demo logged requests at its default level (warn):\n%s", r.stderr)
	}
}

// rotor init checks the configuration in force and opens its ledger
// before it writes anything: a bad ROTOR_DB or flag value leaves no
// rotor.yaml behind (which the next init would refuse). With --force it
// keeps the replaced file as rotor.yaml.old, and a ledger.url the old
// file named (a team's ledger): the new token replaces the old one there.
func TestInitWritesNothingUntilItCanAndForceKeepsTheLedger(t *testing.T) {
	e := newE2E(t)
	cfg := filepath.Join(e.home, "rotor.yaml")
	for _, args := range [][]string{{"--db", filepath.Join(t.TempDir(), "no-such-dir", "team.db"), "init"}, {"--log-level", "bogus", "init"}} {
		if r := e.run(args...); r.code == 0 {
			t.Errorf("rotor %v: exit 0", args)
		}
		if _, err := os.Stat(cfg); err == nil {
			t.Fatalf("rotor %v failed but wrote %s", args, cfg)
		}
	}
	team := filepath.Join(t.TempDir(), "team.db")
	e.mustRun("init")
	if err := os.WriteFile(cfg, []byte("ledger:\n  url: "+team+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e.mustRun("init", "--force") // the token now lives in the team ledger
	old := e.token()
	r := e.mustRun("init", "--force")
	if !strings.Contains(r.stdout, "rotor.yaml.old") {
		t.Errorf("init --force did not say where the old rotor.yaml went: %q", r.stdout)
	}
	if b, err := os.ReadFile(cfg + ".old"); err != nil || !strings.Contains(string(b), team) {
		t.Errorf("rotor.yaml.old = %q, %v; want the replaced file", b, err)
	}
	if r := e.mustRun("config", "check"); !strings.Contains(r.stdout+r.stderr, team) {
		t.Errorf("after init --force the home's ledger is not the team's:\n%s%s", r.stdout, r.stderr)
	}
	list := e.mustRun("--db", team, "bridge", "token", "list", "--format", "csv").stdout
	if strings.Count(list, "\n") != 2 || !strings.Contains(list, "\ndefault,") {
		t.Errorf("team ledger tokens after init --force:\n%s; want the one default token", list)
	}
	if old == e.token() {
		t.Error("init --force kept the old token")
	}
	// --force with a bad flag changes nothing: the file it replaced is
	// put back.
	before, _ := os.ReadFile(cfg)
	before = append(before, "# the user's own line\n"...)
	if err := os.WriteFile(cfg, before, 0o600); err != nil {
		t.Fatal(err)
	}
	// (ROTOR_LOG_LEVEL, not --log-level: a bad flag value is refused
	// before any command runs.)
	if r := e.exec(append(e.env, "ROTOR_LOG_LEVEL=bogus"), e.bin, "init", "--force"); r.code != ExitUsage {
		t.Errorf("init --force with a bad setting: exit %d %q, want 2", r.code, r.stderr)
	}
	if after, _ := os.ReadFile(cfg); string(after) != string(before) {
		t.Error("a failed init --force left another rotor.yaml")
	}
	// --force resets a rotor.yaml that no longer loads, and keeps every
	// earlier copy.
	broken := "ledger:\n  url: " + team + "\nbogus_key: 1\n"
	if err := os.WriteFile(cfg, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	// Two earlier --force runs kept rotor.yaml.old and rotor.yaml.old.2.
	if r := e.run("init", "--force"); r.code != 0 || !strings.Contains(r.stdout, "rotor.yaml.old.3") {
		t.Errorf("init --force over a broken rotor.yaml: exit %d %q %q; want 0, keeping it as rotor.yaml.old.3", r.code, r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(cfg + ".old.3"); string(b) != broken {
		t.Errorf("rotor.yaml.old.3 = %q, want the broken file", b)
	}
	// Its ledger.url is carried all the same: the home stays on the team
	// ledger.
	if r := e.mustRun("config", "check"); !strings.Contains(r.stdout+r.stderr, team) {
		t.Errorf("after init --force over a broken rotor.yaml the home's ledger is not the team's:\n%s%s", r.stdout, r.stderr)
	}
	if b, _ := os.ReadFile(cfg + ".old"); !strings.Contains(string(b), team) {
		t.Errorf("rotor.yaml.old = %q, want the first file replaced, still there", b)
	}
	e.mustRun("config", "check")
}

// A ledger location that is neither a SQLite file nor a postgres:// URL
// (a keyword/value connection string, another scheme, white space around
// it or only white space) was taken for a file name: budget add exited 0
// and left a SQLite file named after the whole string, password and all,
// in the working directory, and config check printed it. Each is refused,
// exit 2 naming its source, with its password masked, and nothing is
// created.
func TestBadLedgerLocationsRefusedAndMasked(t *testing.T) {
	e := newE2E(t)
	const pw = "hunter2"
	cases := []struct {
		env  string
		args []string
		want string
	}{
		{"", []string{"--db", "host=db.example user=rotor password=" + pw + " dbname=rotor", "budget", "add", "--requests", "100", "--window", "day"}, "--db"},
		{"", []string{"--db", "mysql://rotor:" + pw + "@db.example/rotor", "config", "check"}, "--db"},
		{"ROTOR_DB= postgres://rotor:" + pw + "@db.example/rotor", []string{"config", "check"}, "ROTOR_DB"},
		{"ROTOR_DB= ", []string{"budget", "add", "--requests", "100", "--window", "day"}, "ROTOR_DB"},
		{"ROTOR_HOME= ", []string{"init"}, "ROTOR_HOME"},
		{"ROTOR_LEDGER_URL=pgsql://rotor:" + pw + "@db.example/rotor", []string{"budget", "add", "--requests", "100", "--window", "day"}, "ROTOR_LEDGER_URL"},
		{"", []string{"--db", "postgresql://rotor:" + pw + "@[::1", "budget", "list"}, "--db"},
		{"", []string{"--db", "postgres://rotor:" + pw + "@127.0.0.1:1/rotor?sslmode=bogus", "budget", "list"}, "--db"},
		{"", []string{"ledger", "copy", "--to", "host=db.example password=" + pw}, "--to"},
		{"", []string{"ledger", "backup", "postgres://rotor:" + pw + "@db.example/rotor"}, "FILE"},
	}
	for _, tc := range cases {
		wd := t.TempDir()
		cmd := exec.Command(e.bin, tc.args...)
		cmd.Dir = wd
		cmd.Env = e.env
		if tc.env != "" {
			cmd.Env = append(slices.Clone(e.env), tc.env)
		}
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		}
		if code != ExitUsage || !strings.Contains(string(out), tc.want) || strings.Contains(string(out), pw) {
			t.Errorf("%s rotor %q: exit %d, output %q; want 2 naming %s, the password masked", tc.env, tc.args, code, out, tc.want)
		}
		if left, _ := os.ReadDir(wd); len(left) > 0 {
			t.Errorf("%s rotor %q left %v in the working directory", tc.env, tc.args, left)
		}
	}
	if _, err := os.Stat(e.home); err == nil {
		t.Error("a refused command created the home folder")
	}
}

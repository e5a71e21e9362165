package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rotorhq/rotor/bridge"
	"github.com/rotorhq/rotor/gateway"
	"github.com/rotorhq/rotor/internal/clock"
	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/internal/tokenfile"
	"github.com/rotorhq/rotor/pool"
)

func init() {
	runFTests["bridge reload"] = func(t *testing.T) {
		f, _, _ := testFactory(t)
		got := flagsToOptions(t, f, newCmdBridgeReload, "--url", "http://127.0.0.1:9")
		if got.URL != "http://127.0.0.1:9" || got.HTTPClient() == nil || got.IO != f.IO {
			t.Errorf("options %+v, want the url, a client and the factory's streams", got)
		}
	}
}

// reloadFixture is a home with rotor.yaml and key files, a fake provider
// and a reloader serving its first generation.
type reloadFixture struct {
	t    *testing.T
	f    *Factory
	logs *bytes.Buffer
	home string
	prov *fp.Server
	rl   *reloader
}

// cred is one credential line of rotor.yaml; the key is in keys/<name>.
type cred struct{ name, baseURL, extra string }

func newReloadFixture(t *testing.T, creds ...cred) *reloadFixture {
	t.Helper()
	return newReloadFixtureWith(t, "", creds...)
}

// newReloadFixtureWith starts the reloader on a rotor.yaml holding extra
// besides the credentials.
func newReloadFixtureWith(t *testing.T, extra string, creds ...cred) *reloadFixture {
	t.Helper()
	f, _, logs := testFactory(t)
	prov, err := fp.Start(fp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { prov.Close() })
	x := &reloadFixture{t: t, f: f, logs: logs, home: f.home, prov: prov}
	if err := os.Chmod(x.home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(x.home, "keys"), 0o700); err != nil {
		t.Fatal(err)
	}
	x.writeConfig(extra, creds...)
	cfg, err := f.Config()
	if err != nil {
		t.Fatal(err)
	}
	store, err := f.LedgerOrCreate(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	x.rl = newReloader(f, cfg, store, gateway.NewMetrics(), true)
	if err := x.rl.start(cfg); err != nil {
		t.Fatal(err)
	}
	return x
}

// setKey writes name's key file and lets the provider accept the key.
func (x *reloadFixture) setKey(name, key string) {
	x.t.Helper()
	x.prov.AddKey(key, "decide-mini")
	if err := os.WriteFile(filepath.Join(x.home, "keys", name), []byte(key), 0o600); err != nil {
		x.t.Fatal(err)
	}
}

// writeConfig writes rotor.yaml: extra, then the credentials of pool api
// (with a key file each, written unless there is one already).
func (x *reloadFixture) writeConfig(extra string, creds ...cred) {
	x.t.Helper()
	var b strings.Builder
	b.WriteString(extra + "pools:\n  api:\n    credentials:\n")
	for _, c := range creds {
		if _, err := os.Stat(filepath.Join(x.home, "keys", c.name)); err != nil {
			x.setKey(c.name, "sk-"+c.name+"-0123456789abcdef0123456789abcdef")
		}
		u := c.baseURL
		if u == "" {
			u = x.prov.URL()
		}
		fmt.Fprintf(&b, "      - {name: %s, region: us, base_url: %q, api_key_file: keys/%s, model_profiles: {decide-mini: {supported_endpoints: [/v1/decisions]}}%s}\n",
			c.name, u, c.name, c.extra)
	}
	if err := os.WriteFile(filepath.Join(x.home, "rotor.yaml"), []byte(b.String()), 0o600); err != nil {
		x.t.Fatal(err)
	}
}

// decide sends one Decisions request through the current generation and
// returns the status and the credential that answered.
func (x *reloadFixture) decide() (int, string) {
	x.t.Helper()
	req := httptest.NewRequest("POST", "/v1/decisions", strings.NewReader(`{"model":"api/decide-mini","input":"Is the sky blue?","question":{"type":"predicate"}}`))
	ctx, _ := httpx.WithAccessInfo(httpx.WithCaller(req.Context(), httpx.Caller{Label: "test"}))
	rec := httptest.NewRecorder()
	x.rl.decisions().ServeHTTP(rec, req.WithContext(ctx))
	return rec.Code, rec.Header().Get("X-Rotor-Credential")
}

// resting is the set of credentials of pool api whose legacy rest is live.
func resting(g *generation) map[string]bool {
	out := map[string]bool{}
	for _, c := range g.pools["api"].Snapshot().Credentials {
		if !c.RestingUntil.IsZero() {
			out[c.Name] = true
		}
	}
	return out
}

// catalogued is the set of credentials whose catalog the route holds.
func catalogued(g *generation) map[string]bool {
	out := map[string]bool{}
	for _, c := range g.route.Status() {
		if !c.CatalogFetched.IsZero() {
			out[c.Name] = true
		}
	}
	return out
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k, v := range m {
		if v {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// A credential is unchanged when its name, pool, base_url, region and key
// bytes are: it keeps its catalog and its rest across a reload, whatever
// else about it changed (visibility here). A new base_url or new key bytes
// make it changed, with fresh state; an outcome recorded by a request
// still in flight on the old generation reaches the new one.
func TestReloadKeepsStateOfUnchangedCredentialsOnly(t *testing.T) {
	x := newReloadFixture(t, cred{name: "team-a"}, cred{name: "team-b"}, cred{name: "team-c"})
	if code, by := x.decide(); code != 200 || by != "team-a" {
		t.Fatalf("first request: %d by %q", code, by)
	}
	old := x.rl.current()
	for _, n := range []string{"team-a", "team-b", "team-c"} {
		old.pools["api"].Record(n, pool.Observation{Status: http.StatusTooManyRequests})
	}
	if got := keysOf(resting(old)); !slices.Equal(got, []string{"team-a", "team-b", "team-c"}) {
		t.Fatalf("resting before the reload: %v", got)
	}

	localhost := strings.Replace(x.prov.URL(), "127.0.0.1", "localhost", 1)
	x.setKey("team-c", "sk-team-c-rotated-0123456789abcdef0123456789")
	x.writeConfig("", cred{name: "team-a", extra: `, visibility: {allow: ["decide-*"]}`}, cred{name: "team-b", baseURL: localhost},
		cred{name: "team-c"}, cred{name: "team-d"})
	res, err := x.rl.reload("test")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Added, []string{"api/team-d"}) || !slices.Equal(res.Changed, []string{"api/team-b", "api/team-c"}) ||
		len(res.Removed) != 0 || !slices.Equal(res.Settings, []string{"pools.api.credentials[0].visibility"}) || res.Generation != 2 {
		t.Errorf("reload said %+v; want team-d added, team-b and team-c changed, team-a's visibility a setting changed, generation 2", res)
	}
	cur := x.rl.current()
	if got := keysOf(resting(cur)); !slices.Equal(got, []string{"team-a"}) {
		t.Errorf("resting after the reload: %v, want only the unchanged team-a", got)
	}
	if got := keysOf(catalogued(cur)); !slices.Equal(got, []string{"team-a"}) {
		t.Errorf("catalogs after the reload: %v, want only the unchanged team-a's", got)
	}

	// A request begun before the reload succeeds on team-a afterwards:
	// its outcome clears the rest the new generation shares.
	old.pools["api"].Record("team-a", pool.Observation{Status: http.StatusOK})
	if got := keysOf(resting(cur)); len(got) != 0 {
		t.Errorf("resting after the old generation's success: %v, want none", got)
	}
	if code, by := x.decide(); code != 200 || by != "team-a" {
		t.Errorf("request after the reload: %d by %q, want 200 by team-a", code, by)
	}

	// A new name for the same key is another credential.
	b, _ := os.ReadFile(filepath.Join(x.home, "keys", "team-a"))
	x.setKey("team-z", string(b))
	x.writeConfig("", cred{name: "team-z"}, cred{name: "team-b", baseURL: localhost}, cred{name: "team-c"}, cred{name: "team-d"})
	res, err = x.rl.reload("test")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Added, []string{"api/team-z"}) || !slices.Equal(res.Removed, []string{"api/team-a"}) || len(res.Changed) != 0 {
		t.Errorf("rename: reload said %+v, want team-z added and team-a removed", res)
	}
}

// A configuration that does not validate, or that changes a restart-only
// key, is refused with one log line naming the key and an answer naming
// it; nothing of it applies (not even its reloadable parts) and the old
// generation keeps serving.
func TestReloadRefusesBadConfigAndRestartOnlyKeys(t *testing.T) {
	tests := []struct {
		name, extra, code, key string
	}{
		{"bridge listen", "bridge: {listen: '127.0.0.1:9999'}\n", httpx.CodeRestartRequired, "bridge.listen"},
		{"runtime listen", "runtime: {listen: '127.0.0.1:9998'}\n", httpx.CodeRestartRequired, "runtime.listen"},
		{"runtime url", "bridge: {runtime_url: 'http://127.0.0.1:9'}\n", httpx.CodeRestartRequired, "bridge.runtime_url"},
		{"ledger", "ledger: {busy_timeout: 9s}\n", httpx.CodeRestartRequired, "ledger.busy_timeout"},
		{"model cooldown", "model_cooldown: {enabled: true}\n", httpx.CodeRestartRequired, "model_cooldown.enabled"},
		{"learned storage", "learned_cooldown: {storage: sqlite}\n", httpx.CodeRestartRequired, "learned_cooldown.storage"},
		{"origins", "bridge: {allowed_origins: ['http://example.test']}\n", httpx.CodeRestartRequired, "bridge.allowed_origins"},
		{"bad duration", "runtime: {deadline: soon}\n", httpx.CodeConfigInvalid, "runtime.deadline"},
		{"unknown key", "catalog_tll: 5m\n", httpx.CodeConfigInvalid, "catalog_tll"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := newReloadFixture(t, cred{name: "team-a"})
			before := x.rl.current()
			x.logs.Reset()
			// The same file also adds a credential: refused, it must not
			// appear either.
			x.writeConfig(tt.extra, cred{name: "team-a"}, cred{name: "team-d"})
			_, err := x.rl.reload("test")
			he, ok := errors.AsType[*httpx.Error](err)
			if !ok || he.Code != tt.code || he.Param != tt.key || !strings.Contains(he.Message, tt.key) {
				t.Fatalf("reload: %v, want %s naming %s", err, tt.code, tt.key)
			}
			if x.rl.current() != before {
				t.Error("a refused reload replaced the running generation")
			}
			lines := strings.Split(strings.TrimSpace(x.logs.String()), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], "reload refused") || !strings.Contains(lines[0], "config_key="+tt.key) {
				t.Errorf("log, want one line naming %s:\n%s", tt.key, x.logs)
			}
			if code, by := x.decide(); code != 200 || by != "team-a" {
				t.Errorf("after the refused reload: %d by %q", code, by)
			}
		})
	}
}

// Reloadable settings apply: the log level at once; a malformed spec
// setting warns once and the reload still applies (spec behaviour).
func TestReloadAppliesSettingsAndSpecRules(t *testing.T) {
	x := newReloadFixture(t, cred{name: "team-a"})
	x.writeConfig("log: {level: debug}\ncatalog_ttl: 1m\nmodel_cooldown: {max_seconds: lots}\n", cred{name: "team-a"})
	x.logs.Reset()
	res, err := x.rl.reload("test")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Settings, []string{"catalog_ttl", "log.level"}) {
		t.Errorf("settings changed %v, want catalog_ttl and log.level", res.Settings)
	}
	if !x.f.Logger().Enabled(context.Background(), slog.LevelDebug) {
		t.Error("log.level debug not in force after the reload")
	}
	if n := strings.Count(x.logs.String(), "malformed setting ignored"); n != 1 || !strings.Contains(x.logs.String(), "model_cooldown.max_seconds") {
		t.Errorf("%d warnings for the malformed max_seconds, want 1 naming it:\n%s", n, x.logs)
	}
	if strings.Contains(x.logs.String(), "lots") {
		t.Error("the malformed value was logged")
	}
}

// learned_cooldown.adapt is reloadable: a reload turns it on and off in
// the learner of the new generation, and says so.
func TestReloadTakesLearnedAdapt(t *testing.T) {
	const learn = `learned_cooldown: {mode: apply, policy_json: '{"buckets":[{"provider":"api","model":"decide-mini","quota_bucket":null}]}'%s}` + "\n"
	x := newReloadFixture(t, cred{name: "team-a"})
	x.writeConfig(fmt.Sprintf(learn, ""), cred{name: "team-a"})
	if _, err := x.rl.reload("test"); err != nil {
		t.Fatal(err)
	}
	if g := x.rl.current(); g.learner == nil || g.learner.Adapt() {
		t.Fatalf("apply without adapt: learner %v, want one with adapt off", g.learner)
	}
	for _, on := range []bool{true, false} {
		x.writeConfig(fmt.Sprintf(learn, fmt.Sprintf(", adapt: %v", on)), cred{name: "team-a"})
		res, err := x.rl.reload("test")
		if err != nil {
			t.Fatalf("reload with adapt %v: %v", on, err)
		}
		if got := x.rl.current().learner.Adapt(); got != on {
			t.Errorf("after the reload adapt = %v, want %v", got, on)
		}
		if on && !slices.Contains(res.Settings, "learned_cooldown.adapt") {
			t.Errorf("settings changed %v, want learned_cooldown.adapt among them", res.Settings)
		}
	}
}

// A reload that changes no learned setting keeps the learner itself: what
// it holds in memory (its warn-once flags, a sibling's fall, refused
// retries, a climb) survives a credential added or a deadline changed.
// One that changes a learned setting gets a new learner.
func TestReloadKeepsTheLearnerWhenItsSettingsStay(t *testing.T) {
	const learn = `learned_cooldown: {mode: apply, policy_json: '{"buckets":[{"provider":"api","model":"%s","quota_bucket":null}]}'}` + "\n"
	x := newReloadFixtureWith(t, fmt.Sprintf(learn, "decide-mini"), cred{name: "team-a"})
	first := x.rl.current().learner
	if first == nil {
		t.Fatal("no learner in apply mode")
	}
	x.writeConfig(fmt.Sprintf(learn, "decide-mini")+"runtime: {deadline: 20s}\n", cred{name: "team-a"}, cred{name: "team-b"})
	if _, err := x.rl.reload("test"); err != nil {
		t.Fatal(err)
	}
	if x.rl.current().learner != first {
		t.Error("a reload that changed no learned setting replaced the learner (and forgot what it held)")
	}
	x.writeConfig(fmt.Sprintf(learn, "decide-large"), cred{name: "team-a"})
	if _, err := x.rl.reload("test"); err != nil {
		t.Fatal(err)
	}
	if x.rl.current().learner == first {
		t.Error("a reload that changed policy_json kept the old learner")
	}
}

// rotor bridge reload against a real bridge: the default token reloads and
// the command says what changed; another token is refused (exit 2,
// admin_only); a file that does not validate is refused before the bridge
// is asked.
func TestBridgeReloadRun(t *testing.T) {
	ctx := context.Background()
	x := newReloadFixture(t, cred{name: "team-a"})
	if err := ensureBridgeToken(ctx, x.f); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := x.f.Config()
	store, _ := x.f.LedgerOrCreate(ctx)
	w, err := wire(x.f, cfg, store, gateway.NewMetrics(), wireSpec{Runtime: &gateway.Config{}, Bridge: &bridge.Config{Port: portOf(ln), AdminToken: func() ([32]byte, error) { return adminToken(x.f) }}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.bridge.Close()
	srv := &http.Server{Handler: w.handler}
	go srv.Serve(ln)
	defer srv.Close()
	if _, err := writeBridgeRecord(x.home, listenURL(ln)); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	run := func() (string, error) {
		out := &bytes.Buffer{}
		err := reloadRun(ctx, &reloadOptions{IO: &IOStreams{Out: out, ErrOut: &bytes.Buffer{}}, Config: x.f.freshConfig, Home: x.f.Home,
			LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }, HTTPClient: x.f.HTTPClient, Clock: clock.Real()})
		return out.String(), err
	}

	if out, err := run(); err != nil || out != "reloaded: config generation 2\nno change\n" {
		t.Errorf("reload without a change: %v\n%s", err, out)
	}
	x.writeConfig("", cred{name: "team-a"}, cred{name: "team-d"})
	if out, err := run(); err != nil || out != "reloaded: config generation 3\nadded credential api/team-d\n" {
		t.Errorf("reload adding team-d: %v\n%s", err, out)
	}

	other := tokenfile.Generate()
	if err := store.AddClientToken(ctx, "ci", other.Hash(), false); err != nil {
		t.Fatal(err)
	}
	env["ROTOR_TOKEN"] = other.Reveal()
	_, err = run()
	wantUsageError(t, "reload with another token", err, "admin_only")
	// A token the ledger does not hold is refused (401): exit 2 naming
	// where it came from, never echoing it.
	unknown := tokenfile.Generate()
	env["ROTOR_TOKEN"] = unknown.Reveal()
	_, err = run()
	wantUsageError(t, "reload with an unknown token", err, "refused the token from ROTOR_TOKEN")
	if strings.Contains(fmt.Sprint(err), unknown.Reveal()) {
		t.Errorf("reload with an unknown token printed it: %v", err)
	}
	delete(env, "ROTOR_TOKEN")

	x.writeConfig("ledger: {busy_timeout: 9s}\n", cred{name: "team-a"})
	_, err = run()
	wantUsageError(t, "reload of a restart-only key", err, "ledger.busy_timeout")

	x.writeConfig("runtime: {deadline: soon}\n", cred{name: "team-a"})
	_, err = run()
	wantUsageError(t, "reload of a bad file", err, "runtime.deadline")
	if g := w.reload.current().n; g != 3 {
		t.Errorf("generation %d after refused reloads, want 3", g)
	}
}

// A malformed max_seconds with model cooldown on would turn the feature
// off, which needs a restart: the reload is refused as config_invalid
// naming the malformed setting, not as a change of model_cooldown.enabled,
// a key the user never touched.
func TestReloadRefusalNamesTheMalformedSetting(t *testing.T) {
	x := newReloadFixtureWith(t, "model_cooldown: {enabled: true, max_seconds: 3600}\n", cred{name: "team-a"})
	x.writeConfig("model_cooldown: {enabled: true, max_seconds: 36OO}\n", cred{name: "team-a"})
	_, err := x.rl.reload("test")
	e, ok := errors.AsType[*httpx.Error](err)
	if !ok || e.Code != httpx.CodeConfigInvalid || e.Param != "model_cooldown.max_seconds" || strings.Contains(e.Error(), "36OO") {
		t.Errorf("reload with a malformed max_seconds = %v, want config_invalid naming model_cooldown.max_seconds, without the value", err)
	}
	if !x.rl.current().cfg.ModelCooldown.Enabled {
		t.Error("the running configuration was not kept")
	}
}

// A malformed setting elsewhere (learned_cooldown.mode: learning off) is
// not blamed for a restart-only key the user changed.
func TestReloadBlamesOnlyTheMalformedSettingBehindTheKey(t *testing.T) {
	const bad = "learned_cooldown: {mode: loud}\n"
	x := newReloadFixtureWith(t, bad, cred{name: "team-a"})
	x.writeConfig(bad+"runtime: {read_timeout: 7s}\n", cred{name: "team-a"})
	_, err := x.rl.reload("test")
	if e, ok := errors.AsType[*httpx.Error](err); !ok || e.Code != httpx.CodeRestartRequired || e.Param != "runtime.read_timeout" {
		t.Errorf("reload changing read_timeout beside a malformed learned_cooldown.mode = %v, want restart_required naming runtime.read_timeout", err)
	}
}

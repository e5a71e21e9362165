package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/ledger"
)

// decideBig sends one Decisions request whose input is n bytes through the
// current generation and returns the status and the error code.
func (x *reloadFixture) decideBig(n int) (int, string) {
	x.t.Helper()
	// Concatenated, not formatted: %q over tens of MiB takes seconds
	// under the race detector.
	body := `{"model":"api/decide-mini","input":"` + strings.Repeat("a", n) + `","question":{"type":"predicate"}}`
	req := httptest.NewRequest("POST", "/v1/decisions", strings.NewReader(body))
	ctx, info := httpx.WithAccessInfo(httpx.WithCaller(req.Context(), httpx.Caller{Label: "test"}))
	rec := httptest.NewRecorder()
	x.rl.decisions().ServeHTTP(rec, req.WithContext(ctx))
	return rec.Code, info.Code
}

// runtime.max_buffered_mb bounds the bytes buffered across the requests in
// flight (503 server_overloaded past it). A reload, even one that changes
// nothing, must not hand the next requests a fresh, empty budget while the
// requests begun before it still hold their bytes.
func TestReloadKeepsTheBufferedBytesInFlight(t *testing.T) {
	x := newReloadFixtureWith(t, "runtime: {max_buffered_mb: 65}\n", cred{name: "team-a"})
	ready := make(chan struct{})
	defer close(ready)
	key := "sk-team-a-0123456789abcdef0123456789abcdef"
	x.prov.Script(key, "decide-mini", fp.Await(ready, fp.OK()))

	// One request holds 35 MiB of its body while its provider call is held.
	done := make(chan int, 1)
	go func() { c, _ := x.decideBig(35 << 20); done <- c }()
	// A wait for an event, bounded only against a hang: a 35 MiB body
	// under the race detector on a loaded machine takes seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := x.prov.WaitHits(ctx, fp.PathDecisions, 1); err != nil {
		t.Fatal(err)
	}

	// Without a reload a second one that would pass 65 MiB is refused.
	if code, ecode := x.decideBig(35 << 20); code != 503 || ecode != httpx.CodeOverloaded {
		t.Fatalf("before the reload: %d %s, want 503 server_overloaded", code, ecode)
	}
	// A reload that changes nothing.
	if _, err := x.rl.reload("test"); err != nil {
		t.Fatal(err)
	}
	if code, ecode := x.decideBig(35 << 20); code != 503 || ecode != httpx.CodeOverloaded {
		t.Errorf("after a no-change reload, with 35 MiB still buffered by a request in flight: %d %q, want 503 server_overloaded (max_buffered_mb: 65)", code, ecode)
	}
}

// Reloads racing requests: run with -race.
func TestReloadRacesRequests(t *testing.T) {
	const learn = `learned_cooldown: {mode: %s, policy_json: '{"buckets":[{"provider":"api","model":"decide-mini","quota_bucket":null}]}'}` + "\n"
	x := newReloadFixtureWith(t, fmt.Sprintf(learn, "apply"), cred{name: "team-a"}, cred{name: "team-b"})
	x.prov.SetDefault("sk-team-a-0123456789abcdef0123456789abcdef", "decide-mini", fp.RateLimited("1"))
	stop := make(chan struct{})
	errs := make(chan string, 100)
	var wg = make(chan struct{}, 4)
	for range 4 {
		go func() {
			defer func() { wg <- struct{}{} }()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if code, _ := x.decide(); code != 200 && code != 429 {
					select {
					case errs <- fmt.Sprint(code):
					default:
					}
				}
				_ = x.rl.status(context.Background(), "test", nil)
			}
		}()
	}
	for i := range 30 {
		mode := []string{"apply", "shadow", "off"}[i%3]
		extra := fmt.Sprintf(learn, mode) + fmt.Sprintf("runtime: {deadline: %ds}\nmodel_cooldown: {max_seconds: %d}\nlog: {level: %s}\n", 10+i, 60+i, []string{"debug", "info"}[i%2])
		creds := []cred{{name: "team-a"}, {name: "team-b"}}
		if i%2 == 1 {
			creds = []cred{{name: "team-b"}, {name: "team-c"}}
		}
		x.writeConfig(extra, creds...)
		if _, err := x.rl.reload("test"); err != nil {
			t.Fatal(err)
		}
	}
	close(stop)
	for range 4 {
		<-wg
	}
	close(errs)
	for e := range errs {
		t.Errorf("request answered %s", e)
	}
}

// A reload that changes a pool's options (auth_rest, prefer_active,
// first_key_fallback, quota_buckets) or a credential's visibility applies
// them; POST /v1/admin/reload and `rotor bridge reload` must then not say
// "no change" (README: "one line per credential added, removed or changed
// ... and per setting changed, or no change"; the answer's settings are
// "the other keys that changed").
func TestReloadReportsPoolOptionChanges(t *testing.T) {
	x := newReloadFixture(t, cred{name: "team-a"}, cred{name: "team-b"})
	for _, tt := range []struct{ name, extra string }{
		{"auth_rest", "    auth_rest: 10s\n"},
		{"prefer_active", "    prefer_active: true\n"},
		{"quota_buckets", "    quota_buckets: {shared: [decide-mini]}\n"},
	} {
		// writeConfig writes "pools:\n  api:\n    credentials:"; put the
		// option in the pool.
		x.writeConfig("", cred{name: "team-a"}, cred{name: "team-b"})
		if _, err := x.rl.reload("reset"); err != nil {
			t.Fatal(err)
		}
		p := x.home + "/rotor.yaml"
		b, _ := os.ReadFile(p)
		s := strings.Replace(string(b), "  api:\n", "  api:\n"+tt.extra, 1)
		if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		res, err := x.rl.reload("test")
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"pools.api." + tt.name}; !slices.Equal(res.Settings, want) || len(res.Changed) != 0 {
			t.Errorf("%s: the reload applied a new pool option but answered %+v, want settings %v", tt.name, res, want)
		}
	}
}

// The same for a credential's visibility: the credential is unchanged (it
// keeps its state), but its visibility is a setting the reload applied.
func TestReloadReportsVisibilityChanges(t *testing.T) {
	x := newReloadFixture(t, cred{name: "team-a"}, cred{name: "team-b"})
	x.writeConfig("", cred{name: "team-a"}, cred{name: "team-b", extra: `, visibility: {deny: ["decide-*"]}`})
	res, err := x.rl.reload("test")
	if err != nil {
		t.Fatal(err)
	}
	if code, by := x.decide(); code != 200 || by != "team-a" {
		t.Fatalf("after the visibility change: %d by %q", code, by)
	}
	if len(res.Changed) != 0 || !slices.Equal(res.Settings, []string{"pools.api.credentials[1].visibility"}) {
		t.Errorf("visibility: the reload applied team-b's new visibility but answered %+v, want it as a setting changed", res)
	}
	// So are team-a's model profiles: a reload that changes only them must
	// not say "no change".
	p := x.home + "/rotor.yaml"
	b, _ := os.ReadFile(p)
	s := strings.Replace(string(b), "supported_endpoints: [/v1/decisions]", "supported_endpoints: [/v1/decisions, /v1/responses]", 1)
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	if res, err = x.rl.reload("test"); err != nil {
		t.Fatal(err)
	}
	if len(res.Changed) != 0 || !slices.Equal(res.Settings, []string{"pools.api.credentials[0].model_profiles"}) {
		t.Errorf("model_profiles: the reload applied team-a's new profiles but answered %+v, want them as a setting changed", res)
	}
}

// A credential moved to another region is another credential (its catalog
// and rest are the old region's): the reload names it changed.
func TestReloadNamesANewRegionChanged(t *testing.T) {
	x := newReloadFixture(t, cred{name: "team-a"}, cred{name: "team-b"})
	p := x.home + "/rotor.yaml"
	b, _ := os.ReadFile(p)
	s := strings.Replace(string(b), "{name: team-b, region: us,", "{name: team-b, region: eu,", 1)
	if s == string(b) {
		t.Fatal("no region to change in rotor.yaml")
	}
	if err := os.WriteFile(p, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := x.rl.reload("test")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.Changed, []string{"api/team-b"}) || len(res.Added)+len(res.Removed) != 0 {
		t.Errorf("region: reload said %+v, want team-b changed", res)
	}
}

// rotor_refusals_total's reason is "an error code" (README, Metrics): a
// request refused with 503 server_overloaded counts under that code.
func TestRefusalReasonIsTheErrorCode(t *testing.T) {
	x := newReloadFixtureWith(t, "runtime: {max_buffered_mb: 65}\n", cred{name: "team-a"})
	ready := make(chan struct{})
	defer close(ready)
	x.prov.Script("sk-team-a-0123456789abcdef0123456789abcdef", "decide-mini", fp.Await(ready, fp.OK()))
	go x.decideBig(35 << 20)
	// A wait for an event, bounded only against a hang: a 35 MiB body
	// under the race detector on a loaded machine takes seconds.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := x.prov.WaitHits(ctx, fp.PathDecisions, 1); err != nil {
		t.Fatal(err)
	}
	if code, ecode := x.decideBig(35 << 20); code != 503 || ecode != httpx.CodeOverloaded {
		t.Fatalf("%d %s, want 503 server_overloaded", code, ecode)
	}
	rec := httptest.NewRecorder()
	x.rl.metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var lines []string
	for _, l := range strings.Split(rec.Body.String(), "\n") {
		if strings.HasPrefix(l, "rotor_refusals_total") {
			lines = append(lines, l)
		}
	}
	if !strings.Contains(rec.Body.String(), `rotor_refusals_total{reason="server_overloaded"} 1`) {
		t.Errorf("refusals after one 503 server_overloaded:\n%s\nwant reason=\"server_overloaded\"", strings.Join(lines, "\n"))
	}
}

// A reload that finds no rotor.yaml (an editor's save window, a file moved
// aside; SIGHUP from systemd's ExecReload) cannot read the configuration:
// it must be refused and keep the running one, not apply the defaults
// (no pools), which drops every credential and all its state and answers
// every request 503 no_credentials.
func TestReloadWithoutTheFileKeepsTheRunningConfiguration(t *testing.T) {
	for _, c := range []struct {
		name  string
		spoil func(p string) error
	}{
		{"moved aside", func(p string) error { return os.Rename(p, p+".editing") }},
		// A save that truncates first (cp, shell >, editors saving in
		// place), caught before it wrote: read as the defaults, it
		// removed every credential.
		{"empty mid-save", func(p string) error { return os.WriteFile(p, []byte("\n"), 0o600) }},
		// The same save caught after the starter file's opening comments:
		// a file of comments alone parses as the defaults.
		{"comments only mid-save", func(p string) error {
			return os.WriteFile(p, []byte("# rotor configuration\n# written by rotor init\n"), 0o600)
		}},
	} {
		x := newReloadFixture(t, cred{name: "team-a"})
		before := x.rl.current()
		p := x.home + "/rotor.yaml"
		if err := c.spoil(p); err != nil {
			t.Fatal(err)
		}
		res, err := x.rl.reload("SIGHUP")
		if err == nil || !strings.Contains(err.Error(), "rotor.yaml") {
			t.Errorf("%s: reload: %+v, %v; want it refused, naming the file", c.name, res, err)
		}
		if x.rl.current() != before {
			t.Errorf("%s: the reload replaced the running generation", c.name)
		}
		if code, by := x.decide(); code != 200 || by != "team-a" {
			t.Errorf("%s: after the reload: %d by %q, want 200 by team-a", c.name, code, by)
		}
	}
}

// Status after a rest and a reload that lowers model_cooldown.max_seconds:
// the rest shown is the capped one.
func TestStatusAfterRestAndCapReload(t *testing.T) {
	x := newReloadFixture(t, cred{name: "team-a"}, cred{name: "team-b"})
	x.prov.Script("sk-team-a-0123456789abcdef0123456789abcdef", "decide-mini", fp.RateLimited("600"))
	if code, by := x.decide(); code != 200 || by != "team-b" {
		t.Fatalf("first: %d by %q", code, by)
	}
	now := x.f.Clock.Now()
	until := func() time.Time {
		for _, c := range x.rl.current().pools["api"].Snapshot().Credentials {
			if c.Name == "team-a" {
				return c.RestingUntil
			}
		}
		return time.Time{}
	}
	if u := until(); u.Before(now.Add(500 * time.Second)) {
		t.Fatalf("team-a resting until %v, want about now+600s", u)
	}
	x.writeConfig("model_cooldown: {max_seconds: 60}\n", cred{name: "team-a"}, cred{name: "team-b"})
	if _, err := x.rl.reload("test"); err != nil {
		t.Fatal(err)
	}
	if u := until(); u.After(now.Add(61 * time.Second)) {
		t.Errorf("after lowering max_seconds to 60: team-a resting until %v (now %v)", u, now)
	}
	b, _ := json.Marshal(x.rl.status(context.Background(), "t", nil))
	t.Logf("%s", b)
}

// README, Reload: "a malformed spec setting that would turn its feature
// off ... is refused as config_invalid naming that setting". A malformed
// learned_cooldown.storage while learning runs on the ledger turns learning
// off (and storage back to memory).
func TestReloadMalformedStorageIsConfigInvalid(t *testing.T) {
	const learn = `learned_cooldown: {mode: apply, storage: %s, policy_json: '{"buckets":[{"provider":"api","model":"decide-mini","quota_bucket":null}]}'}` + "\n"
	x := newReloadFixtureWith(t, fmt.Sprintf(learn, "sqlite"), cred{name: "team-a"})
	x.writeConfig(fmt.Sprintf(learn, "bogus"), cred{name: "team-a"})
	_, err := x.rl.reload("test")
	he, ok := errors.AsType[*httpx.Error](err)
	if !ok || he.Code != httpx.CodeConfigInvalid || he.Param != "learned_cooldown.storage" {
		t.Errorf("reload with a malformed storage: %v (code %v), want config_invalid naming learned_cooldown.storage", err, func() string {
			if he != nil {
				return he.Code
			}
			return ""
		}())
	}
}

// README, Reload: an unchanged credential keeps "its unsupported-endpoint
// answers ..., and an outcome that a request begun before the reload
// records still reaches it". A 405 answered to a request begun before a
// reload (which changed nothing) spares the next requests that call, as
// it does without a reload.
func TestUnsupportedAnswerOfAnInFlightRequestSurvivesTheReload(t *testing.T) {
	for _, reload := range []bool{false, true} {
		x := newReloadFixture(t, cred{name: "team-a"}, cred{name: "team-b"})
		keyA := "sk-team-a-0123456789abcdef0123456789abcdef"
		// Warm both catalogs first.
		if code, by := x.decide(); code != 200 || by != "team-a" {
			t.Fatalf("warm-up: %d by %q", code, by)
		}
		ready := make(chan struct{})
		x.prov.Script(keyA, "decide-mini", fp.Await(ready, fp.MethodNotAllowed()))
		type result struct {
			code int
			by   string
		}
		done := make(chan result, 1)
		go func() { c, by := x.decide(); done <- result{c, by} }()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := x.prov.WaitHits(ctx, fp.PathDecisions, 2); err != nil {
			cancel()
			t.Fatal(err)
		}
		cancel()
		if reload {
			if _, err := x.rl.reload("test"); err != nil {
				t.Fatal(err)
			}
		}
		close(ready)
		if r := <-done; r.code != 200 || r.by != "team-b" {
			t.Fatalf("reload %v: in-flight request: %d by %q, want 200 by team-b after team-a's 405", reload, r.code, r.by)
		}
		before := x.prov.HitsFor(keyA, fp.PathDecisions)
		code, by := x.decide()
		if after := x.prov.HitsFor(keyA, fp.PathDecisions); after != before || by != "team-b" {
			t.Errorf("reload %v: next request %d by %q; team-a got %d more Decisions calls, want 0 (its 405 is cached for 5 minutes)", reload, code, by, after-before)
		}
	}
}

// The tokens and cost series add up to the ledger's rows after a mix of
// traffic: successes, a 429 failed over, a pool all rate limited, a
// provider 400, a broken answer, a stream, across a reload.
func TestMetricsMatchTheLedgerAfterMixedTraffic(t *testing.T) {
	x := newReloadFixture(t, cred{name: "team-a"}, cred{name: "team-b"})
	store := x.rl.store
	watchServing(x.rl.metrics, store)
	keyA, keyB := "sk-team-a-0123456789abcdef0123456789abcdef", "sk-team-b-0123456789abcdef0123456789abcdef"
	for _, k := range []string{keyA, keyB} {
		x.prov.SetCatalog(k, "decide-mini", "gpt-4o-mini")
	}
	ctx := context.Background()
	if _, err := store.PutPrices(ctx, []ledger.Price{{Model: "gpt-4o-mini", InputMicros: 150000, OutputMicros: 600000}}, false); err != nil {
		t.Fatal(err)
	}
	chat := func(body string) int {
		req := httptest.NewRequest("POST", "/v1/chat/completions", strings.NewReader(body))
		c, _ := httpx.WithAccessInfo(httpx.WithCaller(req.Context(), httpx.Caller{Label: "test"}))
		rec := httptest.NewRecorder()
		x.rl.openAI().ServeHTTP(rec, req.WithContext(c))
		return rec.Code
	}
	const plain = `{"model":"api/gpt-4o-mini","messages":[{"role":"user","content":"hello there"}]}`
	const stream = `{"model":"api/gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`
	var codes []int
	codes = append(codes, chat(plain))
	x.prov.Script(keyA, "gpt-4o-mini", fp.RateLimited("1"))
	codes = append(codes, chat(plain)) // failover to team-b
	codes = append(codes, chat(stream))
	x.writeConfig("runtime: {deadline: 20s}\n", cred{name: "team-a"}, cred{name: "team-b"})
	if _, err := x.rl.reload("test"); err != nil {
		t.Fatal(err)
	}
	x.f.Clock.(*clock.Fake).Advance(10 * time.Second)
	x.prov.Script(keyA, "gpt-4o-mini", fp.Status(400, `{"error":{"message":"bad","type":"invalid_request_error","code":"bad_thing"}}`, http.Header{"Content-Type": {"application/json"}}))
	codes = append(codes, chat(plain))
	x.prov.Script(keyA, "gpt-4o-mini", fp.ResetMidAnswer(20))
	codes = append(codes, chat(plain))
	x.prov.Script(keyA, "gpt-4o-mini", fp.RateLimited("600"))
	x.prov.Script(keyB, "gpt-4o-mini", fp.RateLimited("600"))
	codes = append(codes, chat(plain))
	code, _ := x.decide()
	codes = append(codes, code)
	t.Logf("answers: %v", codes)

	rows, err := store.Rows(ctx, time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC), 0)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{}
	for _, r := range rows {
		add := func(kind string, c ledger.Count) {
			if c.Known {
				want["tokens "+r.Operation+" "+kind] += float64(c.V)
			}
		}
		add("input", r.InputTokens)
		add("output", r.OutputTokens)
		add("cached", r.CachedInputTokens)
		add("reasoning", r.ReasoningTokens)
		if r.CostMicros.Known {
			want["cost "+r.Operation] += float64(r.CostMicros.V) / 1e6
		} else {
			want["unknown "+r.Operation]++
		}
		t.Logf("row %s %s status=%d code=%s in=%v out=%v cost=%v", r.Operation, r.Credential, r.Status, r.ErrorCode, r.InputTokens, r.OutputTokens, r.CostMicros)
	}
	rec := httptest.NewRecorder()
	x.rl.metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	got := map[string]float64{}
	for _, l := range strings.Split(rec.Body.String(), "\n") {
		var op, kind string
		var v float64
		switch {
		case strings.HasPrefix(l, "rotor_tokens_total{"):
			// rotor_tokens_total{kind="input",operation="x"} 1
			if _, err := fmt.Sscanf(strings.NewReplacer(`"`, " ", ",", " ", "{", " ", "}", " ").Replace(l), "rotor_tokens_total kind= %s operation= %s %g", &kind, &op, &v); err == nil {
				got["tokens "+op+" "+kind] += v
			}
		case strings.HasPrefix(l, "rotor_cost_usd_total{"):
			if _, err := fmt.Sscanf(strings.NewReplacer(`"`, " ", "{", " ", "}", " ").Replace(l), "rotor_cost_usd_total operation= %s %g", &op, &v); err == nil && v != 0 {
				got["cost "+op] += v
			}
		case strings.HasPrefix(l, "rotor_cost_unknown_rows_total{"):
			if _, err := fmt.Sscanf(strings.NewReplacer(`"`, " ", "{", " ", "}", " ").Replace(l), "rotor_cost_unknown_rows_total operation= %s %g", &op, &v); err == nil {
				got["unknown "+op] += v
			}
		}
	}
	for k, v := range want {
		if d := got[k] - v; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s: metrics %v, ledger %v", k, got[k], v)
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok && v != 0 {
			t.Errorf("%s: metrics %v, ledger nothing", k, v)
		}
	}
}

// A SIGHUP that comes while the server starts (an edit and a systemctl
// reload right after start) waits for the watcher and reloads once the
// server runs: it was ignored, and the edit never applied.
func TestHangupDuringStartReloadsOnceServing(t *testing.T) {
	x := newReloadFixture(t, cred{name: "team-a"})
	before := x.rl.current().n
	x.writeConfig("", cred{name: "team-a"}, cred{name: "team-b"})
	ch := make(chan os.Signal, 1)
	ch <- syscall.SIGHUP // caught by catchHangup before the watcher ran
	stop := watchHangup(x.rl, ch)
	defer stop()
	deadline := time.Now().Add(30 * time.Second)
	for x.rl.current().n == before {
		if time.Now().After(deadline) {
			t.Fatal("the SIGHUP caught before the watcher started was never applied")
		}
		time.Sleep(time.Millisecond)
	}
	if _, ok := x.rl.current().pools["api"]; !ok {
		t.Fatal("no api pool after the reload")
	}
	names := []string{}
	for _, c := range x.rl.current().pools["api"].Credentials() {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"team-a", "team-b"}) {
		t.Errorf("credentials after the reload %v, want team-a and team-b", names)
	}
}

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	fp "github.com/rotorhq/rotor/internal/fakeprovider"
)

// reloadConfig writes rotor.yaml with the named credentials (of the keys
// in env E2E_KEY_<NAME>) in this order, after extra.
func (e *e2e) reloadConfig(provURL, extra string, names ...string) {
	e.t.Helper()
	var b strings.Builder
	b.WriteString("runtime: {deadline: 10s}\n" + extra + "pools:\n  api:\n    credentials:\n")
	for _, n := range names {
		fmt.Fprintf(&b, "      - {name: team-%s, region: us, base_url: %q, api_key_env: E2E_KEY_%s, model_profiles: {decide-mini: {supported_endpoints: [/v1/decisions]}}}\n",
			n, provURL, strings.ToUpper(n))
	}
	e.writeConfig(b.String())
}

func (e *e2e) writeConfig(s string) {
	e.t.Helper()
	// Written beside and renamed, as editors do: a reload never reads
	// half a file.
	tmp := filepath.Join(e.home, "rotor.yaml.tmp")
	if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(e.home, "rotor.yaml")); err != nil {
		e.t.Fatal(err)
	}
}

// configGeneration reads config_generation from the server's /v1/status.
func configGeneration(t *testing.T, url, tok string) int {
	t.Helper()
	r := call(t, "GET", url+"/v1/status", tok, "")
	var st struct {
		ConfigGeneration int `json:"config_generation"`
	}
	if r.status != 200 || json.Unmarshal([]byte(r.body), &st) != nil {
		t.Fatalf("status: %d %s", r.status, r.body)
	}
	return st.ConfigGeneration
}

// waitGeneration waits until /v1/status shows generation n.
func waitGeneration(t *testing.T, url, tok string, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for configGeneration(t, url, tok) < n {
		if time.Now().After(deadline) {
			t.Fatalf("config generation %d not shown within %v", n, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// load sends Decisions requests from n clients until stopped, counting
// answers that are not 200. Each request notes the phase in force when it
// started; barrier waits until every client has finished a request begun
// in the current phase, so that nothing begun earlier is still in flight.
type load struct {
	t        *testing.T
	phase    atomic.Int64
	ok       atomic.Int64
	mu       sync.Mutex
	failures []string
	seen     []atomic.Int64 // by client: the latest phase it finished a request in
	stop     chan struct{}
	wg       sync.WaitGroup
}

func startReloadLoad(t *testing.T, url, tok string, n int) *load {
	l := &load{t: t, seen: make([]atomic.Int64, n), stop: make(chan struct{})}
	l.phase.Store(1)
	client := &http.Client{Timeout: 30 * time.Second}
	for i := range n {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				ph := l.phase.Load()
				req, _ := newCall(context.Background(), "POST", url+"/v1/decisions", tok, decideBody)
				resp, err := client.Do(req)
				if err != nil {
					l.fail(err.Error())
				} else {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						l.fail(fmt.Sprintf("%d %s", resp.StatusCode, b))
					} else {
						l.ok.Add(1)
					}
				}
				l.seen[i].Store(ph)
			}
		}()
	}
	return l
}

func (l *load) fail(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failures = append(l.failures, s)
}

// next starts a new phase and waits until every client finished a request
// begun in it.
func (l *load) next(within time.Duration) {
	l.t.Helper()
	ph := l.phase.Add(1)
	deadline := time.Now().Add(within)
	for i := range l.seen {
		for l.seen[i].Load() < ph {
			if time.Now().After(deadline) {
				l.t.Fatalf("client %d finished no request of phase %d within %v", i, ph, within)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func (l *load) finish() []string {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failures
}

// waitHitsFor waits until key has n Decisions calls on the fake provider.
func waitHitsFor(t *testing.T, prov *fp.Server, key string, n int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for prov.HitsFor(key, fp.PathDecisions) < n {
		if time.Now().After(deadline) {
			t.Fatalf("key got %d calls, want %d within %v", prov.HitsFor(key, fp.PathDecisions), n, within)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Issue 18, item 1: a reload under load. Clients send continuously while
// rotor.yaml is rewritten to add a credential (team-d, now first) and
// remove the one serving (team-a), then SIGHUP: no request fails, team-d
// serves, team-a gets no call begun after the reload (the state kept for
// unchanged credentials is in cmd/rotor's TestReload tests). A config that does not validate is refused with one log line
// naming the key, and the old one keeps serving; so is a restart-only
// key, through rotor bridge reload too. SIGHUP never stops the bridge.
func TestReloadUnderLoadSwapsCredentialsWithoutFailedRequests(t *testing.T) {
	e := newE2E(t)
	prov := e.fakeProvider()
	keys := map[string]string{}
	for _, n := range []string{"a", "b", "c", "d"} {
		keys[n] = fmt.Sprintf("sk-canary-reload-%s-%d-2b7e151628aed2a6abf7158809cf4f3c", n, time.Now().UnixNano())
		prov.AddKey(keys[n], "decide-mini")
		e.env = append(e.env, "E2E_KEY_"+strings.ToUpper(n)+"="+keys[n])
	}
	if err := os.MkdirAll(e.home, 0o700); err != nil {
		t.Fatal(err)
	}
	// Discovery prefers credentials whose catalog is fresh: a short TTL
	// lets the new team-d, first in the new list, win soon after.
	const ttl = "catalog_ttl: 1s\n"
	e.reloadConfig(prov.URL(), ttl, "a", "b", "c")
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	tok := e.token()
	if g := configGeneration(t, b.url, tok); g != 1 {
		t.Fatalf("first config generation %d, want 1", g)
	}

	l := startReloadLoad(t, b.url, tok, 4)
	waitHitsFor(t, prov, keys["a"], 20, 30*time.Second)

	e.reloadConfig(prov.URL(), ttl, "d", "b", "c")
	if err := b.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitGeneration(t, b.url, tok, 2, 30*time.Second)
	l.next(30 * time.Second)
	aAfter := prov.HitsFor(keys["a"], fp.PathDecisions)
	dBefore := prov.HitsFor(keys["d"], fp.PathDecisions)
	waitHitsFor(t, prov, keys["d"], dBefore+40, 30*time.Second)
	if got := prov.HitsFor(keys["a"], fp.PathDecisions); got != aAfter {
		t.Errorf("removed team-a got %d calls begun after the reload", got-aAfter)
	}
	waitLogLine(t, b, "configuration reloaded")

	// A config that does not validate: refused, one line naming the key,
	// the old config keeps serving.
	e.writeConfig("runtime: {deadline: soon}\n")
	if err := b.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLogLine(t, b, "config_key=runtime.deadline")
	if n := strings.Count(b.stderr.String(), "reload refused"); n != 1 {
		t.Errorf("%d reload refused lines, want 1:\n%s", n, b.stderr)
	}
	l.next(30 * time.Second)
	dBefore = prov.HitsFor(keys["d"], fp.PathDecisions)
	waitHitsFor(t, prov, keys["d"], dBefore+10, 30*time.Second)
	if g := configGeneration(t, b.url, tok); g != 2 {
		t.Errorf("config generation %d after a refused reload, want 2", g)
	}

	// rotor bridge reload: validates the file first (exit 2 naming the
	// key, the bridge untouched), refuses a restart-only key (exit 2
	// naming it), then applies a good file and says what changed.
	if r := e.run("bridge", "reload"); r.code != ExitUsage || !strings.Contains(r.stderr, "runtime.deadline") {
		t.Errorf("bridge reload of a bad file: exit %d %q", r.code, r.stderr)
	}
	e.reloadConfig(prov.URL(), ttl+"ledger: {busy_timeout: 7s}\n", "d", "b", "c")
	if r := e.run("bridge", "reload"); r.code != ExitUsage || !strings.Contains(r.stderr, "ledger.busy_timeout") {
		t.Errorf("bridge reload of a restart-only key: exit %d %q", r.code, r.stderr)
	}
	e.reloadConfig(prov.URL(), ttl, "d", "b", "c", "a")
	r := e.mustRun("bridge", "reload")
	if !strings.Contains(r.stdout, "config generation 3") || !strings.Contains(r.stdout, "added credential api/team-a") || strings.Contains(r.stdout, "team-b") {
		t.Errorf("bridge reload said:\n%s", r.stdout)
	}
	if r := e.mustRun("bridge", "reload"); !strings.Contains(r.stdout, "no change") || !strings.Contains(r.stdout, "generation 4") {
		t.Errorf("bridge reload without a change said:\n%s", r.stdout)
	}

	if failures := l.finish(); len(failures) > 0 {
		t.Errorf("%d of %d requests failed across the reloads, first: %s", len(failures), int(l.ok.Load())+len(failures), failures[0])
	}
	for n, k := range keys {
		if strings.Contains(b.stderr.String(), k) {
			t.Errorf("key of team-%s in the bridge's log", n)
		}
	}
	if code := b.stop(); code != 0 {
		t.Errorf("bridge exit %d after reloads\n%s", code, b.stderr)
	}
}

// Only the home's default token may reload; any other gets 403 admin_only.
func TestAdminReloadOnlyForTheHomesDefaultToken(t *testing.T) {
	e := newE2E(t)
	e.provider("")
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	ci := strings.TrimSpace(e.mustRun("bridge", "token", "create", "--label", "ci").stdout)
	r := call(t, "POST", b.url+"/v1/admin/reload", ci, "")
	if r.status != 403 || errCode(r.body) != "admin_only" {
		t.Errorf("reload with the ci token: %d %s", r.status, r.body)
	}
	if r := call(t, "GET", b.url+"/v1/admin/reload", e.token(), ""); r.status != 405 {
		t.Errorf("GET reload: %d %s", r.status, r.body)
	}
	r = call(t, "POST", b.url+"/v1/admin/reload", e.token(), "")
	var res struct {
		Generation int    `json:"generation"`
		Runtime    string `json:"runtime"`
	}
	if r.status != 200 || json.Unmarshal([]byte(r.body), &res) != nil || res.Generation != 2 || res.Runtime != "in-process" {
		t.Errorf("reload with the default token: %d %s", r.status, r.body)
	}
}

// waitLogLine waits until the process logged a line containing s; on a
// timeout it shows the lines that are not access lines.
func waitLogLine(t *testing.T, p *proc, s string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(p.stderr.String(), s) {
		if time.Now().After(deadline) {
			var other []string
			for _, l := range strings.Split(p.stderr.String(), "\n") {
				if !strings.Contains(l, "msg=request") {
					other = append(other, l)
				}
			}
			t.Fatalf("no log line with %q within 20s; other lines:\n%s", s, strings.Join(other, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// accessLine returns the bridge's access line of the request answered
// with X-Request-ID id.
func accessLine(t *testing.T, p *proc, id string) string {
	t.Helper()
	waitLogLine(t, p, "request_id="+id)
	for _, l := range strings.Split(p.stderr.String(), "\n") {
		if strings.Contains(l, "request_id="+id) && strings.Contains(l, "msg=request") {
			return l
		}
	}
	return ""
}

// Issue 18, item 8: one access line per request at info names the request
// id, client, operation, pool, model, credential, status, code, attempts,
// tokens and latency, with the runtime in-process and behind a standalone
// runtime alike (a stream's code and tokens too); never a key or token.
func TestAccessLogSaysWhatHappenedInProcessAndStandalone(t *testing.T) {
	e := newE2E(t)
	prov := e.fakeProvider()
	key := fmt.Sprintf("sk-canary-access-%d-2b7e151628aed2a6abf7158809cf4f3c", time.Now().UnixNano())
	prov.AddKey(key, "decide-mini")
	e.env = append(e.env, "E2E_KEY_A="+key)
	if err := os.MkdirAll(e.home, 0o700); err != nil {
		t.Fatal(err)
	}
	e.writeConfig(fmt.Sprintf("runtime: {deadline: 10s}\npools:\n  api:\n    credentials:\n      - {name: team-a, region: us, base_url: %q, api_key_env: E2E_KEY_A, model_profiles: {decide-mini: {supported_endpoints: [/v1/decisions, /v1/chat/completions]}}}\n", prov.URL()))
	inproc := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	rt := e.start("runtime", "start", "--listen", "127.0.0.1:0")
	remote := e.start("bridge", "start", "--listen", "127.0.0.1:0", "--runtime-url", rt.url)
	tok := e.token()
	stream := `{"model":"api/decide-mini","messages":[{"role":"user","content":"hi"}],"stream":true}`
	for _, b := range []*proc{inproc, remote} {
		for _, tc := range []struct {
			path, body string
			want       []string
		}{
			{"/v1/decisions", decideBody, []string{"status=200", `code=""`, "operation=decisions", "pool=api", "model=decide-mini", "credential=team-a",
				"attempts=1", "client=default", "input_tokens=[0-9]+ output_tokens=[0-9]+ total_tokens=[0-9]+", "duration_ms="}},
			{"/v1/decisions", `{"model":"api/not-a-model"}`, []string{"status=404", "code=model_not_available", "pool=api", "model=not-a-model", "client=default"}},
			{"/v1/chat/completions", stream, []string{"status=200", "operation=chat.completions", "pool=api", "model=decide-mini", "credential=team-a",
				"attempts=1", "output_tokens=[0-9]+"}},
		} {
			r := call(t, "POST", b.url+tc.path, tok, tc.body)
			if r.header.Get("X-Rotor-Access") != "" {
				t.Errorf("the caller got the runtime's record")
			}
			line := accessLine(t, b, r.header.Get("X-Request-ID"))
			for _, w := range tc.want {
				if !regexp.MustCompile(w).MatchString(line) {
					t.Errorf("%s %s: access line lacks %s:\n%s", b.url, tc.body, w, line)
				}
			}
			if strings.Contains(line, "output_tokens=unknown") || strings.Contains(line, key) || strings.Contains(line, tok) || !strings.Contains(line, "level=INFO") {
				t.Errorf("access line: %s", line)
			}
		}
	}
}

// A standalone runtime reloads on SIGHUP too (its /v1/status shows the
// generation); rotor bridge reload against a bridge in front of it says
// the pools live in that runtime.
func TestStandaloneRuntimeReloadsOnSIGHUP(t *testing.T) {
	e := newE2E(t)
	prov, _ := e.provider("")
	rt := e.start("runtime", "start", "--listen", "127.0.0.1:0")
	remote := e.start("bridge", "start", "--listen", "127.0.0.1:0", "--runtime-url", rt.url)
	b, err := os.ReadFile(filepath.Join(e.home, "runtime.token"))
	if err != nil {
		t.Fatal(err)
	}
	rtok := strings.TrimSpace(string(b))
	e.reloadConfig(prov.URL(), "", "a", "b")
	if err := rt.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitGeneration(t, rt.url, rtok, 2, 20*time.Second)
	waitLogLine(t, rt, "removed=[api/team-c]")
	if r := call(t, "POST", remote.url+"/v1/decisions", e.token(), decideBody); r.status != 200 {
		t.Errorf("after the runtime's reload: %d %s", r.status, r.body)
	}
	r := e.mustRun("bridge", "reload")
	if !strings.Contains(r.stdout, "standalone runtime at "+rt.url) {
		t.Errorf("bridge reload in front of a standalone runtime said:\n%s", r.stdout)
	}
}

// runtime.shutdown_grace is reloadable: a stop drains for the grace in
// force when it starts, not the one the bridge started with.
func TestReloadedShutdownGraceBindsTheNextStop(t *testing.T) {
	e := newE2E(t)
	prov, _ := e.provider("")
	path := filepath.Join(e.home, "rotor.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const before = "runtime: {deadline: 10s}\n"
	if !strings.Contains(string(b), before) {
		t.Fatalf("rotor.yaml lacks %q", before)
	}
	e.writeConfig(strings.Replace(string(b), before, "runtime: {deadline: 10s, shutdown_grace: 10m}\n", 1))
	br := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	tok := e.token()
	e.writeConfig(strings.Replace(string(b), before, "runtime: {deadline: 10s, shutdown_grace: 1s}\n", 1))
	if r := e.run("bridge", "reload"); r.code != 0 || !strings.Contains(r.stdout+r.stderr, "runtime.shutdown_grace") {
		t.Fatalf("reload of shutdown_grace: exit %d %s%s; want 0 naming runtime.shutdown_grace", r.code, r.stdout, r.stderr)
	}
	prov.SetDefault("", "", fp.Stall())
	got := make(chan httpReply, 1)
	go func() { got <- advCall(t, "POST", br.url+"/v1/decisions", tok, decideBody) }()
	waitFor(t, "the request at the provider", 10*time.Second, func() bool { return prov.Hits(fp.PathDecisions) >= 1 })
	// With the 10m grace it started with, the stop would wait ten
	// minutes for the stalled request (stop gives up after 60 s).
	if code := br.stop(); code != 1 {
		t.Errorf("exit %d, want 1 (the reloaded 1s grace cut the stalled request)", code)
	}
	if r := <-got; r.status != 503 || errCode(r.body) != "server_shutdown" {
		t.Errorf("cut request: %d %s, want 503 server_shutdown", r.status, r.body)
	}
}

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/testutil"

	fp "github.com/rotorhq/rotor/internal/fakeprovider"
)

// lockedBuffer collects a process's stderr while it runs.
type lockedBuffer = testutil.SyncBuffer

// proc is a rotor server started by a test.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	url    string
	stderr *lockedBuffer
	done   chan error
}

// start runs a rotor server command and waits for its one URL line.
func (e *e2e) start(args ...string) *proc {
	e.t.Helper()
	p, err := e.tryStart(args...)
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *e2e) tryStart(args ...string) (*proc, error) {
	cmd := exec.Command(e.bin, args...)
	cmd.Env = e.env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p := &proc{t: e.t, cmd: cmd, stderr: &lockedBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, stdout)
	}()
	go func() { p.done <- cmd.Wait() }()
	select {
	case line, ok := <-lines:
		if !ok {
			err := <-p.done
			return nil, fmt.Errorf("rotor %v exited before printing its URL: %v\n%s", args, err, p.stderr)
		}
		p.url = line
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		return nil, fmt.Errorf("rotor %v printed no URL in 30s\n%s", args, p.stderr)
	}
	e.t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
	})
	return p, nil
}

// stop sends SIGTERM and returns the exit code.
func (p *proc) stop() int {
	p.t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		p.done <- err
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			p.t.Fatalf("wait: %v", err)
		}
		return 0
	case <-time.After(60 * time.Second):
		p.t.Fatal("server did not stop within 60s of SIGTERM")
		return -1
	}
}

// fakeProvider starts a fake provider, closed when the test ends.
func (e *e2e) fakeProvider() *fp.Server {
	e.t.Helper()
	p, err := fp.Start(fp.Options{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { p.Close() })
	return p
}

// provider starts a fake provider and writes a rotor.yaml with three
// credentials whose keys are in the test env.
func (e *e2e) provider(extra string) (*fp.Server, map[string]string) {
	e.t.Helper()
	p := e.fakeProvider()
	keys := map[string]string{}
	var creds strings.Builder
	for _, n := range []string{"a", "b", "c"} {
		key := fmt.Sprintf("sk-canary-%s-%d-2b7e151628aed2a6abf7158809cf4f3c", n, time.Now().UnixNano())
		keys["team-"+n] = key
		p.AddKey(key, "decide-mini")
		env := "E2E_KEY_" + strings.ToUpper(n)
		e.env = append(e.env, env+"="+key)
		fmt.Fprintf(&creds, "      - {name: team-%s, region: us, base_url: %q, api_key_env: %s, model_profiles: {decide-mini: {supported_endpoints: [/v1/decisions]}}}\n", n, p.URL(), env)
	}
	cfg := "runtime: {deadline: 10s}\n" + extra + "pools:\n  api:\n    credentials:\n" + creds.String()
	if err := os.MkdirAll(e.home, 0o700); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.home, "rotor.yaml"), []byte(cfg), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return p, keys
}

func (e *e2e) token() string {
	b, err := os.ReadFile(filepath.Join(e.home, "bridge.token"))
	if err != nil {
		e.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

type httpReply struct {
	status int
	header http.Header
	body   string
}

// newCall builds a request with the bearer token (when not empty) and hdr
// as name, value pairs; "Host" sets the request's Host.
func newCall(ctx context.Context, method, url, token, body string, hdr ...string) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i] == "Host" {
			req.Host = hdr[i+1]
			continue
		}
		req.Header.Add(hdr[i], hdr[i+1])
	}
	return req, nil
}

func call(t *testing.T, method, url, token, body string, hdr ...string) httpReply {
	t.Helper()
	req, err := newCall(context.Background(), method, url, token, body, hdr...)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return httpReply{resp.StatusCode, resp.Header, string(b)}
}

const decideBody = `{"model":"api/decide-mini","input":"Is the sky blue?","question":{"type":"predicate"}}`

func TestBridgeSIGTERMLetsSlowRequestFinishAndRecordsIt(t *testing.T) {
	e := newE2E(t)
	prov, keys := e.provider("")
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	tok := e.token()
	call(t, "POST", b.url+"/v1/decisions", tok, decideBody) // warm the catalogs
	prov.Script(keys["team-a"], "", fp.Delay(1500*time.Millisecond, fp.OK()))
	got := make(chan httpReply, 1)
	received := make(chan struct{}, 1)
	prov.OnRequest(func(r fp.Received) {
		if r.Path == fp.PathDecisions {
			select {
			case received <- struct{}{}:
			default:
			}
		}
	})
	go func() { got <- call(t, "POST", b.url+"/v1/decisions", tok, decideBody) }()
	<-received
	code := make(chan int, 1)
	go func() { code <- b.stop() }()
	r := <-got
	if r.status != 200 {
		t.Errorf("slow request during shutdown: %d %s", r.status, r.body)
	}
	if c := <-code; c != 0 {
		t.Errorf("exit %d after SIGTERM, want 0\n%s", c, b.stderr)
	}
	rows := parseJSON(t, e.mustRun("ledger", "report", "--by", "status", "--format", "json").stdout)
	if len(rows) != 1 || rows[0]["status"] != "200" || rows[0]["requests"] != float64(2) {
		t.Errorf("report after shutdown = %v, want both requests recorded as 200", rows)
	}
}

// The bridge in front of a standalone runtime answers as the in-process
// bridge does.
func TestBridgeToStandaloneRuntimeAnswersLikeInProcess(t *testing.T) {
	e := newE2E(t)
	e.provider("")
	inproc := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	rt := e.start("runtime", "start", "--listen", "127.0.0.1:0")
	remote := e.start("bridge", "start", "--listen", "127.0.0.1:0", "--runtime-url", rt.url)
	tok := e.token()
	bodies := []string{
		decideBody,
		`{"model":"decide-mini"}`,
		`{"model":"api/not-a-model"}`,
		`{"model":"zdr/decide-mini"}`,
		`not json`,
	}
	for _, body := range bodies {
		a := call(t, "POST", inproc.url+"/v1/decisions", tok, body)
		b := call(t, "POST", remote.url+"/v1/decisions", tok, body)
		if a.status != b.status || errCode(a.body) != errCode(b.body) {
			t.Errorf("%s: in-process %d %s, via runtime %d %s", body, a.status, errCode(a.body), b.status, errCode(b.body))
		}
	}
	// The runtime itself requires its own token.
	if r := call(t, "POST", rt.url+"/v1/decisions", tok, decideBody); r.status != 401 {
		t.Errorf("runtime accepted the bridge's client token: %d", r.status)
	}
	rows := parseJSON(t, e.mustRun("ledger", "report", "--by", "client", "--format", "json").stdout)
	if len(rows) != 1 || rows[0]["client"] != "default" || rows[0]["requests"] != float64(2) {
		t.Errorf("both bridges should record client default: %v", rows)
	}
}

// A home's default token on a ledger that already holds "default" is
// labelled default@<hostname>; a bridge in front of a standalone runtime
// records that label for its requests, as the in-process runtime does
// (the runtime took only letters, digits, '.', '_' and '-' and recorded
// "runtime").
func TestStandaloneRuntimeKeepsADefaultAtHostLabel(t *testing.T) {
	e := newE2E(t)
	e.provider("")
	e.mustRun("bridge", "token", "create", "--label", "default") // another home's
	rt := e.start("runtime", "start", "--listen", "127.0.0.1:0")
	remote := e.start("bridge", "start", "--listen", "127.0.0.1:0", "--runtime-url", rt.url)
	inproc := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	tok := e.token()
	if labels := e.mustRun("bridge", "token", "list", "--format", "csv").stdout; !strings.Contains(labels, "default@") {
		t.Fatalf("bridge.token was not stored as default@<host>: %s", labels)
	}
	for _, u := range []string{inproc.url, remote.url} {
		if r := call(t, "POST", u+"/v1/decisions", tok, decideBody); r.status != 200 {
			t.Fatalf("%s: %d %s", u, r.status, r.body)
		}
	}
	rows := parseJSON(t, e.mustRun("ledger", "report", "--by", "client", "--format", "json").stdout)
	if len(rows) != 1 || !strings.HasPrefix(fmt.Sprint(rows[0]["client"]), "default@") || rows[0]["requests"] != float64(2) {
		t.Errorf("report by client = %v; want both requests under default@<host>", rows)
	}
}

func errCode(body string) string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	json.Unmarshal([]byte(body), &e)
	return e.Error.Code
}

func TestRevokedTokenStopsOnRunningBridgeAndReportByClient(t *testing.T) {
	e := newE2E(t)
	e.provider("")
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	ci := strings.TrimSpace(e.mustRun("bridge", "token", "create", "--label", "ci").stdout)
	def := e.token()
	for i := 0; i < 2; i++ {
		if r := call(t, "POST", b.url+"/v1/decisions", def, decideBody); r.status != 200 {
			t.Fatalf("default token: %d", r.status)
		}
	}
	for i := 0; i < 3; i++ {
		if r := call(t, "POST", b.url+"/v1/decisions", ci, decideBody); r.status != 200 {
			t.Fatalf("ci token: %d", r.status)
		}
	}
	list := parseJSON(t, e.mustRun("bridge", "token", "list", "--format", "json").stdout)
	if len(list) != 2 || strings.Contains(fmt.Sprint(list), ci) {
		t.Errorf("token list = %v", list)
	}
	e.mustRun("bridge", "token", "revoke", "ci")
	// Refused at its next request whatever it sends: also a body the
	// runtime refuses before admission, which re-checks the token.
	for _, c := range []struct{ path, body string }{
		{"/v1/decisions", `not json`},
		{"/v1/chat/completions", `{"model":"gpt-4o"}`},
		{"/v1/decisions", `{"model":"api/decide-mini"}`},
		{"/v1/decisions", decideBody},
	} {
		if r := call(t, "POST", b.url+c.path, ci, c.body); r.status != 401 || errCode(r.body) != "invalid_token" {
			t.Errorf("revoked token on the running bridge, POST %s %s: %d %s, want 401 invalid_token", c.path, c.body, r.status, r.body)
		}
	}
	rows := parseJSON(t, e.mustRun("ledger", "report", "--by", "client", "--format", "json").stdout)
	byClient := map[string]float64{}
	for _, r := range rows {
		byClient[r["client"].(string)] = r["requests"].(float64)
	}
	if byClient["default"] != 2 || byClient["ci"] != 3 {
		t.Errorf("report by client = %v, want default 2 and ci 3", byClient)
	}
}

func TestMetricsAndStatus(t *testing.T) {
	e := newE2E(t)
	e.provider("")
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	tok := e.token()
	e.mustRun("budget", "add", "--requests", "100", "--window", "1h")
	call(t, "POST", b.url+"/v1/decisions", tok, decideBody)
	call(t, "POST", b.url+"/v1/decisions", tok, `{"model":"bare"}`)
	if r := call(t, "GET", b.url+"/metrics", "", ""); r.status != 401 {
		t.Errorf("metrics without token: %d", r.status)
	}
	m := call(t, "GET", b.url+"/metrics", tok, "").body
	for _, want := range []string{`rotor_requests_total{code="",route="/v1/decisions",server="bridge",status="200"} 1`, `rotor_refusals_total{reason="invalid_model_prefix"} 1`,
		"rotor_ledger_commit_seconds_count", `rotor_budget_state{name="requests-1h",state="ok"} 1`} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if r := call(t, "GET", b.url+"/healthz", "", ""); r.status != 200 {
		t.Errorf("healthz: %d", r.status)
	}
	out := e.mustRun("status", "--url", b.url).stdout
	for _, want := range []string{"team-a", "team-b", "fresh", "requests-1h"} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(e.mustRun("status", "--url", b.url, "--format", "json").stdout), &doc); err != nil || doc["pools"] == nil {
		t.Errorf("status json: %v %v", err, doc)
	}
}

func TestDemoRotatesAcrossCredentials(t *testing.T) {
	e := newE2E(t)
	r := e.mustRun("demo")
	for _, want := range []string{"team-a", "team-b", "team-c", "failover", "budget_exceeded", "unknown", "Streamed chat", "chat.completions", "demo-cost"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, r.stdout)
		}
	}
	if _, err := os.Stat(e.home); err == nil {
		t.Error("demo left the home folder behind")
	}
}

// scripts/bridge-up.sh starts the bridge and records it in the home given
// by --home among its arguments (not the default home); run again while
// that bridge runs, it prints its URL and starts nothing; a start that
// fails (the port is taken) leaves the files alone;
// scripts/decide.sh sends a decision through it, with any text and a URL
// with or without a trailing slash.
func TestBridgeUpAndDecideScripts(t *testing.T) {
	e := newE2E(t)
	e.provider("")
	script := func(env []string, name string, args ...string) result {
		return e.exec(env, "bash", append([]string{filepath.Join("..", "scripts", name)}, args...)...)
	}
	var noHome []string // the environment without ROTOR_HOME: --home says where
	for _, kv := range e.env {
		if !strings.HasPrefix(kv, "ROTOR_HOME=") {
			noHome = append(noHome, kv)
		}
	}
	r := script(noHome, "bridge-up.sh", "--home", e.home, "--listen", "127.0.0.1:0")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "http://127.0.0.1:") {
		t.Fatalf("bridge-up.sh: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	url := strings.TrimSpace(r.stdout)
	pidb, _ := os.ReadFile(filepath.Join(e.home, "bridge.pid"))
	var pid int
	fmt.Sscan(string(pidb), &pid)
	// Signal the bridge only while that pid is still rotor's: a pid
	// outlives its process, and the system hands it on.
	defer func() {
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if _, noProc := os.Stat("/proc/self"); noProc != nil || err == nil && strings.Contains(string(cmd), "bridge") {
			syscall.Kill(pid, syscall.SIGTERM)
		}
	}()
	if pid == 0 {
		t.Fatalf("bridge-up.sh wrote no pid into --home %s", e.home)
	}
	for _, name := range []string{"bridge.pid", "bridge.url", "bridge.log"} {
		if fi, err := os.Stat(filepath.Join(e.home, name)); err != nil {
			t.Error(err)
		} else if fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: mode %v, want 0600", name, fi.Mode().Perm())
		}
	}
	for _, input := range []string{`Is "this" a test?`, "page one\fpage two\x01\x1f, tab\tand back\\slash"} {
		d := script(e.env, "decide.sh", "api/decide-mini", input)
		if d.code != 0 || !strings.Contains(d.stdout, `"usage"`) {
			t.Errorf("decide.sh %q: exit %d\n%s%s", input, d.code, d.stdout, d.stderr)
		}
	}
	if d := script(append(e.env, "ROTOR_URL="+url+"/"), "decide.sh", "api/decide-mini", "slash"); d.code != 0 {
		t.Errorf("decide.sh with ROTOR_URL %s/: exit %d\n%s%s", url, d.code, d.stdout, d.stderr)
	}

	files := func() (got string) {
		for _, name := range []string{"bridge.pid", "bridge.url"} {
			b, _ := os.ReadFile(filepath.Join(e.home, name))
			got += name + "=" + string(b)
		}
		return got
	}
	before := files()
	// Run again (from cron, say) while the bridge runs: it prints the
	// running bridge's URL and starts nothing, even on a free port.
	again := script(e.env, "bridge-up.sh", "--listen", "127.0.0.1:0")
	if again.code != 0 || strings.TrimSpace(again.stdout) != url || !strings.Contains(again.stderr, "already runs") {
		t.Errorf("bridge-up.sh while its bridge runs: exit %d, stdout %q, want %s\n%s", again.code, again.stdout, url, again.stderr)
	}
	if after := files(); after != before {
		t.Errorf("a second bridge-up.sh changed the running bridge's files:\n%s\nwant\n%s", after, before)
	}
	if rec, _ := os.ReadFile(filepath.Join(e.home, "bridge.json")); !strings.Contains(string(rec), fmt.Sprintf(`"pid":%d`, pid)) {
		t.Errorf("bridge.json after a second bridge-up.sh names another bridge: %s", rec)
	}
	// A start that fails (its port taken) leaves the files it would have
	// replaced alone: here a run folder of its own, the home's untouched.
	other := t.TempDir()
	failed := script(append(e.env, "ROTOR_RUN_DIR="+other), "bridge-up.sh", "--listen", strings.TrimPrefix(url, "http://"))
	if failed.code == 0 {
		t.Errorf("bridge-up.sh on a taken port: exit 0\n%s", failed.stdout)
	}
	if left, _ := filepath.Glob(filepath.Join(other, "bridge.*")); len(left) != 0 {
		t.Errorf("a failed start left %v behind", left)
	}
	if after := files(); after != before {
		t.Errorf("a failed start changed the running bridge's files:\n%s\nwant\n%s", after, before)
	}
	bad := script(e.env, "decide.sh", "decide-mini", "bare model")
	if bad.code == 0 || !strings.Contains(bad.stdout, "invalid_model_prefix") {
		t.Errorf("decide.sh with a bare model: exit %d\n%s", bad.code, bad.stdout)
	}
}

// A server takes half the CPUs Go would run it on (at least one) unless
// GOMAXPROCS is set, and its start line says so (README, "Performance").
func TestServersTakeHalfTheCPUsUnlessGOMAXPROCSIsSet(t *testing.T) {
	e := newE2E(t)
	e.provider("")
	started := func(p *proc, name string) (procs, cpus int) {
		t.Helper()
		re := regexp.MustCompile(`msg="` + name + ` started".* gomaxprocs=(\d+) cpus=(\d+)`)
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if m := re.FindStringSubmatch(p.stderr.String()); m != nil {
				procs, _ = strconv.Atoi(m[1])
				cpus, _ = strconv.Atoi(m[2])
				return procs, cpus
			}
		}
		t.Fatalf("no %q start line with gomaxprocs and cpus in:\n%s", name, p.stderr)
		return 0, 0
	}
	procs, cpus := started(e.start("bridge", "start", "--listen", "127.0.0.1:0"), "bridge")
	if cpus < 1 || procs != max(1, cpus/2) {
		t.Errorf("bridge: gomaxprocs=%d cpus=%d, want half the CPUs, at least one", procs, cpus)
	}
	e.env = append(e.env, "GOMAXPROCS=3")
	if procs, cpus := started(e.start("runtime", "start", "--listen", "127.0.0.1:0"), "runtime"); procs != 3 || cpus != 3 {
		t.Errorf("runtime with GOMAXPROCS=3: gomaxprocs=%d cpus=%d, want 3 and 3 (the environment wins)", procs, cpus)
	}
}

// A bridge told to listen on every address (--allow-non-loopback --listen
// 0.0.0.0:PORT) prints and records a URL a local client can use (not
// [::]:PORT, which no client can send to), so `rotor status` finds it, and
// it answers a client that names the machine by any of its addresses,
// while a name that is not loopback (DNS rebinding) is still refused.
func TestBridgeOnEveryAddress(t *testing.T) {
	e := newE2E(t)
	e.provider("")
	p := e.start("bridge", "start", "--allow-non-loopback", "--listen", "0.0.0.0:0")
	if !strings.HasPrefix(p.url, "http://127.0.0.1:") {
		t.Fatalf("bridge on 0.0.0.0 printed %q, want http://127.0.0.1:PORT", p.url)
	}
	if r := e.run("status"); r.code != 0 {
		t.Errorf("rotor status: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	port := p.url[strings.LastIndex(p.url, ":")+1:]
	for host, want := range map[string]int{"192.0.2.2:" + port: http.StatusOK, "[2001:db8::2]:" + port: http.StatusOK, "rebind.example:" + port: http.StatusForbidden} {
		req, err := http.NewRequest(http.MethodGet, p.url+"/healthz", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET /healthz with Host %s: %d, want %d", host, resp.StatusCode, want)
		}
	}
}

// A SIGHUP while the bridge finishes its stop (a reload racing a stop, a
// terminal closing) does not kill it: it still removes bridge.json and
// exits 0. The signal was handed back to Go's default action, terminate.
func TestHangupDuringStopDoesNotKill(t *testing.T) {
	e := newE2E(t)
	e.provider("")
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	// A request, so that the stop has a token's last use to write.
	if r := call(t, "POST", b.url+"/v1/decisions", e.token(), decideBody); r.status != 200 {
		t.Fatalf("decision: %d %s", r.status, r.body)
	}
	// SIGHUPs from before the stop until it has exited: the ones before
	// its end reload, some land while it removes bridge.json and closes
	// the ledger (a few milliseconds). One SIGTERM, b.stop's: a second
	// would end the stop at once (exit 143).
	go func() {
		for b.cmd.Process.Signal(syscall.SIGHUP) == nil {
			time.Sleep(200 * time.Microsecond)
		}
	}()
	if code := b.stop(); code != 0 {
		t.Errorf("bridge stopped with %d after a SIGHUP during its stop, want 0\n%s", code, b.stderr)
	}
	if _, err := os.Stat(filepath.Join(e.home, "bridge.json")); err == nil {
		t.Error("bridge.json left behind")
	}
}

// A second SIGTERM (or Ctrl-C) during the drain exits at once, with 128
// plus the signal's number, saying so, instead of waiting out the grace
// (the second at least 250 ms after the first: see TestSecondSignalButNotTimeoutsRepeat).
func TestSecondSignalExitsWithoutWaitingForTheDrain(t *testing.T) {
	e := newE2E(t)
	prov, _ := e.provider("")
	e.env = append(e.env, "ROTOR_RUNTIME_SHUTDOWN_GRACE=10m", "ROTOR_RUNTIME_DEADLINE=10m")
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	tok := e.token()
	prov.SetDefault("", "", fp.Stall())
	go func() {
		// Its connection is cut by the exit: nothing to read.
		req, _ := http.NewRequest("POST", b.url+"/v1/decisions", strings.NewReader(decideBody))
		req.Header.Set("Authorization", "Bearer "+tok)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	waitFor(t, "the request at the provider", 10*time.Second, func() bool { return prov.Hits(fp.PathDecisions) >= 1 })
	b.cmd.Process.Signal(syscall.SIGTERM)
	// The first signal has been taken once the listener is closed (two
	// signals sent at once may arrive as one).
	waitFor(t, "the bridge to stop accepting", 10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(b.url, "http://"), time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	// The same signal within 250 ms of the first is taken for it (timeout
	// sends two at once): send again until one counts.
	var code int
	for exited := false; !exited; {
		b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-b.done:
			b.done <- err
			exited, code = true, 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
		case <-time.After(time.Second):
		}
	}
	if code != 128+15 {
		t.Errorf("exit %d after a second SIGTERM, want %d", code, 128+15)
	}
	if !strings.Contains(b.stderr.String(), "second terminated: exiting now") {
		t.Errorf("stderr does not say why it exited:\n%s", b.stderr)
	}
}

// A request cut by the bridge's stop after runtime.shutdown_grace is
// answered 503 server_shutdown with x-should-retry: false (the provider
// call may have run) and the bridge exits 1, whether its runtime is
// in-process or standalone behind --runtime-url, where the proxy took
// the cut for the caller leaving (499 client_closed_request).
func TestStopCutsARequestWith503ServerShutdown(t *testing.T) {
	for _, standalone := range []bool{false, true} {
		t.Run(fmt.Sprintf("standalone runtime %v", standalone), func(t *testing.T) {
			e := newE2E(t)
			prov, _ := e.provider("")
			e.env = append(e.env, "ROTOR_RUNTIME_SHUTDOWN_GRACE=1s")
			args := []string{"bridge", "start", "--listen", "127.0.0.1:0"}
			if standalone {
				rt := e.start("runtime", "start", "--listen", "127.0.0.1:0")
				args = append(args, "--runtime-url", rt.url)
			}
			b := e.start(args...)
			tok := e.token()
			if r := advCall(t, "POST", b.url+"/v1/decisions", tok, decideBody); r.status != 200 {
				t.Fatalf("warm: %d %s", r.status, r.body)
			}
			prov.SetDefault("", "", fp.Stall())
			got := make(chan httpReply, 1)
			go func() { got <- advCall(t, "POST", b.url+"/v1/decisions", tok, decideBody) }()
			waitFor(t, "the request at the provider", 10*time.Second, func() bool { return prov.Hits(fp.PathDecisions) >= 2 })
			code := b.stop()
			r := <-got
			if r.status != 503 || errCode(r.body) != "server_shutdown" || r.header.Get("x-should-retry") != "false" {
				t.Errorf("cut request: %d %s (x-should-retry %q), want 503 server_shutdown, x-should-retry: false", r.status, r.body, r.header.Get("x-should-retry"))
			}
			if code != 1 {
				t.Errorf("exit %d, want 1 (it had to cut a request)", code)
			}
		})
	}
}

// A bridge started before rotor init runs on the defaults, which have no
// credentials: every request got 503 no_credentials and nothing said why.
// It warns at start, naming the file to create; after init, whose pools:
// section is empty, it warns that no credential is enabled; with
// credentials it does not warn, and rotor config check says the same.
func TestBridgeWithoutConfigWarnsItHasNoCredentials(t *testing.T) {
	e := newE2E(t)
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	b.waitLog("no rotor.yaml", 30*time.Second)
	if !strings.Contains(b.stderr.String(), "rotor init") {
		t.Errorf("the warning does not say to run rotor init:\n%s", b.stderr)
	}
	b.stop()
	e.mustRun("init", "--force")
	b = e.start("bridge", "start", "--listen", "127.0.0.1:0")
	b.waitLog("no enabled credential", 30*time.Second)
	if code := b.stop(); code != 0 || strings.Contains(b.stderr.String(), "no rotor.yaml") {
		t.Errorf("after init: exit %d, log:\n%s", code, b.stderr)
	}
	if r := e.run("config", "check"); r.code != 0 || !strings.Contains(r.stderr, "no enabled credential") {
		t.Errorf("config check after init: exit %d, stderr %q; want 0 and a word on the empty pools", r.code, r.stderr)
	}
	e.provider("")
	b = e.start("bridge", "start", "--listen", "127.0.0.1:0")
	if code := b.stop(); code != 0 || strings.Contains(b.stderr.String(), "no enabled credential") {
		t.Errorf("with credentials: exit %d, log:\n%s", code, b.stderr)
	}
	if r := e.run("config", "check"); r.code != 0 || strings.Contains(r.stderr, "no enabled credential") {
		t.Errorf("config check with credentials: exit %d, stderr %q", r.code, r.stderr)
	}
}

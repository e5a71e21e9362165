package e2e

// The adversarial suite (issue 8): faults, crashes, hostile input and
// secrets, each case a test named TestAdversarial... that drives the real
// binary (main_test.go builds it) the way an attacker, a broken provider or
// a crash would, and checks what the fake provider received and what the
// ledger holds.
// scripts/adversarial.sh runs the suite; ROTOR_ADVERSARIAL_LONG=1 (or -long)
// selects the long variant. shared/research/reliability-anchors.md (beside
// the repository), section 6, explains each case.
//
// This file: the front door (cases 1-4), redirects (13) and canary secrets
// (14). The others, and the helpers, are in adversarial_*_test.go.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/internal/httpx"
)

// Case 1. DNS rebinding: a Host that is not this server's loopback name
// and port is refused with 403 before the token is looked at and before the
// body is read (the request announces 1 MiB and sends none of it); the
// loopback names with the right port are served.
func TestAdversarialDNSRebindingHostRefusedBeforeAuthAndBody(t *testing.T) {
	e := newE2E(t)
	prov, _ := e.provider("")
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	tok := e.token()
	addr := hostPort(b.url)
	_, port, _ := net.SplitHostPort(addr)
	refused := []string{
		"evil.example:" + port, "evil.example", "attacker.example", "localhost.evil.example:" + port, "localhost.evil.example",
		"127.0.0.1.nip.io:" + port, "localhost:1", "127.0.0.1:1", "[::1]:1", "0.0.0.0:" + port, "",
	}
	for _, host := range refused {
		for _, token := range []string{tok, "not-the-token"} {
			raw := "POST /v1/decisions HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " + token +
				"\r\nContent-Type: application/json\r\nContent-Length: 1048576\r\n\r\n"
			resp, body, err := rawExchange(addr, raw, 3*time.Second)
			if err != nil {
				t.Errorf("Host %q: no answer while the body is withheld (%v): the body was read first", host, err)
				continue
			}
			if resp.StatusCode != 403 || errCode(body) != httpx.CodeHostNotAllowed {
				t.Errorf("Host %q, token valid=%v: %d %s, want 403 host_not_allowed before auth", host, token == tok, resp.StatusCode, body)
			}
		}
	}
	if n := prov.Hits(fp.PathDecisions) + prov.Hits(fp.PathModels); n != 0 {
		t.Errorf("refused hosts reached the provider %d times", n)
	}
	if v := readLedger(t, e.db()); len(v.rows) != 0 {
		t.Errorf("refused hosts left %d ledger rows", len(v.rows))
	}
	accepted := []string{"localhost:" + port, "127.0.0.1:" + port, "[::1]:" + port, "LOCALHOST:" + port}
	for _, host := range accepted {
		raw := fmt.Sprintf("POST /v1/decisions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
			host, tok, len(decideBody), decideBody)
		resp, body, err := rawExchange(addr, raw, 10*time.Second)
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("Host %q: %v %v %s, want 200", host, resp, err, body)
		}
	}
	if got := prov.Hits(fp.PathDecisions); got != len(accepted) {
		t.Errorf("provider decisions = %d, want %d", got, len(accepted))
	}
	v := readLedger(t, e.db())
	if len(v.rows) != len(accepted) || v.open != 0 {
		t.Errorf("ledger: %d rows, %d open; want %d settled", len(v.rows), v.open, len(accepted))
	}
}

// Case 2. Browser requests: a foreign Origin, a Referer, a cross-site
// Sec-Fetch-Site and preflights are refused with 403 and get no
// Access-Control-Allow-* header; an allowed origin gets CORS with
// Retry-After exposed.
func TestAdversarialBrowserRequestsRefusedWithoutCORS(t *testing.T) {
	e := newE2E(t)
	prov, _ := e.provider("bridge: {allowed_origins: ['http://app.localhost:3000']}\n")
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	tok := e.token()
	refused := []struct {
		name   string
		method string
		hdr    []string
	}{
		{"foreign origin", "POST", []string{"Origin", "https://evil.example"}},
		{"null origin", "POST", []string{"Origin", "null"}},
		{"foreign referer", "POST", []string{"Referer", "https://evil.example/page"}},
		{"cross-site fetch", "POST", []string{"Sec-Fetch-Site", "cross-site"}},
		{"same-site fetch", "POST", []string{"Sec-Fetch-Site", "same-site"}},
		{"foreign preflight", "OPTIONS", []string{"Origin", "https://evil.example", "Access-Control-Request-Method", "POST"}},
		{"preflight without origin", "OPTIONS", []string{"Access-Control-Request-Method", "POST"}},
		{"allowed origin's host, other port", "POST", []string{"Origin", "http://app.localhost:3001"}},
	}
	for _, tt := range refused {
		r := advCall(t, tt.method, b.url+"/v1/decisions", tok, decideBody, tt.hdr...)
		if r.status != 403 || errCode(r.body) != httpx.CodeOriginNotAllowed {
			t.Errorf("%s: %d %s, want 403 origin_not_allowed", tt.name, r.status, r.body)
		}
		for h := range r.header {
			if strings.HasPrefix(h, "Access-Control-Allow-") {
				t.Errorf("%s: refused answer carries %s", tt.name, h)
			}
		}
		if r.header.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(r.header.Get("Content-Security-Policy"), "default-src 'none'") {
			t.Errorf("%s: security headers missing: %v", tt.name, r.header)
		}
	}
	if n := prov.Hits(fp.PathDecisions) + prov.Hits(fp.PathModels); n != 0 {
		t.Errorf("refused browser requests reached the provider %d times", n)
	}
	if v := readLedger(t, e.db()); len(v.rows) != 0 {
		t.Errorf("refused browser requests left %d ledger rows", len(v.rows))
	}
	r := advCall(t, "OPTIONS", b.url+"/v1/decisions", "", "", "Origin", "http://app.localhost:3000", "Access-Control-Request-Method", "POST")
	if r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != "http://app.localhost:3000" {
		t.Errorf("allowed preflight: %d %v", r.status, r.header)
	}
	r = advCall(t, "POST", b.url+"/v1/decisions", tok, decideBody, "Origin", "http://app.localhost:3000")
	if r.status != 200 || !strings.Contains(r.header.Get("Access-Control-Expose-Headers"), "Retry-After") {
		t.Errorf("allowed origin: %d, expose %q; want Retry-After exposed", r.status, r.header.Get("Access-Control-Expose-Headers"))
	}
	r = advCall(t, "POST", b.url+"/v1/decisions", tok, decideBody, "Referer", "http://app.localhost:3000/app/page")
	if r.status != 200 {
		t.Errorf("referer from the allowed origin: %d %s", r.status, r.body)
	}
	if got := prov.Hits(fp.PathDecisions); got != 2 {
		t.Errorf("provider decisions = %d, want 2 (the allowed origin's requests)", got)
	}
	if v := readLedger(t, e.db()); len(v.rows) != 2 {
		t.Errorf("ledger rows = %d, want 2", len(v.rows))
	}
}

// Case 3. Auth matrix: every way of not presenting the token gets the same
// 401 body with WWW-Authenticate, never echoes the token, and reaches
// neither the provider nor the ledger.
func TestAdversarialAuthMatrixSame401NothingUpstream(t *testing.T) {
	e := newE2E(t)
	prov, _ := e.provider("")
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	tok := e.token()
	wrongSame := strings.Repeat("x", len(tok))
	cases := map[string]func(*http.Request){
		"no header":           func(r *http.Request) {},
		"wrong, same length":  func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+wrongSame) },
		"different length":    func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok[:len(tok)-1]) },
		"lowercase bearer":    func(r *http.Request) { r.Header.Set("Authorization", "bearer "+tok) },
		"basic":               func(r *http.Request) { r.SetBasicAuth("x", tok) },
		"empty":               func(r *http.Request) { r.Header.Set("Authorization", "Bearer ") },
		"10 KB":               func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+strings.Repeat("y", 10<<10)) },
		"token in the query":  func(r *http.Request) { r.URL.RawQuery = "token=" + tok },
		"prefix of the token": func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok[:8]) },
		"token and a suffix":  func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok+"x") },
		"two spaces":          func(r *http.Request) { r.Header.Set("Authorization", "Bearer  "+tok) },
		"two headers": func(r *http.Request) {
			r.Header.Add("Authorization", "Bearer "+tok)
			r.Header.Add("Authorization", "Bearer "+tok)
		},
		"token as cookie": func(r *http.Request) { r.Header.Set("Cookie", "token="+tok) },
	}
	var first string
	for name, set := range cases {
		for _, path := range []string{"/v1/decisions", "/v1/status", "/metrics"} {
			method := "POST"
			if path != "/v1/decisions" {
				method = "GET"
			}
			req, _ := http.NewRequest(method, b.url+path, strings.NewReader(decideBody))
			set(req)
			resp, err := oneShot.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s: %d %s, want 401 with WWW-Authenticate", name, path, resp.StatusCode, body)
			}
			if first == "" {
				first = string(body)
			} else if string(body) != first {
				t.Errorf("%s %s: body %s differs from %s", name, path, body, first)
			}
			if strings.Contains(string(body), tok[:12]) || strings.Contains(fmt.Sprint(resp.Header), tok[:12]) {
				t.Errorf("%s %s: token echoed", name, path)
			}
		}
	}
	if n := prov.Hits(fp.PathDecisions) + prov.Hits(fp.PathModels); n != 0 {
		t.Errorf("provider reached %d times without a valid token", n)
	}
	if v := readLedger(t, e.db()); len(v.rows) != 0 {
		t.Errorf("%d ledger rows without a valid token", len(v.rows))
	}
	if r := advCall(t, "POST", b.url+"/v1/decisions", tok, decideBody); r.status != 200 {
		t.Errorf("valid token: %d %s", r.status, r.body)
	}
}

// Case 4. Token file and bind hygiene: start refused (exit 2) when the
// token file or the home folder is readable by others, the token file is a
// symlink, or the address is not loopback without the flag; the message
// names the path and never the contents; nothing reaches the provider or
// the ledger.
func TestAdversarialUnsafeTokenFileOrBindRefusesStart(t *testing.T) {
	e := newE2E(t)
	prov, _ := e.provider("")
	first := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	addr := hostPort(first.url)
	tokPath := filepath.Join(e.home, "bridge.token")
	tests := []struct {
		name    string
		prepare func()
		args    []string
		want    string
	}{
		{"port taken", nil, []string{"--listen", addr}, addr},
		{"port taken: a free one", nil, []string{"--listen", addr}, "--listen 127.0.0.1:0 for a free port"},
		{"non-loopback without flag", nil, []string{"--listen", "0.0.0.0:0"}, "--allow-non-loopback"},
		{"token file readable by others", func() { os.Chmod(tokPath, 0o644) }, []string{"--listen", "127.0.0.1:0"}, "bridge.token"},
		{"token file readable by the group", func() { os.Chmod(tokPath, 0o640) }, []string{"--listen", "127.0.0.1:0"}, "bridge.token"},
		{"home readable by others", func() { os.Chmod(e.home, 0o755) }, []string{"--listen", "127.0.0.1:0"}, e.home},
		{"home open to everyone", func() { os.Chmod(e.home, 0o777) }, []string{"--listen", "127.0.0.1:0"}, e.home},
		{"symlinked token file", func() {
			os.Rename(tokPath, tokPath+".real")
			os.Symlink(tokPath+".real", tokPath)
		}, []string{"--listen", "127.0.0.1:0"}, "symlink"},
		{"bad config", func() { os.WriteFile(filepath.Join(e.home, "rotor.yaml"), []byte("catalog_ttl: soon\n"), 0o600) }, []string{"--listen", "127.0.0.1:0"}, "catalog_ttl"},
	}
	tok := e.token()
	cfg, _ := os.ReadFile(filepath.Join(e.home, "rotor.yaml"))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			os.Chmod(e.home, 0o700)
			if tt.prepare != nil {
				tt.prepare()
			}
			r := e.run(append([]string{"bridge", "start"}, tt.args...)...)
			if r.code != ExitUsage || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want 2 naming %q", r.code, r.stderr, tt.want)
			}
			if strings.Contains(r.stdout+r.stderr, tok) || strings.Contains(r.stdout+r.stderr, tok[4:20]) {
				t.Error("the token's contents were printed")
			}
			if fi, err := os.Lstat(tokPath); err == nil && fi.Mode()&os.ModeSymlink != 0 {
				os.Remove(tokPath)
				os.Rename(tokPath+".real", tokPath)
			}
			os.Chmod(tokPath, 0o600)
			os.Chmod(e.home, 0o700)
			os.WriteFile(filepath.Join(e.home, "rotor.yaml"), cfg, 0o600)
		})
	}
	// The runtime's token file gets the same checks.
	rtPath := filepath.Join(e.home, "runtime.token")
	rt := e.start("runtime", "start", "--listen", "127.0.0.1:0")
	rt.stop()
	os.Chmod(rtPath, 0o644)
	if r := e.run("runtime", "start", "--listen", "127.0.0.1:0"); r.code != ExitUsage || !strings.Contains(r.stderr, "runtime.token") {
		t.Errorf("runtime with a readable token file: exit %d %q", r.code, r.stderr)
	}
	if n := prov.Hits(fp.PathDecisions) + prov.Hits(fp.PathModels); n != 0 {
		t.Errorf("refused starts reached the provider %d times", n)
	}
	if v := readLedger(t, e.db()); len(v.rows) != 0 {
		t.Errorf("refused starts left %d ledger rows", len(v.rows))
	}
}

// startUmask000 runs a rotor server under umask 000 (through bash) and
// waits for its URL line.
func (e *e2e) startUmask000(args ...string) *proc {
	e.t.Helper()
	cmd := exec.Command("bash", append([]string{"-c", `umask 000 && exec "$0" "$@"`, e.bin}, args...)...)
	cmd.Env = e.env
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		e.t.Fatal(err)
	}
	p := &proc{t: e.t, cmd: cmd, stderr: &lockedBuffer{}, done: make(chan error, 1)}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() {
		cmd.Process.Kill()
		p.waitExit(10 * time.Second)
	})
	go func() { p.done <- cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		e.t.Fatalf("rotor %v printed no URL: %v\n%s", args, err, p.stderr)
	}
	go io.Copy(io.Discard, stdout)
	p.url = strings.TrimSpace(line)
	return p
}

// Case 4, continued. Files rotor creates are private whatever the umask:
// under umask 000, init, bridge start and runtime start create a 0700 home
// and 0600 files (tokens, config, database, WAL and shm).
func TestAdversarialNewFilesArePrivateUnderUmask000(t *testing.T) {
	checkPrivate := func(t *testing.T, home string, want ...string) {
		t.Helper()
		seen := map[string]bool{}
		filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				t.Error(err)
				return nil
			}
			fi, _ := d.Info()
			seen[d.Name()] = true
			wantMode := fs.FileMode(0o600)
			if d.IsDir() {
				wantMode = 0o700
			}
			if fi.Mode().Perm() != wantMode {
				t.Errorf("%s mode %04o under umask 000, want %04o", p, fi.Mode().Perm(), wantMode)
			}
			return nil
		})
		for _, name := range want {
			if !seen[name] {
				t.Errorf("%s was not created", name)
			}
		}
	}
	t.Run("init", func(t *testing.T) {
		e := newE2E(t)
		cmd := exec.Command("bash", "-c", `umask 000 && exec "$0" init`, e.bin)
		cmd.Env = e.env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("init: %v\n%s", err, out)
		}
		checkPrivate(t, e.home, "bridge.token", "rotor.yaml", "rotor.db")
	})
	t.Run("bridge and runtime start", func(t *testing.T) {
		e := newE2E(t)
		e.provider("")
		b := e.startUmask000("bridge", "start", "--listen", "127.0.0.1:0")
		if r := advCall(t, "POST", b.url+"/v1/decisions", e.token(), decideBody); r.status != 200 {
			t.Fatalf("decision: %d %s", r.status, r.body)
		}
		rt := e.startUmask000("runtime", "start", "--listen", "127.0.0.1:0")
		// While both run, the WAL and shm files exist.
		checkPrivate(t, e.home, "bridge.token", "runtime.token", "rotor.db", "rotor.db-wal", "rotor.db-shm")
		rt.stop()
		b.stop()
	})
}

// Case 13. A provider's redirect to another host (127.0.0.2, a second
// listener) is never followed: the caller gets 502 upstream_redirect, the
// other host receives nothing (so never the key), the request is not
// replayed to another credential, and its row holds unknown usage.
func TestAdversarialProviderRedirectToAnotherHostNotFollowed(t *testing.T) {
	e := newE2E(t)
	prov, keys := e.provider("")
	other, err := fp.Start(fp.Options{Addr: "127.0.0.2:0"})
	if err != nil {
		t.Skipf("no second loopback address: %v", err)
	}
	t.Cleanup(func() { other.Close() })
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	tok := e.token()
	advCall(t, "POST", b.url+"/v1/decisions", tok, decideBody) // warm the catalogs
	for _, code := range []int{301, 302, 303, 307, 308} {
		before := prov.Hits(fp.PathDecisions)
		prov.Script("", "", fp.Redirect(other.URL()+"/v1/decisions", code))
		r := advCall(t, "POST", b.url+"/v1/decisions", tok, decideBody)
		if r.status != 502 || errCode(r.body) != httpx.CodeUpstreamRedirect {
			t.Errorf("provider %d: %d %s, want 502 upstream_redirect", code, r.status, r.body)
		}
		if loc := r.header.Get("Location"); loc != "" {
			t.Errorf("provider %d: the answer passes Location %q on", code, loc)
		}
		if n := prov.Hits(fp.PathDecisions) - before; n != 1 {
			t.Errorf("provider %d: %d provider calls, want 1 (no replay)", code, n)
		}
	}
	if n := len(other.Requests()); n != 0 {
		t.Errorf("the other host received %d requests", n)
	}
	for _, r := range other.Requests() {
		for name, key := range keys {
			if strings.Contains(fmt.Sprint(r.Header), key) {
				t.Errorf("the other host received %s's key", name)
			}
		}
	}
	v := readLedger(t, e.db())
	var redirected int
	for _, row := range v.rows {
		if row.ErrorCode == httpx.CodeUpstreamRedirect {
			redirected++
			if row.Status != 502 || row.TotalTokens.Known || row.Attempts != 1 {
				t.Errorf("redirected row %+v, want 502, unknown tokens, one attempt", row)
			}
		}
	}
	if redirected != 5 || len(v.rows) != 6 {
		t.Errorf("ledger: %d redirected rows of %d, want 5 of 6", redirected, len(v.rows))
	}
}

// manyCredentials starts a fake provider and writes a rotor.yaml whose
// api pool has n credentials (cred-00...), each with its own canary key in
// the environment.
func manyCredentials(e *e2e, n int, runtime string) (*fp.Server, map[string]string) {
	e.t.Helper()
	p := e.fakeProvider()
	keys := map[string]string{}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "runtime: {%s}\npools:\n  api:\n    credentials:\n", runtime)
	for i := range n {
		name := fmt.Sprintf("cred-%02d", i)
		key := fmt.Sprintf("sk-canary-%02d-%d-7c3f0a91d2b84e65a0c1f3e29b5d8a47", i, time.Now().UnixNano())
		keys[name] = key
		p.AddKey(key, "decide-mini")
		env := fmt.Sprintf("ADV_KEY_%02d", i)
		e.env = append(e.env, env+"="+key)
		fmt.Fprintf(&cfg, "      - {name: %s, region: us, base_url: %q, api_key_env: %s, model_profiles: {decide-mini: {supported_endpoints: [/v1/decisions]}}}\n", name, p.URL(), env)
	}
	if err := os.MkdirAll(e.home, 0o700); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.home, "rotor.yaml"), []byte(cfg.String()), 0o600); err != nil {
		e.t.Fatal(err)
	}
	return p, keys
}

// secretLeaks reports which of the named secrets (or a distinctive 16-byte
// piece of one) occur in data.
func secretLeaks(data []byte, secrets map[string]string) []string {
	var out []string
	for name, s := range secrets {
		mid := s[len(s)/2-8 : len(s)/2+8]
		if strings.Contains(string(data), s) || strings.Contains(string(data), mid) {
			out = append(out, name)
		}
	}
	return out
}

// Case 14. Canary secrets: a concurrent load through every failure path
// the fake provider knows, with debug logs, learned cooldowns stored in the
// ledger, and a provider that echoes the key back. Neither the canary keys
// nor the client token appear in the logs, in any answer (bodies and
// headers), in any file under the home folder (database, WAL and shm
// included; bridge.token, the token's own file, excepted), and the token
// never reaches the provider.
func TestAdversarialCanarySecretsNeverLeak(t *testing.T) {
	e := newE2E(t)
	// Many credentials: most faults below take one out for minutes (auth
	// rest, unsupported endpoint, cooldowns), and every fault must be
	// reached.
	prov, keys := manyCredentials(e, 16, "deadline: 2s")
	other, err := fp.Start(fp.Options{Addr: "127.0.0.2:0"})
	if err != nil {
		other, err = fp.Start(fp.Options{})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { other.Close() })
	e.env = append(e.env, "ROTOR_LOG_LEVEL=debug", "MODEL_COOLDOWN_ENABLED=true", "LEARNED_COOLDOWN_MODE=shadow", "INTELLIGENCE_STORAGE_BACKEND=sqlite")
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	tok := e.token()
	secrets := map[string]string{"token": tok}
	for name, key := range keys {
		secrets["key of "+name] = key
	}

	var mu sync.Mutex
	var answers strings.Builder
	record := func(r httpReply) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(&answers, "%d %v\n%s\n", r.status, r.header, r.body)
	}
	record(advCall(t, "POST", b.url+"/v1/decisions", tok, decideBody))
	steps := []fp.Step{
		fp.EchoSecrets(), fp.EchoSecretsAs(401), fp.EchoSecretsAs(403), fp.EchoSecretsAs(429), fp.EchoSecretsAs(500), fp.EchoSecretsAs(404),
		fp.InsufficientQuota(), fp.RateLimited("1"), fp.ServerError(), fp.Unclassified429(), fp.Overloaded("1"),
		fp.ResetAfterRead(), fp.ResetMidAnswer(10), fp.Stall(), fp.HugeAnswer(64<<20 + 1), fp.Redirect(other.URL()+"/steal", 307),
		fp.NotFoundModel(), fp.NotFoundBare(), fp.MethodNotAllowed(), fp.NotImplemented(), fp.DripErrorBody(400, 100<<10),
		fp.StallErrorBody(400, "", 3*time.Second), fp.EchoSecrets(), fp.OK(),
	}
	prov.Script("", "", steps...)
	bodies := []string{decideBody, `{"model":"api/decide-mini","input":"` + tok + `","question":{"type":"predicate"}}`}
	var wg sync.WaitGroup
	work := make(chan string)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for body := range work {
				if r, err := tryCall(context.Background(), "POST", b.url+"/v1/decisions", tok, body); err == nil {
					record(r)
				}
			}
		}()
	}
	for i := 0; i < 3*len(steps) && prov.Remaining() > 0; i++ {
		work <- bodies[i%2]
	}
	close(work)
	wg.Wait()
	if n := prov.Remaining(); n != 0 {
		t.Errorf("%d scripted faults were never reached", n)
	}
	// The front door's refusals and the token-protected routes.
	for _, r := range []httpReply{
		advCall(t, "POST", b.url+"/v1/decisions", tok+"x", decideBody),
		advCall(t, "POST", b.url+"/v1/decisions?token="+tok, "", decideBody),
		advCall(t, "POST", b.url+"/v1/decisions", tok, decideBody, "Host", "evil.example"),
		advCall(t, "POST", b.url+"/v1/decisions", tok, decideBody, "Origin", "https://evil.example"),
		advCall(t, "POST", b.url+"/v1/decisions", tok, `{"model":"`+tok+`"}`),
		advCall(t, "POST", b.url+"/v1/decisions", tok, `not json `+tok),
		advCall(t, "GET", b.url+"/metrics", tok, ""),
		advCall(t, "GET", b.url+"/v1/status", tok, ""),
		advCall(t, "GET", b.url+"/no-such-route/"+tok, tok, ""),
	} {
		record(r)
	}
	scanHome := func(when string) {
		t.Helper()
		n := 0
		filepath.WalkDir(e.home, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() == "bridge.token" {
				return nil
			}
			n++
			data, err := os.ReadFile(p)
			if err != nil {
				t.Errorf("read %s: %v", p, err)
				return nil
			}
			if leaked := secretLeaks(data, secrets); len(leaked) > 0 {
				t.Errorf("%s %s holds %v", when, p, leaked)
			}
			return nil
		})
		if n == 0 {
			t.Errorf("%s: no files scanned", when)
		}
	}
	if _, err := os.Stat(e.db() + "-wal"); err != nil {
		t.Errorf("no WAL to scan while running: %v", err)
	}
	scanHome("while running:")
	for _, r := range prov.Requests() {
		if strings.Contains(fmt.Sprint(r.Header), tok) {
			t.Error("the client token reached the provider in a header")
		}
	}
	if b.stop() != 0 {
		t.Errorf("bridge did not stop cleanly:\n%s", b.stderr)
	}
	scanHome("after stop:")
	logs := b.stderr.String()
	if !strings.Contains(logs, "msg=request") {
		t.Fatalf("no request log lines:\n%.2000s", logs)
	}
	if leaked := secretLeaks([]byte(logs), secrets); len(leaked) > 0 {
		t.Errorf("logs hold %v", leaked)
	}
	if leaked := secretLeaks([]byte(answers.String()), secrets); len(leaked) > 0 {
		t.Errorf("answers hold %v", leaked)
	}
	if v := readLedger(t, e.db()); len(v.rows) < len(steps)/2 || v.open != 0 {
		t.Errorf("ledger: %d rows, %d open; want the load recorded and settled", len(v.rows), v.open)
	}
	if n := len(other.Requests()); n != 0 {
		t.Errorf("the redirect target received %d requests", n)
	}
}

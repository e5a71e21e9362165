package bridge

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/internal/secret"
)

// fakeTokens is a hand-written Tokens with func-free state.
type fakeTokens struct {
	mu      sync.Mutex
	labels  map[[32]byte]string
	touched map[string]time.Time
	cached  int
}

func (f *fakeTokens) LookupToken(_ context.Context, h [32]byte) (string, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l, ok := f.labels[h]
	return l, ok, nil
}

// LookupTokenCached counts its calls so tests can see which path ran.
func (f *fakeTokens) LookupTokenCached(ctx context.Context, h [32]byte) (string, bool, error) {
	f.mu.Lock()
	f.cached++
	f.mu.Unlock()
	return f.LookupToken(ctx, h)
}

func (f *fakeTokens) TouchTokens(_ context.Context, used map[string]time.Time) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, v := range used {
		f.touched[k] = v
	}
	return nil
}

const tok = "rtr_test-token-0123456789abcdefghijklmnopqrstuvwxyz"

func setup(t *testing.T, runtime http.Handler, runtimeURL *url.URL) (*Bridge, *httptest.Server, *fakeTokens) {
	t.Helper()
	return setupConfig(t, Config{Runtime: runtime, RuntimeURL: runtimeURL})
}

// setupConfig serves a bridge of cfg on a loopback server. What cfg
// leaves zero it fills: the tokens (tok, labelled ci), the port it
// serves on, the runtime token, a touch interval of an hour.
func setupConfig(t *testing.T, cfg Config) (*Bridge, *httptest.Server, *fakeTokens) {
	t.Helper()
	ft, _ := cfg.Tokens.(*fakeTokens)
	if cfg.Tokens == nil {
		ft = &fakeTokens{labels: map[[32]byte]string{secret.New(tok).Hash(): "ci"}, touched: map[string]time.Time{}}
		cfg.Tokens = ft
	}
	var b *Bridge
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg.Port = srv.Listener.Addr().(*net.TCPAddr).Port
	if cfg.RuntimeToken.IsZero() {
		cfg.RuntimeToken = secret.New("runtime-token-0123456789abcdefghijkl")
	}
	if cfg.TouchEvery == 0 {
		cfg.TouchEvery = time.Hour
	}
	b = New(cfg)
	t.Cleanup(b.Close)
	return b, srv, ft
}

// The bridge strips the caller's Authorization and any header that could
// claim a client label, and sets the label of the token that was used.
func TestForwardStripsIdentityHeadersAndSetsLabel(t *testing.T) {
	var got http.Header
	var caller httpx.Caller
	rt := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, caller = r.Header.Clone(), httpx.CallerFrom(r.Context())
		w.WriteHeader(204)
	})
	_, srv, ft := setup(t, rt, nil)
	req, _ := http.NewRequest("POST", srv.URL+"/v1/decisions", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("X-Rotor-Client", "admin")
	req.Header.Set("X-Rotor-Anything", "x")
	req.Header.Set("X-Rotor-Region", "eu")
	req.Header.Set("Proxy-Authorization", "Basic abc")
	req.Header.Set("Cookie", "session=1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 204 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if got.Get("Authorization") != "" || got.Get("Proxy-Authorization") != "" || got.Get("Cookie") != "" || got.Get("X-Rotor-Anything") != "" {
		t.Errorf("identity headers reached the runtime: %v", got)
	}
	// In-process, the label travels in the context; the caller's claim
	// never reaches the runtime.
	if caller.Label != "ci" || got.Get(httpx.ClientHeader) != "" || got.Get("X-Rotor-Region") != "eu" || got.Get("X-Request-ID") == "" {
		t.Errorf("runtime saw client %q (header %q) region %q id %q", caller.Label, got.Get(httpx.ClientHeader), got.Get("X-Rotor-Region"), got.Get("X-Request-ID"))
	}
	if len(ft.touched) != 0 {
		t.Error("last use written on the request path")
	}
}

func TestLastUseIsCoalescedAndWrittenOnClose(t *testing.T) {
	b, srv, ft := setup(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), nil)
	for i := 0; i < 5; i++ {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/decisions", strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, _ := http.DefaultClient.Do(req)
		resp.Body.Close()
	}
	b.Close()
	if _, ok := ft.touched["ci"]; !ok || len(ft.touched) != 1 {
		t.Errorf("touched = %v, want ci once", ft.touched)
	}
}

func TestOnlyKnownRoutesAreForwarded(t *testing.T) {
	hits := 0
	_, srv, _ := setup(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits++ }), nil)
	for _, p := range []string{"/v1/files", "/admin", "/v1/decisions/../x"} {
		req, _ := http.NewRequest("GET", srv.URL+p, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, _ := http.DefaultClient.Do(req)
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Errorf("%s: %d, want 404", p, resp.StatusCode)
		}
	}
	resp, _ := http.Get(srv.URL + "/healthz")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "ok") {
		t.Errorf("healthz = %d %s", resp.StatusCode, body)
	}
	if hits != 0 {
		t.Errorf("runtime reached %d times", hits)
	}
}

// Forwarding to a standalone runtime sends the runtime's token, never the
// caller's, and maps an unreachable runtime to 502 runtime_unavailable.
func TestStandaloneRuntimeGetsRuntimeToken(t *testing.T) {
	var auth string
	rt := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth = r.Header.Get("Authorization")
		w.Write([]byte(`{"ok":true}`))
	}))
	u, _ := url.Parse(rt.URL)
	_, srv, _ := setup(t, nil, u)
	req, _ := http.NewRequest("POST", srv.URL+"/v1/decisions", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if auth != "Bearer runtime-token-0123456789abcdefghijkl" {
		t.Errorf("runtime got Authorization %q", auth)
	}
	rt.Close()
	req, _ = http.NewRequest("POST", srv.URL+"/v1/decisions", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 502 || !strings.Contains(string(body), "runtime_unavailable") {
		t.Errorf("runtime down: %d %s", resp.StatusCode, body)
	}
}

// With the runtime in-process, Decisions requests use the cached token
// list and carry the token's hash for admission to re-check; other routes
// check the database.
func TestInProcessDecisionsUseCachedLookupAndCarryTokenHash(t *testing.T) {
	var got http.Header
	var caller httpx.Caller
	_, srv, ft := setup(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, caller = r.Header.Clone(), httpx.CallerFrom(r.Context())
	}), nil)
	send := func(method, path string, hdr ...string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader("{}"))
		req.Header.Set("Authorization", "Bearer "+tok)
		for i := 0; i+1 < len(hdr); i += 2 {
			req.Header.Set(hdr[i], hdr[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	send("POST", "/v1/decisions")
	h := secret.New(tok).Hash()
	if ft.cached != 1 || !caller.CheckToken || caller.TokenHash != h {
		t.Errorf("decisions: cached lookups %d, caller %+v", ft.cached, caller)
	}
	send("GET", "/v1/status")
	if ft.cached != 1 {
		t.Errorf("status used the cached list")
	}
	send("POST", "/v1/decisions", "X-Rotor-Token-Hash", strings.Repeat("0", 64))
	if got.Get("X-Rotor-Token-Hash") != "" || caller.TokenHash != h {
		t.Errorf("a caller's token hash reached the runtime: header %q, caller %x", got.Get("X-Rotor-Token-Hash"), caller.TokenHash)
	}
}

// eachRuntime runs check against a bridge in front of an in-process
// runtime and one in front of a standalone runtime, and fails t if either
// runtime is reached.
func eachRuntime(t *testing.T, check func(t *testing.T, srv *httptest.Server)) {
	var hits atomic.Int64
	eachRuntimeServing(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }), check)
	if n := hits.Load(); n != 0 {
		t.Errorf("the runtime was reached %d times", n)
	}
}

// eachRuntimeServing runs check, as a subtest, against a bridge in front
// of runtime in process and one in front of runtime served standalone.
func eachRuntimeServing(t *testing.T, runtime http.Handler, check func(t *testing.T, srv *httptest.Server)) {
	standalone := httptest.NewServer(runtime)
	t.Cleanup(standalone.Close)
	u, _ := url.Parse(standalone.URL)
	for _, rt := range []struct {
		name string
		h    http.Handler
		u    *url.URL
	}{{"in-process", runtime, nil}, {"standalone", nil, u}} {
		t.Run(rt.name, func(t *testing.T) {
			_, srv, _ := setup(t, rt.h, rt.u)
			check(t, srv)
		})
	}
}

// Issue 14, item 10: the bridge answers another method on a known path 405
// method_not_allowed with Allow itself (before, GET /v1/decisions reached
// the runtime's catch-all 404), whichever runtime is behind it.
func TestNonPostOnDecisionsIs405WithAllow(t *testing.T) {
	eachRuntime(t, func(t *testing.T, srv *httptest.Server) {
		for _, tt := range []struct{ method, path, allow string }{
			{"GET", "/v1/decisions", "POST"}, {"PUT", "/v1/decisions", "POST"}, {"HEAD", "/v1/decisions", "POST"},
			{"POST", "/v1/status", "GET"}, {"DELETE", "/metrics", "GET"}, {"POST", "/healthz", "GET"},
			{"GET", "/v1/chat/completions", "POST"}, {"PUT", "/v1/responses", "POST"}, {"GET", "/v1/embeddings", "POST"},
			{"POST", "/v1/models", "GET"}, {"POST", "/v1/responses/resp_1", "GET, DELETE"},
		} {
			resp, b := callWithToken(t, tt.method, srv.URL+tt.path, nil, 0)
			if resp.StatusCode != 405 || resp.Header.Get("Allow") != tt.allow {
				t.Errorf("%s %s = %d Allow %q, want 405 Allow %q", tt.method, tt.path, resp.StatusCode, resp.Header.Get("Allow"), tt.allow)
			}
			if tt.method != "HEAD" && !strings.Contains(string(b), `"method_not_allowed"`) {
				t.Errorf("%s %s body %s, want code method_not_allowed", tt.method, tt.path, b)
			}
		}
	})
}

// Issue 14, item 6: the bridge refuses a Content-Length over 64 MiB with
// 413 before reading any byte of the body, also under Expect:
// 100-continue (never 100 Continue), whichever runtime is behind it. The
// client sends headers only: it gets its answer, or the guard's deadline
// fails the test.
func TestOversizedContentLengthRefusedAtOnce(t *testing.T) {
	eachRuntime(t, func(t *testing.T, srv *httptest.Server) {
		for _, expect := range []bool{false, true} {
			addr := srv.Listener.Addr().String()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(20 * time.Second)) // a guard against a hang, not a timing
			hdr := fmt.Sprintf("POST /v1/decisions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: %d\r\n", addr, tok, MaxBody+1)
			if expect {
				hdr += "Expect: 100-continue\r\n"
			}
			fmt.Fprint(c, hdr+"\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("expect %v: no answer before any body byte: %v", expect, err)
			}
			b, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil || resp.StatusCode != 413 || !strings.Contains(string(b), `"request_too_large"`) {
				t.Errorf("expect %v: first answer %d %s (%v), want 413 request_too_large read to its end", expect, resp.StatusCode, b, err)
			}
		}
	})
}

// Issue 14, item 7: when the standalone runtime is lost after the request
// went out, it may have made a provider call: 502 runtime_unavailable
// carries x-should-retry: false. A runtime that could not be reached at
// all ran nothing, and the client may retry.
func TestRuntimeLostAfterSendCarriesNoRetryHint(t *testing.T) {
	lost := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close() // the request arrived; no answer ever leaves
		}
	}))
	t.Cleanup(lost.Close)
	down := httptest.NewServer(http.NotFoundHandler())
	downURL, _ := url.Parse(down.URL)
	down.Close()
	lostURL, _ := url.Parse(lost.URL)
	for _, tt := range []struct {
		name  string
		u     *url.URL
		retry string
	}{{"lost after send", lostURL, "false"}, {"never reached", downURL, ""}} {
		t.Run(tt.name, func(t *testing.T) {
			_, srv, _ := setup(t, nil, tt.u)
			resp, body := callWithToken(t, "POST", srv.URL+"/v1/decisions", strings.NewReader("{}"), 0)
			if resp.StatusCode != 502 || !strings.Contains(string(body), "runtime_unavailable") {
				t.Fatalf("%d %s, want 502 runtime_unavailable", resp.StatusCode, body)
			}
			if got := resp.Header.Get("x-should-retry"); got != tt.retry {
				t.Errorf("x-should-retry = %q, want %q", got, tt.retry)
			}
		})
	}
}

// forwardedHeaders sends a Decisions request with the bridge's client
// token and the caller's extra headers through a bridge in front of a
// standalone runtime, and returns the headers the runtime received.
func forwardedHeaders(t *testing.T, extra map[string]string) http.Header {
	t.Helper()
	var got http.Header
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	_, srv, _ := setup(t, nil, u)
	req, _ := http.NewRequest("POST", srv.URL+"/v1/decisions", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+tok)
	for k, v := range extra {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return got
}

// To a standalone runtime, the caller's label travels in the one header
// the runtime trusts from holders of its token; the caller's own claim is
// replaced, and no token hash goes out.
func TestStandaloneRuntimeGetsLabelHeader(t *testing.T) {
	got := forwardedHeaders(t, map[string]string{httpx.ClientHeader: "admin", "X-Rotor-Token-Hash": strings.Repeat("0", 64)})
	if got.Get(httpx.ClientHeader) != "ci" || got.Get("X-Rotor-Token-Hash") != "" || got.Get("Authorization") != "Bearer runtime-token-0123456789abcdefghijkl" {
		t.Errorf("standalone runtime saw client %q hash %q auth %q", got.Get(httpx.ClientHeader), got.Get("X-Rotor-Token-Hash"), got.Get("Authorization"))
	}
}

// Behind --runtime-url, a caller naming rotor's own headers in Connection
// (which the reverse proxy treats as hop-by-hop) cannot make its rows the
// runtime's ("runtime", not the token's label) or break the request id
// the two access logs share.
func TestCallerConnectionHeaderCannotStripTheLabelOrRequestID(t *testing.T) {
	got := forwardedHeaders(t, map[string]string{"Connection": "X-Rotor-Client, X-Request-ID"})
	if got.Get(httpx.ClientHeader) != "ci" {
		t.Errorf("standalone runtime saw client %q, want ci (the caller's Connection header removed the bridge's label)", got.Get(httpx.ClientHeader))
	}
	if got.Get("X-Request-ID") == "" {
		t.Errorf("standalone runtime saw no X-Request-ID: bridge and runtime log lines no longer share the id")
	}
}

// The OpenAI routes reach the runtime, in-process or standalone, and a
// stream's events reach the caller as they arrive (each one before the
// runtime sends the next).
func TestOpenAIRoutesForwardedAndStreamsFlushed(t *testing.T) {
	next := make(chan struct{})
	var mu sync.Mutex
	var paths []string
	runtime := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.Method+" "+r.URL.Path)
		mu.Unlock()
		if r.URL.Path != "/v1/chat/completions" {
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: 1\n\n")
		http.NewResponseController(w).Flush()
		<-next
		io.WriteString(w, "data: [DONE]\n\n")
	})
	standalone := httptest.NewServer(runtime)
	defer standalone.Close()
	u, _ := url.Parse(standalone.URL)
	for _, rt := range []struct {
		name string
		h    http.Handler
		u    *url.URL
	}{{"in-process", runtime, nil}, {"standalone", nil, u}} {
		t.Run(rt.name, func(t *testing.T) {
			mu.Lock()
			paths = nil
			mu.Unlock()
			_, srv, _ := setup(t, rt.h, rt.u)
			for _, c := range []struct{ method, path string }{
				{"POST", "/v1/responses"}, {"POST", "/v1/embeddings"}, {"GET", "/v1/models"}, {"GET", "/v1/responses/resp_1"}, {"DELETE", "/v1/responses/resp_1"},
			} {
				req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader("{}"))
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
			}
			req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader("{}"))
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(resp.Body)
			if line, err := br.ReadString('\n'); err != nil || line != "data: 1\n" {
				t.Errorf("first event %q %v before the second was sent", line, err)
			}
			next <- struct{}{}
			rest, _ := io.ReadAll(br)
			resp.Body.Close()
			if string(rest) != "\ndata: [DONE]\n\n" {
				t.Errorf("rest of the stream %q", rest)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(paths) != 6 {
				t.Errorf("runtime saw %v, want every OpenAI route", paths)
			}
		})
	}
}

// With a standalone runtime, an answer outlasts the bridge server's write
// timeout (which fits the Decisions deadline) as long as the runtime is
// still sending it: a stream of events spaced under the idle window, and
// an answer that comes after the write timeout, reach the caller whole,
// where both were cut when the timeout passed.
func TestForwardedAnswerOutlastsTheWriteTimeout(t *testing.T) {
	const writeTimeout = 300 * time.Millisecond
	runtime := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/chat/completions" { // a stream, three write timeouts long
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 9 {
				fmt.Fprintf(w, "data: {\"n\":%d}\n\n", i)
				w.(http.Flusher).Flush()
				time.Sleep(writeTimeout / 3)
			}
			fmt.Fprint(w, "data: [DONE]\n\n")
			return
		}
		time.Sleep(2 * writeTimeout) // a long generation, answered at once
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(runtime.Close)
	ru, _ := url.Parse(runtime.URL)
	ft := &fakeTokens{labels: map[[32]byte]string{secret.New(tok).Hash(): "ci"}, touched: map[string]time.Time{}}
	var b *Bridge
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { b.Handler().ServeHTTP(w, r) }))
	srv.Config.WriteTimeout = writeTimeout
	srv.Start()
	t.Cleanup(srv.Close)
	port, _ := strconv.Atoi(srv.URL[strings.LastIndex(srv.URL, ":")+1:])
	b = New(Config{RuntimeURL: ru, RuntimeToken: secret.New("runtime-token-0123456789abcdefghijkl"), Tokens: ft, Port: port,
		TouchEvery: time.Hour, WriteIdle: 10 * time.Second})
	t.Cleanup(b.Close)
	for path, want := range map[string]string{"/v1/chat/completions": "data: [DONE]\n\n", "/v1/responses": `{"ok":true}`} {
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(`{"model":"api/m"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || !strings.HasSuffix(string(body), want) {
			t.Errorf("%s: the caller got %q, %v; want the whole answer, ending %q", path, body, err, want)
		}
	}
}

type aFiller struct{}

func (aFiller) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// A chunked body over the 64 MiB cap, sent to a bridge in front of a
// standalone runtime, must be answered 413 request_too_large (as the
// in-process bridge does), not 502 runtime_unavailable.
func TestChunkedBodyOverTheCapIs413BehindAStandaloneRuntime(t *testing.T) {
	rt := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // a runtime reading the body it is sent
		w.WriteHeader(200)
	}))
	defer rt.Close()
	u, _ := url.Parse(rt.URL)
	_, srv, _ := setup(t, nil, u)
	for _, path := range []string{"/v1/chat/completions", "/v1/decisions"} {
		resp, body := callWithToken(t, "POST", srv.URL+path, io.LimitReader(aFiller{}, MaxBody+1), -1) // chunked
		if resp.StatusCode != 413 || !strings.Contains(string(body), "request_too_large") {
			t.Errorf("%s: %d %s (x-should-retry %q), want 413 request_too_large", path, resp.StatusCode, body, resp.Header.Get("x-should-retry"))
		}
	}
}

// The runtime's access record (X-Rotor-Access) is for the bridge's access
// line, never for the caller; an empty one (GET /v1/models, /v1/status)
// must not reach the caller either.
func TestEmptyAccessRecordDoesNotReachTheCaller(t *testing.T) {
	rt := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Rotor-Access", "") // what gateway.accessWriter sends for an empty AccessInfo
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[]}`)
	}))
	defer rt.Close()
	u, _ := url.Parse(rt.URL)
	_, srv, _ := setup(t, nil, u)
	req, _ := http.NewRequest("GET", srv.URL+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, ok := resp.Header["X-Rotor-Access"]; ok {
		t.Errorf("caller got the runtime's internal X-Rotor-Access header")
	}
}

// callWithToken sends method to url with body and the client token
// (contentLength -1: chunked; 0: as net/http works it out) and returns the
// answer, its body read.
func callWithToken(t *testing.T, method, url string, body io.Reader, contentLength int64) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, body)
	if contentLength != 0 {
		req.ContentLength = contentLength
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp, b
}

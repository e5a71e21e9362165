package httpx

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rotorhq/rotor/internal/secret"
)

const guardToken = "rtr_guard-0123456789abcdefghijklmnopqrstuvwx"

func testGuard() *Guard {
	return &Guard{
		Port: 8787, ExtraHosts: []string{"10.0.0.5", "[fd00::1]"}, AllowedOrigins: []string{"https://app.example/"},
		Open: map[string]bool{"/healthz": true},
		Authenticate: func(_ *http.Request, tok secret.Value) (string, bool, error) {
			return "ci", tok.Equal(secret.New(guardToken)), nil
		},
	}
}

func TestValidHost(t *testing.T) {
	g := testGuard()
	for _, tc := range []struct {
		name, host string
		want       bool
	}{
		{"loopback address", "127.0.0.1:8787", true},
		{"other loopback address", "127.9.9.9:8787", true},
		{"localhost", "localhost:8787", true},
		{"localhost upper case", "LOCALHOST:8787", true},
		{"localhost trailing dot", "localhost.:8787", true},
		{"subdomain of localhost", "app.localhost:8787", true},
		{"ipv6 loopback", "[::1]:8787", true},
		{"extra host", "10.0.0.5:8787", true},
		{"extra ipv6 host", "[fd00::1]:8787", true},
		{"wrong port", "127.0.0.1:8788", false},
		{"no port on a server not on 80", "127.0.0.1", false},
		{"rebinding name", "attacker.example:8787", false},
		{"localhost lookalike", "localhost.attacker.example:8787", false},
		{"other private address", "10.0.0.6:8787", false},
		{"empty", "", false},
		{"bad port", "127.0.0.1:http", false},
		{"too long", "a" + string(make([]byte, 300)) + ":8787", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := g.ValidHost(tc.host); got != tc.want {
				t.Errorf("ValidHost(%q) = %v, want %v", tc.host, got, tc.want)
			}
		})
	}
	// A server on every address (--listen 0.0.0.0 or [::]) is reached by
	// any of the machine's addresses, but a name still must be loopback.
	for _, addr := range []string{"0.0.0.0", "::", "[::]"} {
		g := &Guard{Port: 8787, ExtraHosts: []string{addr}}
		for host, want := range map[string]bool{
			"192.0.2.7:8787": true, "[2001:db8::1]:8787": true, "127.0.0.1:8787": true, "localhost:8787": true,
			"192.0.2.7:8788": false, "attacker.example:8787": false, "1.2.3.4.nip.io:8787": false,
		} {
			if got := g.ValidHost(host); got != want {
				t.Errorf("listening on %s: ValidHost(%q) = %v, want %v", addr, host, got, want)
			}
		}
	}
	t.Run("no port on a server on 80", func(t *testing.T) {
		if g := (&Guard{Port: 80}); !g.ValidHost("localhost") {
			t.Error("ValidHost(localhost) on port 80 = false")
		}
	})
}

func TestOrigin(t *testing.T) {
	for _, tc := range []struct {
		name    string
		method  string
		headers map[string]string
		status  int
		// allowOrigin is the Access-Control-Allow-Origin answer header.
		allowOrigin string
	}{
		{"no browser headers", "POST", nil, 200, ""},
		{"allowed origin", "POST", map[string]string{"Origin": "https://app.example"}, 200, "https://app.example"},
		{"allowed origin, other case", "POST", map[string]string{"Origin": "HTTPS://APP.EXAMPLE"}, 200, "HTTPS://APP.EXAMPLE"},
		{"other origin", "POST", map[string]string{"Origin": "https://evil.example"}, 403, ""},
		{"null origin", "POST", map[string]string{"Origin": "null"}, 403, ""},
		{"referer of an allowed origin", "POST", map[string]string{"Referer": "https://app.example/page?q=1"}, 200, "https://app.example"},
		{"referer of another origin", "POST", map[string]string{"Referer": "https://evil.example/page"}, 403, ""},
		{"cross-site fetch without origin", "POST", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, ""},
		{"same-origin fetch", "POST", map[string]string{"Sec-Fetch-Site": "same-origin"}, 200, ""},
		// Same-site is another origin of the site (a page on another
		// localhost port): without an Origin to check, refused too.
		{"same-site fetch without origin", "POST", map[string]string{"Sec-Fetch-Site": "same-site"}, 403, ""},
		{"user-typed navigation", "GET", map[string]string{"Sec-Fetch-Site": "none"}, 200, ""},
		{"preflight from allowed origin", "OPTIONS", map[string]string{"Origin": "https://app.example"}, 204, "https://app.example"},
		{"preflight without origin", "OPTIONS", nil, 403, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reached := false
			h := testGuard().Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached = true }))
			req := httptest.NewRequest(tc.method, "http://127.0.0.1:8787/v1/decisions", nil)
			req.Header.Set("Authorization", "Bearer "+guardToken)
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status || rec.Header().Get("Access-Control-Allow-Origin") != tc.allowOrigin {
				t.Errorf("%s = %d, Allow-Origin %q; want %d, %q", tc.method, rec.Code, rec.Header().Get("Access-Control-Allow-Origin"), tc.status, tc.allowOrigin)
			}
			if reached != (tc.status == 200) {
				t.Errorf("handler reached = %v with status %d", reached, rec.Code)
			}
		})
	}
}

// A preflight from an allowed origin allows the headers it asks for when
// each is a header name: the official SDKs send OpenAI-Beta and
// X-Stainless-* on every request, and a preflight that leaves one out
// fails the request in the browser. Anything else gets rotor's own list.
func TestPreflightAllowsTheHeadersTheSDKsSend(t *testing.T) {
	const sdk = "authorization,content-type,openai-beta,x-stainless-arch,x-stainless-lang,x-stainless-retry-count"
	for _, tc := range []struct {
		name, origin, requested string
		status                  int
		want                    []string
		not                     []string
	}{
		{"the SDK's headers", "https://app.example", sdk, 204, strings.Split(sdk, ","), nil},
		{"none asked", "https://app.example", "", 204, []string{"Authorization", "X-Rotor-Region"}, []string{"x-stainless"}},
		{"a name that is no token", "https://app.example", "x-ok, bad header", 204, []string{"Authorization"}, []string{"x-ok", "bad"}},
		{"other origin", "https://evil.example", sdk, 403, nil, []string{"x-stainless"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := testGuard().Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			req := httptest.NewRequest("OPTIONS", "http://127.0.0.1:8787/v1/chat/completions", nil)
			req.Header.Set("Origin", tc.origin)
			req.Header.Set("Access-Control-Request-Method", "POST")
			if tc.requested != "" {
				req.Header.Set("Access-Control-Request-Headers", tc.requested)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			allowed := rec.Header().Get("Access-Control-Allow-Headers")
			if rec.Code != tc.status {
				t.Fatalf("preflight = %d, want %d", rec.Code, tc.status)
			}
			for _, w := range tc.want {
				if !strings.Contains(strings.ToLower(allowed), strings.ToLower(w)) {
					t.Errorf("Allow-Headers %q lacks %q", allowed, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(strings.ToLower(allowed), n) {
					t.Errorf("Allow-Headers %q holds %q", allowed, n)
				}
			}
		})
	}
}

// The guard authenticates last, and hands the caller it authenticated to
// the handler through the context (httpx.CallerFrom), the one way it
// travels inside a process.
func TestGuardTokenAndCaller(t *testing.T) {
	for _, tc := range []struct {
		name, path, auth string
		status           int
		label            string
	}{
		{"valid token", "/v1/decisions", "Bearer " + guardToken, 200, "ci"},
		{"no token", "/v1/decisions", "", 401, ""},
		{"wrong token", "/v1/decisions", "Bearer rtr_wrong", 401, ""},
		{"other scheme", "/v1/decisions", "Basic " + guardToken, 401, ""},
		{"open path without token", "/healthz", "", 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got Caller
			h := testGuard().Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = CallerFrom(r.Context()) }))
			req := httptest.NewRequest("GET", "http://127.0.0.1:8787"+tc.path, nil)
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.status || got.Label != tc.label {
				t.Errorf("= %d caller %q, want %d %q", rec.Code, got.Label, tc.status, tc.label)
			}
		})
	}
}

// An open path (Guard.Open, e.g. /healthz) is open for reading only: GET
// and HEAD are served without a token, any other method on it needs the
// token like every other path, so that opening a path for health checks
// never lets an unauthenticated caller write through it.
func TestGuardOpenPathsOnlyForReads(t *testing.T) {
	for _, tc := range []struct {
		method string
		status int
	}{
		{"GET", 200}, {"HEAD", 200}, {"POST", 401}, {"PUT", 401}, {"DELETE", 401},
	} {
		reached := false
		h := testGuard().Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached = true }))
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(tc.method, "http://127.0.0.1:8787/healthz", nil))
		if rec.Code != tc.status || reached != (tc.status == 200) {
			t.Errorf("%s /healthz without a token = %d (handler reached %v), want %d", tc.method, rec.Code, reached, tc.status)
		}
	}
}

// ListenLoopback listens on loopback only unless allowed: a non-loopback
// address is refused by name before anything is bound, and what a name
// bound is checked too (boundToLoopback), so a loopback-looking name that
// resolves elsewhere is refused as well.
func TestListenLoopback(t *testing.T) {
	for _, tc := range []struct {
		addr  string
		allow bool
		ok    bool
	}{
		{"127.0.0.1:0", false, true},
		{"localhost:0", false, true},
		{"[::1]:0", false, true},
		{"0.0.0.0:0", false, false},
		{"[::]:0", false, false},
		{"0.0.0.0:0", true, true},
	} {
		ln, err := ListenLoopback(tc.addr, tc.allow)
		if ln != nil {
			ln.Close()
		}
		if (err == nil) != tc.ok {
			t.Errorf("ListenLoopback(%s, %v) = %v, want ok %v", tc.addr, tc.allow, err, tc.ok)
		}
		var le *ListenError
		if err != nil && (!errors.As(err, &le) || !le.Usage) {
			t.Errorf("ListenLoopback(%s, %v) = %v, want a usage ListenError", tc.addr, tc.allow, err)
		}
	}
	for addr, want := range map[string]bool{"127.0.0.1:0": true, "0.0.0.0:0": false} {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := boundToLoopback(ln); got != want {
			t.Errorf("boundToLoopback(listener on %s) = %v, want %v", addr, got, want)
		}
		ln.Close()
	}
}

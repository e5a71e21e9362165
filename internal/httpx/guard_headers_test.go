package httpx

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/rotorhq/rotor/internal/secret"
)

// Every answer through the guard carries nosniff, a default-src 'none'
// CSP and Cache-Control: no-store (README, security): served ones and each
// kind of refusal alike.
func TestGuardSecurityHeadersOnEveryAnswer(t *testing.T) {
	for _, tc := range []struct {
		name    string
		method  string
		host    string
		headers map[string]string
	}{
		{"served", "POST", "127.0.0.1:8787", map[string]string{"Authorization": "Bearer " + guardToken}},
		{"open path", "GET", "127.0.0.1:8787", nil},
		{"foreign host", "POST", "evil.example:8787", nil},
		{"foreign origin", "POST", "127.0.0.1:8787", map[string]string{"Origin": "https://evil.example"}},
		{"no token", "POST", "127.0.0.1:8787", nil},
		{"preflight", "OPTIONS", "127.0.0.1:8787", map[string]string{"Origin": "https://app.example"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := testGuard().Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
			path := "/v1/decisions"
			if tc.method == "GET" {
				path = "/healthz"
			}
			req := httptest.NewRequest(tc.method, path, nil)
			req.Host = tc.host
			for k, v := range tc.headers {
				req.Header.Set(k, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			for k, want := range map[string]string{
				"X-Content-Type-Options":  "nosniff",
				"Content-Security-Policy": "default-src 'none'",
				"Cache-Control":           "no-store",
			} {
				if got := rec.Header().Get(k); !strings.Contains(got, want) {
					t.Errorf("%d answer: %s = %q, want %q", rec.Code, k, got, want)
				}
			}
		})
	}
}

// An allowed origin can read the retry advice and the request id: the
// answer exposes Retry-After, retry-after-ms, X-Request-ID and
// x-should-retry (README), which a browser otherwise hides from the page.
func TestGuardExposesRetryHeadersToAllowedOrigins(t *testing.T) {
	h := testGuard().Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	req := httptest.NewRequest("POST", "http://127.0.0.1:8787/v1/decisions", nil)
	req.Header.Set("Origin", "https://app.example")
	req.Header.Set("Authorization", "Bearer "+guardToken)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	exposed := strings.ToLower(rec.Header().Get("Access-Control-Expose-Headers"))
	for _, name := range []string{"retry-after", "retry-after-ms", "x-request-id", "x-should-retry"} {
		if !strings.Contains(", "+exposed+",", ", "+name+",") {
			t.Errorf("Access-Control-Expose-Headers %q lacks %s", exposed, name)
		}
	}
}

// A preflight allows what it asks for only when every name is a header
// name (an RFC 9110 token, digits included, at most 128 bytes) and there
// are at most 64 of them; anything else gets rotor's own list alone.
func TestPreflightAllowHeadersLimits(t *testing.T) {
	names := func(n int) string {
		s := make([]string, n)
		for i := range s {
			s[i] = "x-h" + strconv.Itoa(i)
		}
		return strings.Join(s, ",")
	}
	long := "x-" + strings.Repeat("a", 126)
	for _, tc := range []struct {
		name, requested string
		asked           bool // the requested names are allowed
	}{
		{"64 names", names(64), true},
		{"65 names", names(65), false},
		{"a 128-byte name", long, true},
		{"a 129-byte name", long + "a", false},
		{"digits in a name", "x-client-v9,x-3d", true},
		{"an empty name", "x-a,,x-b", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := allowHeaders(tc.requested)
			if tc.asked && got != corsHeaders+", "+strings.ReplaceAll(tc.requested, ",", ", ") {
				t.Errorf("allowHeaders = %q, want rotor's list and the %d asked for", got, strings.Count(tc.requested, ",")+1)
			}
			if !tc.asked && got != corsHeaders {
				t.Errorf("allowHeaders = %q, want rotor's list alone", got)
			}
		})
	}
}

// A foreign Host is refused before anything else, its body unread, and
// the answer says Connection: close: the connection is not kept for more
// of a client that names another server (DNS rebinding).
func TestGuardForeignHostClosesTheConnection(t *testing.T) {
	h := testGuard().Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	req := httptest.NewRequest("POST", "/v1/decisions", strings.NewReader("{}"))
	req.Host = "evil.example:8787"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusForbidden || rec.Header().Get("Connection") != "close" {
		t.Errorf("foreign Host: %d, Connection %q; want 403 and close", rec.Code, rec.Header().Get("Connection"))
	}
}

// A request with two Authorization headers is refused, not served by the
// first: a proxy in between may have read the other one.
func TestGuardRefusesTwoAuthorizationHeaders(t *testing.T) {
	reached := false
	h := testGuard().Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached = true }))
	req := httptest.NewRequest("POST", "http://127.0.0.1:8787/v1/decisions", nil)
	req.Header.Add("Authorization", "Bearer "+guardToken)
	req.Header.Add("Authorization", "Bearer rtr_other")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusUnauthorized || reached {
		t.Errorf("two Authorization headers: %d (handler reached %v), want 401", rec.Code, reached)
	}
}

// A Host over 255 bytes is refused, even one that ends in .localhost.
func TestValidHostRefusesOver255Bytes(t *testing.T) {
	const suffix = ".localhost:8787"
	g := testGuard()
	if host := strings.Repeat("a", 255-len(suffix)) + suffix; !g.ValidHost(host) {
		t.Errorf("ValidHost refused a %d-byte loopback Host", len(host))
	}
	if host := strings.Repeat("a", 256-len(suffix)) + suffix; g.ValidHost(host) {
		t.Errorf("ValidHost accepted a %d-byte Host", len(host))
	}
}

// A token check that fails on the ledger (a database down) answers 503
// ledger_unavailable with Retry-After: 1, never 401: the caller's token is
// not at fault and a retry in a second may pass (README, outages).
func TestGuardLedgerErrorIs503RetryAfterOne(t *testing.T) {
	g := testGuard()
	g.Authenticate = func(*http.Request, secret.Value) (string, bool, error) { return "", false, errors.New("database down") }
	h := g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	req := httptest.NewRequest("POST", "http://127.0.0.1:8787/v1/decisions", nil)
	req.Header.Set("Authorization", "Bearer "+guardToken)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), CodeLedgerUnavailable) || rec.Header().Get("Retry-After") != "1" {
		t.Errorf("ledger error: %d Retry-After %q %s; want 503 ledger_unavailable, Retry-After: 1", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
}

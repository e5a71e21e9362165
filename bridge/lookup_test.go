package bridge

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/internal/secret"
)

// Only a route whose runtime re-checks the token at admission may trust the
// cached token list: POST Decisions and the OpenAI POST routes in front of
// an in-process runtime, which carry the token's hash to admission. GET
// /v1/models (no admission) and every route in front of a standalone
// runtime (which sees only the bridge's runtime token, never the caller's)
// check the database, so that a revoked token stops at once.
func TestCachedTokenListOnlyWhereAdmissionRechecks(t *testing.T) {
	var caller atomic.Pointer[httpx.Caller]
	inProcess := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := httpx.CallerFrom(r.Context())
		caller.Store(&c)
	})
	standalone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(standalone.Close)
	u, _ := url.Parse(standalone.URL)
	h := secret.New(tok).Hash()
	for _, tt := range []struct {
		runtime      string
		method, path string
		cached       bool
	}{
		{"in-process", "POST", "/v1/decisions", true},
		{"in-process", "POST", "/v1/chat/completions", true},
		{"in-process", "POST", "/v1/responses", true},
		{"in-process", "POST", "/v1/embeddings", true},
		{"in-process", "GET", "/v1/models", false},
		{"in-process", "GET", "/v1/responses/resp_1", false},
		{"in-process", "GET", "/v1/status", false},
		{"standalone", "POST", "/v1/decisions", false},
		{"standalone", "POST", "/v1/chat/completions", false},
		{"standalone", "GET", "/v1/models", false},
	} {
		var rt http.Handler
		var ru *url.URL
		if tt.runtime == "in-process" {
			rt = inProcess
		} else {
			ru = u
		}
		caller.Store(nil)
		_, srv, ft := setup(t, rt, ru)
		resp, b := callWithToken(t, tt.method, srv.URL+tt.path, strings.NewReader("{}"), 0)
		if resp.StatusCode != 200 {
			t.Errorf("%s %s %s: %d %s", tt.runtime, tt.method, tt.path, resp.StatusCode, b)
		}
		ft.mu.Lock()
		cached := ft.cached
		ft.mu.Unlock()
		if (cached == 1) != tt.cached {
			t.Errorf("%s %s %s: %d cached lookups, want the cached list: %v", tt.runtime, tt.method, tt.path, cached, tt.cached)
		}
		if c := caller.Load(); tt.cached && (c == nil || !c.CheckToken || c.TokenHash != h) {
			t.Errorf("%s %s %s: from the cached list, yet admission gets no token to re-check: %+v", tt.runtime, tt.method, tt.path, c)
		}
	}
}

// A token the store does not know, or none, is 401 invalid_token with
// WWW-Authenticate on every forwarded route, whichever runtime is behind
// the bridge; the runtime is never reached.
func TestUnknownTokenIs401OnEveryRoute(t *testing.T) {
	eachRuntime(t, func(t *testing.T, srv *httptest.Server) {
		for _, c := range []struct{ method, path string }{
			{"POST", "/v1/decisions"}, {"POST", "/v1/chat/completions"}, {"POST", "/v1/responses"}, {"POST", "/v1/embeddings"},
			{"GET", "/v1/models"}, {"GET", "/v1/status"}, {"GET", "/metrics"},
		} {
			for _, bearer := range []string{"rtr_unknown-0123456789abcdefghijklmnopqrstuvwxyz", ""} {
				req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader("{}"))
				if bearer != "" {
					req.Header.Set("Authorization", "Bearer "+bearer)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" || !strings.Contains(string(b), `"invalid_token"`) {
					t.Errorf("%s %s with token %q: %d %s, want 401 invalid_token with WWW-Authenticate", c.method, c.path, bearer, resp.StatusCode, b)
				}
			}
		}
	})
}

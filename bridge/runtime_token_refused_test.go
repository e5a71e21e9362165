package bridge

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/rotorhq/rotor/gateway"
	"github.com/rotorhq/rotor/internal/secret"
)

// A standalone runtime that refuses the bridge's runtime token (the two
// were started with different ROTOR_RUNTIME_TOKEN / runtime.token_file)
// must not make the bridge tell its caller that the caller's valid client
// token is wrong: README, 401 invalid_token is "missing or wrong token",
// and 'rotor status' then exits 2 blaming ROTOR_TOKEN/bridge.token. The
// caller gets 502 runtime_unavailable, and the operator a log line.
func TestRuntimeRefusingTheRuntimeTokenIsNotTheCallersInvalidToken(t *testing.T) {
	rsrv := httptest.NewUnstartedServer(nil)
	rt := gateway.New(gateway.Config{
		Decisions: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{}`)) }),
		Status:    func(context.Context) any { return map[string]any{} },
		Token:     secret.New("the-runtime-s-own-token-0123456789abcdef"), // not the bridge's
		Port:      rsrv.Listener.Addr().(*net.TCPAddr).Port,
	})
	rsrv.Config.Handler = rt.Handler()
	rsrv.Start()
	t.Cleanup(rsrv.Close)
	ru, _ := url.Parse(rsrv.URL)

	var logs bytes.Buffer
	_, srv, _ := setupConfig(t, Config{RuntimeURL: ru, Logger: slog.New(slog.NewTextHandler(&logs, nil))})

	for _, c := range []struct{ method, path string }{{"GET", "/v1/status"}, {"POST", "/v1/decisions"}} {
		resp, body := callWithToken(t, c.method, srv.URL+c.path, strings.NewReader(`{}`), 0)
		if resp.StatusCode == http.StatusUnauthorized || strings.Contains(string(body), "invalid_token") || resp.Header.Get("WWW-Authenticate") != "" {
			t.Errorf("%s %s with a valid client token: %d %s (WWW-Authenticate %q): the caller is told its token is wrong",
				c.method, c.path, resp.StatusCode, body, resp.Header.Get("WWW-Authenticate"))
		}
		if resp.StatusCode != http.StatusBadGateway || !strings.Contains(string(body), "runtime_unavailable") {
			t.Errorf("%s %s: %d %s, want 502 runtime_unavailable", c.method, c.path, resp.StatusCode, body)
		}
	}
	if !strings.Contains(logs.String(), "runtime token") {
		t.Errorf("no log line says the runtime refused the runtime token:\n%s", logs.String())
	}
}

package decisions

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/internal/secret"
)

// README, Security: "Every answer carries nosniff, a default-src 'none' CSP
// and Cache-Control: no-store." A streamed answer behind the real guard
// (as an in-process bridge or a standalone runtime serves it) must keep
// no-store: it carries the caller's private completion.
func TestStreamedAnswerKeepsCacheControlNoStore(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	u.script(keyA, KindChat.Path, upReply{status: 200, events: chatEvents})
	openAI := h.router.OpenAI()
	srv := httptest.NewUnstartedServer(nil)
	g := &httpx.Guard{Port: srv.Listener.Addr().(*net.TCPAddr).Port,
		Authenticate: func(*http.Request, secret.Value) (string, bool, error) { return "test-client", true, nil }}
	srv.Config.Handler = httpx.RequestIDs(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, _ := httpx.WithAccessInfo(r.Context())
		g.Wrap(openAI).ServeHTTP(w, r.WithContext(ctx))
	}), nil)
	srv.Start()
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+KindChat.Path, strings.NewReader(`{"model":"api/gpt-test","stream":true,"messages":[]}`))
	req.Header.Set("Authorization", "Bearer x")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, Content-Type %q: not a stream", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if got := resp.Header.Values("Cache-Control"); len(got) != 1 || got[0] != "no-store" {
		t.Errorf("streamed answer Cache-Control = %q, want [no-store] (README: every answer carries Cache-Control: no-store)", got)
	}
}

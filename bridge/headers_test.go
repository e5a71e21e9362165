package bridge

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/rotorhq/rotor/internal/httpx"
)

// The bridge has checked the browser headers: the runtime behind it sees
// a plain local call, so a standalone runtime's own origin check (its
// allowed_origins may differ) never refuses a caller the bridge allowed.
// The caller's X-Rotor-Region travels; no other X-Rotor-* does.
func TestBrowserHeadersStopAtTheBridge(t *testing.T) {
	const origin = "http://localhost:3000"
	var got http.Header
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	_, srv, _ := setupConfig(t, Config{RuntimeURL: u, AllowedOrigins: []string{origin}})
	req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+tok)
	for k, v := range map[string]string{
		"Origin": origin, "Referer": origin + "/app", "Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "cors",
		"X-Rotor-Region": "eu", httpx.AccessHeader: "pool=zdr", "Cookie": "s=1", "Proxy-Authorization": "Basic abc",
	} {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || got == nil {
		t.Fatalf("%d, runtime reached: %v; want an allowed browser call forwarded", resp.StatusCode, got != nil)
	}
	for _, k := range []string{"Origin", "Referer", "Sec-Fetch-Site", "Sec-Fetch-Mode", "Cookie", "Proxy-Authorization", httpx.AccessHeader} {
		if v := got.Get(k); v != "" {
			t.Errorf("the standalone runtime got %s: %q", k, v)
		}
	}
	if got.Get("X-Rotor-Region") != "eu" {
		t.Errorf("runtime got X-Rotor-Region %q, want eu", got.Get("X-Rotor-Region"))
	}
}

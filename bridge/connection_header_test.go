package bridge

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/rotorhq/rotor/internal/httpx"
)

// A caller that names X-Rotor-Client (or X-Request-ID) in its Connection
// header must not make the bridge drop the label it sets for a standalone
// runtime: the row would then be recorded under "runtime", not the token's
// label.
// TestCallerConnectionHeaderCannotStripTheLabelOrRequestID: behind
// --runtime-url, a caller naming rotor's own headers in Connection (which
// the reverse proxy treats as hop-by-hop) cannot make its rows the
// runtime's or break the request id the two access logs share.
func TestCallerConnectionHeaderCannotStripTheLabelOrRequestID(t *testing.T) {
	var got http.Header
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = r.Header.Clone() }))
	t.Cleanup(up.Close)
	u, _ := url.Parse(up.URL)
	_, srv, _ := setup(t, nil, u)
	req, _ := http.NewRequest("POST", srv.URL+"/v1/decisions", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Connection", "X-Rotor-Client, X-Request-ID")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got.Get(httpx.ClientHeader) != "ci" {
		t.Errorf("standalone runtime saw client %q, want ci (the caller's Connection header removed the bridge's label)", got.Get(httpx.ClientHeader))
	}
	if got.Get("X-Request-ID") == "" {
		t.Errorf("standalone runtime saw no X-Request-ID: bridge and runtime log lines no longer share the id")
	}
}

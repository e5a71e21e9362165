package decisions

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/rotorhq/rotor/internal/httpx"
)

// Every path under /v1/responses/ is the stored responses' (the bridge
// forwards them all): 404 not_found in JSON, never the mux's redirect to
// the cleaned path (text/html).
func TestStoredResponsesUncleanPathsAre404JSON(t *testing.T) {
	h, _ := newOpenAIHarness(t, opts{})
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, p := range []string{"/v1/responses//", "/v1/responses//resp_1", "/v1/responses/./resp_1", "/v1/responses/resp_1/"} {
		req, _ := http.NewRequest(http.MethodGet, h.srv.URL+p, nil)
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 404 || resp.Header.Get("Content-Type") != "application/json" || !strings.Contains(string(b), `"`+httpx.CodeNotFound+`"`) {
			t.Errorf("GET %s: %d %q %s (Location %q), want 404 not_found in JSON", p, resp.StatusCode, resp.Header.Get("Content-Type"), b, resp.Header.Get("Location"))
		}
	}
	h.wantUntouched()
}

package decisions

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	fp "github.com/rotorhq/rotor/internal/fakeprovider"
)

// A reload may raise runtime.deadline past the write timeout the server
// started with: a Decisions answer that takes longer than that timeout
// still reaches the caller whole.
func TestRaisedDeadlineOutlastsTheServerWriteTimeout(t *testing.T) {
	h := newHarness(t, opts{deadline: 10 * time.Second, writeTimeout: time.Second})
	h.fp.Script(h.keys["team-a"], "", fp.Delay(1500*time.Millisecond, fp.OK()))
	srv := httptest.NewUnstartedServer(h.srv.Config.Handler)
	srv.Config.WriteTimeout = time.Second
	srv.Start()
	defer srv.Close()
	resp, err := http.Post(srv.URL+Endpoint, "application/json", strings.NewReader(decision("api/decide-mini")))
	if err != nil {
		t.Fatalf("answer cut by the server's write timeout: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || !strings.Contains(string(body), `"usage"`) {
		t.Errorf("answer %d %q (%v), want the whole 200", resp.StatusCode, body, err)
	}
}

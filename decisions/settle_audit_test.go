package decisions

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/internal/httpx"
)

// README, "Streams": a request cut at shutdown after the grace is answered
// 503 server_shutdown, with x-should-retry: false once a provider call may
// have run, and its row says server_shutdown. The caller is still there:
// it is not a caller that went away (499 client_closed_request, which it
// would never see as an error it can act on).
func TestRequestCutAtShutdownIs503ServerShutdown(t *testing.T) {
	h := newHarness(t, opts{})
	h.fp.Script(h.keys["team-a"], "", fp.Stall())
	addr, stop, served := h.serveDraining()
	defer stop()
	h.fp.OnRequest(func(rec fp.Received) {
		if rec.Path == fp.PathDecisions {
			stop() // SIGTERM while the provider works: the request outlives the grace
		}
	})
	resp, err := http.Post("http://"+addr+"/v1/decisions", "application/json", strings.NewReader(decision("api/decide-mini")))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), `"server_shutdown"`) || resp.Header.Get("x-should-retry") != "false" {
		t.Errorf("cut request: %d %s (x-should-retry %q), want 503 server_shutdown with x-should-retry: false",
			resp.StatusCode, body, resp.Header.Get("x-should-retry"))
	}
	if row := h.settled(resp.Header.Get("X-Request-ID")); row.Status != http.StatusServiceUnavailable || row.ErrorCode != httpx.CodeServerShutdown {
		t.Errorf("row %+v, want 503 %s", row, httpx.CodeServerShutdown)
	}
	<-served
}

// An error answer's row carries the code the caller got (README, the
// ledger's columns: status, error code): a request every credential
// refused with 401 is 503 pool_unavailable in the row too.
func TestErrorRowCarriesTheAnswersCode(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	refused := upReply{status: 401, body: `{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}`}
	u.script(keyA, KindChat.Path, refused)
	u.script(keyB, KindChat.Path, refused)
	r := h.do(context.Background(), KindChat.Path, `{"model":"api/gpt-test","messages":[]}`)
	wantStatus(t, r, http.StatusServiceUnavailable, "pool_unavailable")
	if row := h.row(r.header.Get("X-Request-ID")); row.Status != http.StatusServiceUnavailable || row.ErrorCode != "pool_unavailable" {
		t.Errorf("row %+v, want 503 pool_unavailable", row)
	}
}

package decisions

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/budgets"
	fp "github.com/rotorhq/rotor/internal/fakeprovider"
)

// Spec: while any --cost budget exists, Decisions requests are refused with
// 403 policy_blocked before discovery or inference; the reason names the
// cost budgets.
func TestCostBudgetRefusesBeforeDiscovery(t *testing.T) {
	h := newHarness(t, opts{})
	if err := h.store.PutBudget(context.Background(), budgets.Budget{Name: "spend", Kind: budgets.KindCost, Limit: 1_000_000, Window: budgets.Window{Calendar: "month"}}.Record(), false); err != nil {
		t.Fatal(err)
	}
	r := h.post(decision("api/decide-mini"))
	wantStatus(t, r, 403, "policy_blocked")
	if !strings.Contains(r.err.Message, "spend") {
		t.Errorf("message %q does not name the budget", r.err.Message)
	}
	h.wantUntouched()
}

func TestRequestsBudgetUsedUpGives429WithRetryAfter(t *testing.T) {
	h := newHarness(t, opts{})
	if err := h.store.PutBudget(context.Background(), budgets.Budget{Name: "r", Kind: budgets.KindRequests, Limit: 2, Window: budgets.Window{Rolling: time.Hour}}.Record(), false); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, h.post(decision("api/decide-mini")), 200, "")
	h.clk.Advance(10 * time.Minute)
	wantStatus(t, h.post(decision("api/decide-mini")), 200, "")
	r := h.post(decision("api/decide-mini"))
	wantStatus(t, r, 429, "budget_exceeded")
	if r.header.Get("Retry-After") != "3000" {
		t.Errorf("Retry-After = %q, want 3000 (the oldest row leaves in 50 min)", r.header.Get("Retry-After"))
	}
	if n := h.fp.Hits(fp.PathDecisions); n != 2 {
		t.Errorf("%d decisions, want 2", n)
	}
}

// A request that ends without an inference call releases its reservation.
func TestRequestWithoutInferenceReleasesReservation(t *testing.T) {
	h := newHarness(t, opts{})
	wantStatus(t, h.post(decision("api/not-listed")), 404, "model_not_available")
	if n := len(h.rows()); n != 0 {
		t.Errorf("%d rows left, want 0", n)
	}
}

func TestOverloadedBeyondBufferBound(t *testing.T) {
	h := newHarness(t, opts{maxBuffered: 4096})
	big := `{"model":"api/decide-mini","input":"` + strings.Repeat("x", 8192) + `"}`
	r := h.post(big)
	wantStatus(t, r, 503, "server_overloaded")
	// A moment's wait, advised: the bytes held are freed as requests end.
	if got := r.header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1", got)
	}
	wantStatus(t, h.post(decision("api/decide-mini")), 200, "")
}

// A body sent without a Content-Length takes its bytes from the bound as
// it grows: one larger than the bound is refused 503 server_overloaded as
// an announced one is.
func TestOverloadedByAnUnannouncedBody(t *testing.T) {
	h := newHarness(t, opts{maxBuffered: 64 << 10})
	big := `{"model":"api/decide-mini","input":"` + strings.Repeat("x", 128<<10) + `"}`
	req := httptest.NewRequest(http.MethodPost, Endpoint, strings.NewReader(big))
	req.ContentLength = -1
	rec := httptest.NewRecorder()
	h.router.ServeHTTP(rec, req)
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), `"server_overloaded"`) {
		t.Errorf("answer %d %s, want 503 server_overloaded", rec.Code, rec.Body)
	}
	h.wantUntouched()
}

// The buffer bound is on bytes held at once: a request gives its bytes
// back when it ends, so requests one after another, each well under the
// bound but many times it in all, are all served.
func TestBufferBoundCountsOnlyBytesHeldNow(t *testing.T) {
	h := newHarness(t, opts{maxBuffered: 64 << 10})
	body := `{"model":"api/decide-mini","input":"` + strings.Repeat("x", 8<<10) + `","question":{"type":"predicate"}}`
	for i := range 20 {
		if r := h.post(body); r.status != 200 {
			t.Fatalf("request %d: %d %s", i+1, r.status, r.body)
		}
	}
}

// Redirects are never followed: the key must not travel to another host.
func TestProviderRedirectIsNotFollowed(t *testing.T) {
	other := newHarness(t, opts{})
	h := newHarness(t, opts{})
	h.fp.Script(h.keys["team-a"], "", fp.Redirect(other.fp.URL()+"/v1/decisions", 307))
	r := h.post(decision("api/decide-mini"))
	if r.status != 502 {
		t.Errorf("status %d, want 502", r.status)
	}
	if n := len(other.fp.Requests()); n != 0 {
		t.Errorf("redirect target received %d requests", n)
	}
	if n := h.hits("team-b", fp.PathDecisions); n != 0 {
		t.Error("replayed after a redirect")
	}
}

// A credential whose provider cannot be reached (connection refused)
// received nothing, so another credential may serve.
func TestUnreachableCredentialFailsOverWithoutReplayRisk(t *testing.T) {
	creds := defaultCreds()
	creds[0].baseURL = "http://127.0.0.1:1"
	h := newHarness(t, opts{creds: creds})
	h.fp.SetCatalog(creds[0].key, "decide-mini") // unused: its base URL is dead
	r := h.post(decision("api/decide-mini"))
	wantStatus(t, r, 200, "")
	if r.header.Get("X-Rotor-Credential") != "team-b" {
		t.Errorf("served by %s", r.header.Get("X-Rotor-Credential"))
	}
}

func TestMethodOtherThanPost(t *testing.T) {
	h := newHarness(t, opts{})
	resp, err := http.Get(h.srv.URL + "/v1/decisions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "POST" {
		t.Errorf("GET = %d Allow %q, want 405 Allow POST", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

// No provider key appears in any answer, row or log line, whatever the
// provider does.
func TestCanaryKeyNeverLeaks(t *testing.T) {
	creds := defaultCreds()
	creds[0].key = "sk-canary-a-7f3e9b2c4d5a6e8f1029"
	creds[1].key = "sk-canary-b-8e4f0c3d5e6b7f9a2130"
	h := newHarness(t, opts{creds: creds, errorIdle: 100 * time.Millisecond, deadline: 2 * time.Second})
	steps := []fp.Step{fp.EchoSecrets(), fp.EchoSecretsAs(401), fp.EchoSecretsAs(429), fp.Unauthorized(), fp.Forbidden(),
		fp.NotFoundModel(), fp.MethodNotAllowed(), fp.RateLimited("1"), fp.InsufficientQuota(), fp.ServerError(), fp.ResetAfterRead(),
		fp.StallErrorBody(403, "", time.Second), fp.Redirect("http://127.0.0.2:1/", 302)}
	var answers bytes.Buffer
	for _, s := range steps {
		h.fp.Script(creds[0].key, "", s)
		h.fp.Script(creds[1].key, "", fp.EchoSecretsAs(403))
		r := h.post(decision("api/decide-mini"))
		answers.Write(r.body)
		for k, v := range r.header {
			answers.WriteString(k + ": " + strings.Join(v, ",") + "\n")
		}
		h.clk.Advance(time.Hour)
	}
	for _, row := range h.rows() {
		b, _ := json.Marshal(row)
		answers.Write(b)
	}
	all := answers.String() + h.log.String()
	for _, key := range []string{creds[0].key, creds[1].key, "sk-canary"} {
		if strings.Contains(all, key) {
			t.Errorf("%q leaked", key)
		}
	}
}

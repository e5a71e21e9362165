package decisions

import (
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/internal/secret"
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

// reload returns the route a config reload makes of h's, with the same
// pools: keep names the credentials that stay as they were.
func (h *harness) reload(keep func(string) bool) *Route {
	cfg := h.router.cfg
	cfg.Previous, cfg.Keep = h.router, keep
	return New(cfg)
}

// serveOn serves one request of route k straight to rt.
func serveOn(rt *Route, k *Kind, body string) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	rt.Handler(k).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, k.Path, strings.NewReader(body)))
	return rec
}

// What a reload keeps of an unchanged credential: its discovered catalog
// (no new fetch) and the unsupported-endpoint answers of its provider (no
// new call to learn it again). A credential the reload changed has its
// catalog fetched anew.
func TestReloadKeepsWhatItsCredentialsLearned(t *testing.T) {
	h := newHarness(t, opts{})
	h.fp.Script(h.keys["team-a"], "", fp.MethodNotAllowed())
	wantStatus(t, h.post(decision("api/decide-mini")), 200, "") // team-a: 405, cached; team-b serves
	fetches := h.fp.Hits(fp.PathModels)

	next := h.reload(func(string) bool { return true })
	if rec := serveOn(next, KindDecisions, decision("api/decide-mini")); rec.Code != 200 || rec.Header().Get("X-Rotor-Credential") != "team-b" {
		t.Fatalf("after the reload: %d by %q, want 200 by team-b", rec.Code, rec.Header().Get("X-Rotor-Credential"))
	}
	if n := h.hits("team-a", fp.PathDecisions); n != 1 {
		t.Errorf("team-a got %d decisions, want 1: its 405 is still known after the reload", n)
	}
	if n := h.fp.Hits(fp.PathModels); n != fetches {
		t.Errorf("%d catalog fetches after the reload, want none", n-fetches)
	}

	changed := h.reload(func(name string) bool { return name != "team-b" })
	if rec := serveOn(changed, KindDecisions, decision("api/decide-mini")); rec.Code != 200 {
		t.Fatalf("after the second reload: %d %s", rec.Code, rec.Body)
	}
	if n := h.fp.HitsFor(h.keys["team-b"], fp.PathModels); n != 2 {
		t.Errorf("team-b's catalog fetched %d times, want 2: the reload changed it", n)
	}
	if n := h.fp.HitsFor(h.keys["team-a"], fp.PathModels); n != 1 {
		t.Errorf("team-a's catalog fetched %d times, want 1", n)
	}
}

// A Responses id answered before a reload stays with its credential after
// it.
func TestReloadKeepsResponsesWithTheirCredential(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	n := pinResp1ToTeamB(t, h, u)
	next := h.reload(func(string) bool { return true })
	rec := serveOn(next, KindResponses, `{"model":"api/gpt-test","input":"b","previous_response_id":"resp_1"}`)
	if rec.Code != 429 {
		t.Errorf("answer %d, want 429 (team-b rests)", rec.Code)
	}
	for _, s := range u.requests()[n:] {
		if s.key != keyB {
			t.Errorf("previous_response_id of team-b sent with another credential after a reload")
		}
	}
}

// An OpenAI route's answer may take the whole generation deadline; the
// answer it then gets (504 deadline_exceeded, written after the deadline)
// still reaches the caller: its write deadline leaves a margin past it.
func TestGenerationDeadlineAnswerIsWrittenAfterTheDeadline(t *testing.T) {
	h := newHarness(t, opts{openAI: true, generation: 300 * time.Millisecond})
	h.fp.Script(h.keys["team-a"], "", fp.Stall())
	resp, err := http.Post(h.srv.URL+KindChat.Path, "application/json", strings.NewReader(`{"model":"api/decide-mini","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatalf("answer cut: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 504 || !strings.Contains(string(body), `"deadline_exceeded"`) {
		t.Errorf("answer %d %q (%v), want the whole 504 deadline_exceeded", resp.StatusCode, body, err)
	}
}

// An unsupported-endpoint answer belongs to the credential's provider
// account: a reload that gives team-a another key forgets it, and the new
// key is asked (once team-b, whose catalog is warm, is rejected).
func TestReloadWithANewKeyForgetsTheOldKeysUnsupportedAnswers(t *testing.T) {
	h := newHarness(t, opts{})
	h.fp.Script(h.keys["team-a"], "", fp.MethodNotAllowed())
	wantStatus(t, h.post(decision("api/decide-mini")), 200, "") // team-a: 405, cached
	const newKey = "sk-test-a-0000000000000000000009"
	h.fp.SetCatalog(newKey, "decide-mini", "decide-large")
	h.fp.Script(h.keys["team-b"], "", fp.Unauthorized()) // team-b's warm catalog does not serve next
	cfg := h.router.cfg
	cfg.Previous, cfg.Keep = h.router, func(name string) bool { return name != "team-a" }
	cfg.Pools = slices.Clone(cfg.Pools)
	cfg.Pools[0].Credentials = slices.Clone(cfg.Pools[0].Credentials)
	cfg.Pools[0].Credentials[0].Key = secret.New(newKey)
	rec := serveOn(New(cfg), KindDecisions, decision("api/decide-mini"))
	if rec.Code != 200 || rec.Header().Get("X-Rotor-Credential") != "team-a" {
		t.Errorf("after the new key: %d by %q, want 200 by team-a", rec.Code, rec.Header().Get("X-Rotor-Credential"))
	}
}

package decisions

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/internal/jsonobj"
	"github.com/rotorhq/rotor/ledger"
	"github.com/rotorhq/rotor/pool"
)

// upstream is an OpenAI-style provider on loopback for the OpenAI routes:
// a catalog per key and scripted answers per key and path; it records
// what it was sent.
type upstream struct {
	t   *testing.T
	srv *httptest.Server

	mu       sync.Mutex
	catalogs map[string][]string
	catFail  bool
	steps    map[string][]upReply // key+path
	sent     []upRequest
	// conns counts the connections rotor opened to it.
	conns atomic.Int64
}

type upReply struct {
	status int
	header map[string]string
	body   string
	// events, when set, are written one by one as text/event-stream,
	// flushed; after stallAfter of them (when > 0) the answer waits for
	// the request to be cancelled and closes gone.
	events     []string
	stallAfter int
	gone       chan struct{}
	// every spaces the events in wall time.
	every time.Duration
	// release, when set, holds the end of a complete event stream (the
	// chunked encoding's last chunk) until it is closed or the request is
	// cancelled; tail is written once it is closed.
	release chan struct{}
	tail    string
}

type upRequest struct {
	key, path string
	header    http.Header
	body      string
}

func newUpstream(t *testing.T) *upstream {
	u := &upstream{t: t, catalogs: map[string][]string{}, steps: map[string][]upReply{}}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(u.serve))
	u.srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			u.conns.Add(1)
		}
	}
	u.srv.Start()
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) serve(w http.ResponseWriter, r *http.Request) {
	key := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	body, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	if r.URL.Path == "/v1/models" {
		models, ok := u.catalogs[key]
		fail := u.catFail
		u.mu.Unlock()
		if fail || !ok {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		var list struct {
			Data []map[string]string `json:"data"`
		}
		for _, m := range models {
			list.Data = append(list.Data, map[string]string{"id": m})
		}
		_ = json.NewEncoder(w).Encode(list)
		return
	}
	u.sent = append(u.sent, upRequest{key: key, path: r.URL.Path, header: r.Header.Clone(), body: string(body)})
	q := u.steps[key+r.URL.Path]
	var rep upReply
	if len(q) > 0 {
		rep = q[0]
		if len(q) > 1 {
			u.steps[key+r.URL.Path] = q[1:]
		}
	}
	u.mu.Unlock()
	if rep.status == 0 {
		u.t.Errorf("upstream: no answer scripted for %s %s", key, r.URL.Path)
		rep.status = http.StatusTeapot
	}
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	if rep.events != nil {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(rep.status)
		rc := http.NewResponseController(w)
		for i, ev := range rep.events {
			if rep.stallAfter > 0 && i == rep.stallAfter {
				break
			}
			if i > 0 {
				time.Sleep(rep.every)
			}
			_, _ = io.WriteString(w, ev)
			_ = rc.Flush()
		}
		if rep.stallAfter > 0 {
			<-r.Context().Done()
			close(rep.gone)
		}
		if rep.release != nil {
			select {
			case <-rep.release:
				_, _ = io.WriteString(w, rep.tail)
			case <-r.Context().Done():
				if rep.gone != nil {
					close(rep.gone)
				}
			}
		}
		return
	}
	w.WriteHeader(rep.status)
	_, _ = io.WriteString(w, rep.body)
}

// script sets the answers of key on path; the last one repeats.
func (u *upstream) script(key, path string, replies ...upReply) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.steps[key+path] = replies
}

func (u *upstream) requests() []upRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]upRequest(nil), u.sent...)
}

const (
	keyA = "sk-test-a-0000000000000000000001"
	keyB = "sk-test-b-0000000000000000000002"
)

// newOpenAIHarness is the harness with two api credentials at u, serving
// model gpt-test with no profiles (the OpenAI routes' rule).
func newOpenAIHarness(t *testing.T, o opts) (*harness, *upstream) {
	u := newUpstream(t)
	u.catalogs[keyA] = []string{"gpt-test", "decide-only"}
	u.catalogs[keyB] = []string{"gpt-test", "decide-only"}
	o.openAI = true
	if o.profiles == nil {
		o.profiles = map[string][]string{"decide-only": {Endpoint}}
	}
	o.creds = []cred{
		{name: "team-a", pool: "api", key: keyA, baseURL: u.srv.URL},
		{name: "team-b", pool: "api", key: keyB, baseURL: u.srv.URL},
	}
	return newHarness(t, o), u
}

const (
	chatAnswer = `{"id":"chatcmpl-1","object":"chat.completion","model":"gpt-test","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18,"prompt_tokens_details":{"cached_tokens":3},"completion_tokens_details":{"reasoning_tokens":2}}}`
	responsesAnswer = `{"id":"resp_1","object":"response","status":"completed","model":"gpt-test","output":[],` +
		`"usage":{"input_tokens":21,"output_tokens":9,"total_tokens":30,"input_tokens_details":{"cached_tokens":5},"output_tokens_details":{"reasoning_tokens":4}}}`
	embeddingsAnswer = `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"gpt-test","usage":{"prompt_tokens":6,"total_tokens":6}}`
)

func TestOpenAIRoutesForwardByteForByte(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	cases := []struct {
		path, op, answer, request string
		in, out, total            int64
		cached, reasoning         ledger.Count
	}{
		{KindChat.Path, "chat.completions", chatAnswer, `{"model":"api/gpt-test","messages":[{"role":"user","content":"hi"}]}`, 11, 7, 18, ledger.Known(3), ledger.Known(2)},
		{KindResponses.Path, "responses", responsesAnswer, `{"model":"api/gpt-test","input":"hi"}`, 21, 9, 30, ledger.Known(5), ledger.Known(4)},
		{KindEmbeddings.Path, "embeddings", embeddingsAnswer, `{"input":"hi", "model":"api/gpt-test"}`, 6, 0, 6, ledger.Count{}, ledger.Count{}},
	}
	for _, c := range cases {
		u.script(keyA, c.path, upReply{status: 200, body: c.answer,
			header: map[string]string{"Content-Type": "application/json; charset=utf-8", "x-ratelimit-remaining-requests": "41"}})
		r := h.do(context.Background(), c.path, c.request, "OpenAI-Beta", "assistants=v2", "OpenAI-Organization", "org-caller", "OpenAI-Project", "proj-caller", "Authorization", "Bearer caller-token")
		wantStatus(t, r, 200, "")
		if ct := r.header.Get("Content-Type"); ct != "application/json; charset=utf-8" {
			t.Errorf("%s: Content-Type %q, want the provider's", c.path, ct)
		}
		if string(r.body) != c.answer {
			t.Errorf("%s: answer\n%s\nwant byte for byte\n%s", c.path, r.body, c.answer)
		}
		if v := r.header.Get("x-ratelimit-remaining-requests"); v != "" {
			t.Errorf("%s: upstream x-ratelimit header returned: %q", c.path, v)
		}
		sent := u.requests()
		got := sent[len(sent)-1]
		if want := strings.Replace(c.request, "api/gpt-test", "gpt-test", 1); got.body != want {
			t.Errorf("%s: upstream got %s, want %s", c.path, got.body, want)
		}
		if got.key != keyA || got.header.Get("OpenAI-Beta") != "assistants=v2" || got.header.Get("OpenAI-Organization") != "" ||
			got.header.Get("OpenAI-Project") != "" || got.header.Get("Content-Type") != "application/json" {
			t.Errorf("%s: upstream headers %v", c.path, got.header)
		}
		row := h.row(r.header.Get("X-Request-ID"))
		if row.Operation != c.op || row.Status != 200 || row.InputTokens != ledger.Known(c.in) || row.OutputTokens != ledger.Known(c.out) || row.TotalTokens != ledger.Known(c.total) {
			t.Errorf("%s: row %+v", c.path, row)
		}
		if row.CachedInputTokens != c.cached || row.ReasoningTokens != c.reasoning {
			t.Errorf("%s: cached %+v reasoning %+v, want %+v %+v", c.path, row.CachedInputTokens, row.ReasoningTokens, c.cached, c.reasoning)
		}
		if c.out != 0 && row.OutputTokens != ledger.Known(c.out) {
			t.Errorf("%s: output tokens %+v, want %d", c.path, row.OutputTokens, c.out)
		}
	}
}

func TestOpenAIUsageDetailsRead(t *testing.T) {
	for _, c := range []struct {
		name              string
		read              func([]byte) jsonobj.Usage
		body              string
		cached, reasoning int64
	}{
		{"chat", jsonobj.ReadChatUsage, chatAnswer, 3, 2},
		{"responses", jsonobj.ReadResponsesUsage, responsesAnswer, 5, 4},
	} {
		u := c.read([]byte(c.body))
		if u.Cached == nil || *u.Cached != c.cached || u.Reasoning == nil || *u.Reasoning != c.reasoning {
			t.Errorf("%s: cached %v reasoning %v, want %d %d", c.name, u.Cached, u.Reasoning, c.cached, c.reasoning)
		}
	}
	// An embedding generates nothing: output is a known 0, so the row's
	// cost is known when the model is priced.
	if u := jsonobj.ReadEmbeddingsUsage([]byte(embeddingsAnswer)); u.Input == nil || *u.Input != 6 || u.Output == nil || *u.Output != 0 || u.Cached != nil {
		t.Errorf("embeddings usage %+v, want input 6, output 0", u)
	}
	if u := jsonobj.ReadEmbeddingsUsage([]byte(`{"object":"list","data":[]}`)); u.Input != nil || u.Output != nil {
		t.Errorf("embeddings without usage read as %+v, want unknown", u)
	}
}

// Some OpenAI-compatible servers answer embeddings with prompt_tokens
// only: input is known and output a known 0, so the row's total is known
// too (a tokens budget counts it), as chat and Responses rows derive it.
func TestOpenAIEmbeddingsTotalFromInputAlone(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	u.script(keyA, KindEmbeddings.Path, upReply{status: 200, header: map[string]string{"Content-Type": "application/json"},
		body: `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1]}],"model":"gpt-test","usage":{"prompt_tokens":6}}`})
	r := h.do(context.Background(), KindEmbeddings.Path, `{"model":"api/gpt-test","input":"hi"}`)
	wantStatus(t, r, 200, "")
	row := h.row(r.header.Get("X-Request-ID"))
	if row.InputTokens != ledger.Known(6) || row.OutputTokens != ledger.Known(0) || row.TotalTokens != ledger.Known(6) {
		t.Errorf("row input %+v output %+v total %+v, want 6, 0, 6", row.InputTokens, row.OutputTokens, row.TotalTokens)
	}
}

func TestOpenAIRoutesFailOverOnTheSameClasses(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	u.script(keyA, KindChat.Path, upReply{status: 401, body: `{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}`})
	u.script(keyB, KindChat.Path, upReply{status: 200, body: chatAnswer})
	r := h.do(context.Background(), KindChat.Path, `{"model":"api/gpt-test","messages":[]}`)
	wantStatus(t, r, 200, "")
	if row := h.row(r.header.Get("X-Request-ID")); row.Credential != "team-b" || row.Attempts != 2 {
		t.Errorf("row %+v, want team-b after 2 attempts", row)
	}
	// Both rejected (team-a now rests, so a fresh pool): the OpenAI
	// routes' name for the pool being gone.
	h, u = newOpenAIHarness(t, opts{})
	u.script(keyA, KindChat.Path, upReply{status: 403, body: `{"error":{"message":"no","type":"permission_error","code":null}}`})
	u.script(keyB, KindChat.Path, upReply{status: 403, body: `{"error":{"message":"no","type":"permission_error","code":null}}`})
	r = h.do(context.Background(), KindChat.Path, `{"model":"api/gpt-test","messages":[]}`)
	wantStatus(t, r, 503, httpx.CodeRoutePoolUnavailable)
	if r.header.Get("x-should-retry") != "false" {
		t.Errorf("pool_unavailable without x-should-retry: false")
	}
	wantStatus(t, h.post(decision("api/gpt-test")), 404, httpx.CodeModelNotAvailable)
}

func TestOpenAIRefusedRequestRecordsZeroUsage(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	u.script(keyA, KindChat.Path, upReply{status: 400, body: `{"error":{"message":"bad messages","type":"invalid_request_error","param":"messages","code":"invalid_value"}}`})
	r := h.do(context.Background(), KindChat.Path, `{"model":"api/gpt-test","messages":5}`)
	wantStatus(t, r, 400, "invalid_value")
	row := h.row(r.header.Get("X-Request-ID"))
	if row.InputTokens != ledger.Known(0) || row.OutputTokens != ledger.Known(0) || row.Status != 400 {
		t.Errorf("refused row %+v, want 0 tokens", row)
	}
}

// A request that every credential refused, each with a classified
// rejection the route fails over on, ran nowhere: the provider bills none
// of those calls, so its row records 0 tokens and 0 cost, as a refusal
// passed through does. Recorded as unknown, the row would make every cost
// budget fail closed (403 policy_blocked) until it left the window.
func TestOpenAIRefusedByEveryCredentialRecordsZeroUsage(t *testing.T) {
	rateLimited := upReply{status: 429, header: map[string]string{"Retry-After": "600"},
		body: `{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`}
	unauthorized := upReply{status: 401, body: `{"error":{"message":"bad key","type":"invalid_request_error","code":"invalid_api_key"}}`}
	for _, c := range []struct {
		name   string
		reply  upReply
		status int
		code   string
	}{
		{"every key rate limited past the deadline", rateLimited, 429, httpx.CodeRateLimitExceeded},
		{"every key unauthorized", unauthorized, 503, httpx.CodeRoutePoolUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, u := newOpenAIHarness(t, opts{})
			ctx := context.Background()
			if _, err := h.store.PutPrices(ctx, []ledger.Price{{Model: "gpt-test", InputMicros: 1_000_000, OutputMicros: 2_000_000, Source: ledger.SourceSet}}, true); err != nil {
				t.Fatal(err)
			}
			if err := h.store.PutBudget(ctx, budgets.Budget{Name: "spend", Kind: budgets.KindCost, Limit: 1_000_000, Window: budgets.Window{Calendar: "month"}}.Record(), false); err != nil {
				t.Fatal(err)
			}
			u.script(keyA, KindChat.Path, c.reply, upReply{status: 200, body: chatAnswer})
			u.script(keyB, KindChat.Path, c.reply, upReply{status: 200, body: chatAnswer})
			r := h.do(ctx, KindChat.Path, `{"model":"api/gpt-test","messages":[]}`)
			wantStatus(t, r, c.status, c.code)
			row := h.row(r.header.Get("X-Request-ID"))
			if row.Attempts != 2 || row.Status != c.status {
				t.Errorf("row %+v, want 2 attempts and status %d", row, c.status)
			}
			if row.InputTokens != ledger.Known(0) || row.OutputTokens != ledger.Known(0) || row.TotalTokens != ledger.Known(0) || row.CostMicros != ledger.Known(0) {
				t.Errorf("row tokens %+v/%+v/%+v cost %+v, want a known 0 each", row.InputTokens, row.OutputTokens, row.TotalTokens, row.CostMicros)
			}
			// Once the credentials rest no more, the cost budget admits
			// the next request: nothing of unknown cost is in its window.
			h.clk.Advance(time.Hour)
			wantStatus(t, h.do(ctx, KindChat.Path, `{"model":"api/gpt-test","messages":[]}`), 200, "")
		})
	}
}

func TestOpenAIRoutesMethodNotAllowed(t *testing.T) {
	h, _ := newOpenAIHarness(t, opts{})
	for _, c := range []struct {
		method, path string
		status       int
		allow, code  string
	}{
		{http.MethodGet, "/v1/chat/completions", 405, "POST", httpx.CodeMethodNotAllowed},
		{http.MethodPut, "/v1/responses", 405, "POST", httpx.CodeMethodNotAllowed},
		{http.MethodGet, "/v1/embeddings", 405, "POST", httpx.CodeMethodNotAllowed},
		{http.MethodPost, "/v1/models", 405, "GET", httpx.CodeMethodNotAllowed},
		{http.MethodGet, "/v1/responses/resp_1", 404, "", httpx.CodeNotFound},
		{http.MethodDelete, "/v1/responses/resp_1", 404, "", httpx.CodeNotFound},
		{http.MethodPost, "/v1/responses/resp_1", 405, "GET, DELETE", httpx.CodeMethodNotAllowed},
	} {
		req, _ := http.NewRequest(c.method, h.srv.URL+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status || resp.Header.Get("Allow") != c.allow || !strings.Contains(string(b), `"`+c.code+`"`) {
			t.Errorf("%s %s: %d Allow=%q %s, want %d Allow=%q %s", c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), b, c.status, c.allow, c.code)
		}
	}
	h.wantUntouched()
}

func TestDefaultPoolServesBareModelsOnOpenAIRoutesOnly(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{defaultPool: "api"})
	u.script(keyA, KindChat.Path, upReply{status: 200, body: chatAnswer})
	r := h.do(context.Background(), KindChat.Path, `{"model":"gpt-test","messages":[]}`)
	wantStatus(t, r, 200, "")
	if got := u.requests()[0].body; got != `{"model":"gpt-test","messages":[]}` {
		t.Errorf("upstream got %s", got)
	}
	// Never on Decisions.
	wantStatus(t, h.post(decision("gpt-test")), 400, httpx.CodeInvalidModelPrefix)

	h2, _ := newOpenAIHarness(t, opts{})
	wantStatus(t, h2.do(context.Background(), KindChat.Path, `{"model":"gpt-test","messages":[]}`), 400, httpx.CodeInvalidModelPrefix)
	h2.wantUntouched()
}

// With routes.default_pool, a model whose first segment is not a pool
// name is a bare name too, slash and all: "org/gpt-test" (the way many
// providers name models) goes to the default pool and upstream as
// "org/gpt-test", instead of being refused as a bad prefix; only api/ and
// zdr/ are read as a pool prefix, and then stripped.
func TestDefaultPoolTakesModelNamesWithASlash(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{defaultPool: "api"})
	u.catalogs[keyA] = append(u.catalogs[keyA], "org/gpt-test")
	u.catalogs[keyB] = append(u.catalogs[keyB], "org/gpt-test")
	u.script(keyA, KindChat.Path, upReply{status: 200, body: chatAnswer})
	wantStatus(t, h.do(context.Background(), KindChat.Path, `{"model":"org/gpt-test","messages":[]}`), 200, "")
	u.script(keyA, KindChat.Path, upReply{status: 200, body: chatAnswer})
	wantStatus(t, h.do(context.Background(), KindChat.Path, `{"model":"api/gpt-test","messages":[]}`), 200, "")
	reqs := u.requests()
	if len(reqs) != 2 || !strings.Contains(reqs[0].body, `"model":"org/gpt-test"`) || !strings.Contains(reqs[1].body, `"model":"gpt-test"`) {
		t.Errorf("upstream got %+v, want org/gpt-test then gpt-test", reqs)
	}
}

func TestSupportedEndpointsBindOpenAIRoutes(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{profiles: map[string][]string{"gpt-test": {"/v1/embeddings"}}})
	u.script(keyA, KindEmbeddings.Path, upReply{status: 200, body: embeddingsAnswer})
	wantStatus(t, h.do(context.Background(), KindEmbeddings.Path, `{"model":"api/gpt-test","input":"x"}`), 200, "")
	wantStatus(t, h.do(context.Background(), KindChat.Path, `{"model":"api/gpt-test","messages":[]}`), 404, httpx.CodeModelNotAvailable)
}

func getModels(t *testing.T, h *harness) (int, string) {
	t.Helper()
	resp, err := http.Get(h.srv.URL + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestModelsListsWhatACallerMayWrite(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{profiles: map[string][]string{"decide-only": {Endpoint}, "none": {}}})
	u.catalogs[keyB] = []string{"gpt-test", "gpt-b-only", "none"}
	wantModels(t, h, `{"object":"list","data":[{"id":"api/gpt-b-only","object":"model","owned_by":"rotor"},{"id":"api/gpt-test","object":"model","owned_by":"rotor"}]}`+"\n")
	if n := len(h.rows()); n != 0 {
		t.Errorf("/v1/models wrote %d rows", n)
	}

	h2, u2 := newOpenAIHarness(t, opts{})
	u2.catFail = true
	status, body := getModels(t, h2)
	if status != http.StatusBadGateway || !strings.Contains(body, httpx.CodeCatalogUnavailable) {
		t.Errorf("every discovery failed: %d %s, want 502 catalog_unavailable", status, body)
	}
}

// A credential's deny list bounds GET /v1/models as it bounds requests: a
// model the credential may not serve is not listed.
func TestModelsOmitsModelsACredentialMayNotServe(t *testing.T) {
	u := newUpstream(t)
	u.catalogs[keyA] = []string{"gpt-test", "gpt-secret"}
	h := newHarness(t, opts{openAI: true, profiles: map[string][]string{"decide-only": {Endpoint}},
		creds: []cred{{name: "team-a", pool: "api", key: keyA, baseURL: u.srv.URL, deny: []string{"gpt-secret"}}}})
	wantModels(t, h, `{"object":"list","data":[{"id":"api/gpt-test","object":"model","owned_by":"rotor"}]}`+"\n")
}

// One credential's failed discovery does not fail GET /v1/models: the
// models of the credentials that answered are listed (502 only when every
// discovery fails).
func TestModelsListsTheCatalogsThatAnswered(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	u.catalogs[keyA] = []string{"gpt-a-only"}
	delete(u.catalogs, keyB) // team-b's catalog answers 500
	wantModels(t, h, `{"object":"list","data":[{"id":"api/gpt-a-only","object":"model","owned_by":"rotor"}]}`+"\n")
}

// A catalog entry without an id is no model: GET /v1/models never lists a
// bare "api/".
func TestModelsSkipsCatalogEntriesWithoutID(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	u.catalogs[keyA] = []string{"gpt-test", ""}
	u.catalogs[keyB] = []string{"gpt-test"}
	wantModels(t, h, `{"object":"list","data":[{"id":"api/gpt-test","object":"model","owned_by":"rotor"}]}`+"\n")
}

func TestPreviousResponseIDStaysWithItsCredential(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	// team-a is gone for this request's model; team-b answers resp_1.
	u.script(keyA, KindResponses.Path, upReply{status: 401, body: `{"error":{"message":"no","code":"invalid_api_key"}}`},
		upReply{status: 200, body: responsesAnswer})
	u.script(keyB, KindResponses.Path, upReply{status: 200, body: responsesAnswer},
		upReply{status: 429, header: map[string]string{"Retry-After": "600"}, body: `{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`})
	wantStatus(t, h.do(context.Background(), KindResponses.Path, `{"model":"api/gpt-test","input":"a"}`), 200, "")
	n := len(u.requests())
	// team-b rests: the caller waits on it, never another account.
	r := h.do(context.Background(), KindResponses.Path, `{"model":"api/gpt-test","input":"b","previous_response_id":"resp_1"}`)
	wantStatus(t, r, 429, "")
	if r.header.Get("Retry-After") == "" {
		t.Errorf("429 without Retry-After")
	}
	for _, s := range u.requests()[n:] {
		if s.key != keyB {
			t.Errorf("previous_response_id of team-b sent with another credential")
		}
	}
}

// pinResp1ToTeamB has team-b answer resp_1 (a 403 rejects team-a for that
// request only) and rest 600 s at its next call, while team-a is free and
// answers; it returns the upstream calls made so far.
func pinResp1ToTeamB(t *testing.T, h *harness, u *upstream) int {
	t.Helper()
	u.script(keyA, KindResponses.Path, upReply{status: 403, body: `{"error":{"message":"no","code":"permission_denied"}}`},
		upReply{status: 200, body: responsesAnswer})
	u.script(keyB, KindResponses.Path, upReply{status: 200, body: responsesAnswer},
		upReply{status: 429, header: map[string]string{"Retry-After": "600"}, body: `{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`})
	wantStatus(t, h.do(context.Background(), KindResponses.Path, `{"model":"api/gpt-test","input":"a"}`), 200, "")
	n := len(u.requests())
	return n
}

// The credential that answered a previous_response_id rests while another
// is free: the caller gets the 429, and the free credential (another
// account, which never saw the response) gets no call. A 403 rejects
// team-a for the first request only, so it is free for the second.
func TestPreviousResponseIDNeverMovesToAFreeCredential(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	n := pinResp1ToTeamB(t, h, u)
	r := h.do(context.Background(), KindResponses.Path, `{"model":"api/gpt-test","input":"b","previous_response_id":"resp_1"}`)
	wantStatus(t, r, 429, "")
	sent := u.requests()[n:]
	if len(sent) != 1 || sent[0].key != keyB {
		t.Errorf("%d calls for the pinned request, want 1 with team-b", len(sent))
	}
	for _, s := range sent {
		if s.key != keyB {
			t.Errorf("previous_response_id of team-b sent with another credential")
		}
	}
}

// With first_key_fallback, the fallback is no way around a pin: a
// previous_response_id whose credential rests answers 429 with the rest
// left, and the resting credential gets no call.
func TestPreviousResponseIDOfARestingCredentialTakesNoFallback(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{firstKeyFallback: true})
	u.script(keyA, KindResponses.Path, upReply{status: 403, body: `{"error":{"message":"no","code":"permission_denied"}}`},
		upReply{status: 200, body: responsesAnswer})
	u.script(keyB, KindResponses.Path, upReply{status: 200, body: responsesAnswer})
	wantStatus(t, h.do(context.Background(), KindResponses.Path, `{"model":"api/gpt-test","input":"a"}`), 200, "")
	// team-b rests ten minutes (a rate limit another request met).
	h.pools["api"].Record("team-b", pool.Observation{Scope: pool.Scope{Model: "gpt-test"}, Status: 429, RetryAfter: 600, HasRetryAfter: true})
	n := len(u.requests())
	r := h.do(context.Background(), KindResponses.Path, `{"model":"api/gpt-test","input":"b","previous_response_id":"resp_1"}`)
	wantStatus(t, r, 429, "rate_limit_exceeded")
	if got := r.header.Get("Retry-After"); got != "600" {
		t.Errorf("Retry-After %q, want 600", got)
	}
	if sent := u.requests()[n:]; len(sent) != 0 {
		t.Errorf("%d provider calls for a request pinned to a resting credential, want 0", len(sent))
	}
}

// A response id stays with the credential that answered it for 24 hours,
// and not a millisecond longer: then a previous_response_id may be served
// by any credential.
func TestResponseAffinityLasts24Hours(t *testing.T) {
	clk := clock.NewFake(t0)
	a := newAffinity(clk)
	a.remember("resp_1", "team-b")
	clk.Advance(24*time.Hour - time.Millisecond)
	if cred, ok := a.lookup("resp_1"); !ok || cred != "team-b" {
		t.Errorf("lookup a millisecond before 24 hours = %q, %v; want team-b", cred, ok)
	}
	clk.Advance(time.Millisecond)
	if cred, ok := a.lookup("resp_1"); ok {
		t.Errorf("lookup at 24 hours = %q, still pinned", cred)
	}
}

// At most 100,000 response ids are remembered (README): the next one
// makes the oldest go, and only it.
func TestResponseAffinityKeepsTheNewest100000Ids(t *testing.T) {
	const n = 100_000
	a := newAffinity(clock.NewFake(t0))
	for i := range n {
		a.remember("resp_"+strconv.Itoa(i), "team-a")
	}
	for _, id := range []string{"resp_0", "resp_" + strconv.Itoa(n-1)} {
		if _, ok := a.lookup(id); !ok {
			t.Fatalf("%s forgotten with %d ids remembered", id, n)
		}
	}
	a.remember("resp_next", "team-b")
	if _, ok := a.lookup("resp_0"); ok {
		t.Errorf("the oldest id still remembered with %d after it", n)
	}
	for _, id := range []string{"resp_1", "resp_next"} {
		if _, ok := a.lookup(id); !ok {
			t.Errorf("%s forgotten, want only the oldest to go", id)
		}
	}
}

// A request the provider refused (a structured 4xx) records 0 tokens, and
// its access line says 0 as its row does, not unknown.
func TestAccessLineShowsZeroTokensForARefusedRequest(t *testing.T) {
	st := ledger.Settlement{Status: 400}
	settleRefused(&st)
	var info httpx.AccessInfo
	noteTokens(&info, st)
	for name, p := range map[string]*int64{"input": info.InputTokens, "output": info.OutputTokens, "total": info.TotalTokens} {
		if p == nil || *p != 0 {
			t.Errorf("%s tokens in the access line of a refused request = %v, want 0", name, p)
		}
	}
}

func TestClassifyUpstreamAnswer(t *testing.T) {
	pe := func(code, typ, param, msg string) providerError {
		return providerError{Code: code, Type: typ, Param: param, Message: msg, structured: true}
	}
	for _, c := range []struct {
		name   string
		status int
		pe     providerError
		want   outcome
	}{
		{"ok", 200, providerError{}, outcomeAnswer},
		{"created", 201, providerError{}, outcomeAnswer},
		{"redirect", 302, providerError{}, outcomeRedirect},
		{"multiple choices", 300, providerError{}, outcomeRedirect},
		{"quota code", 429, pe("insufficient_quota", "", "", ""), outcomeQuota},
		{"quota type only", 429, pe("", "insufficient_quota", "", ""), outcomeQuota},
		{"quota type with other code", 429, pe("other", "insufficient_quota", "", ""), outcomePassThrough},
		{"rate limited", 429, pe("rate_limit_exceeded", "requests", "", ""), outcomeRateLimited},
		{"rate limited type only", 429, pe("", "rate_limit_exceeded", "", ""), outcomeRateLimited},
		{"rate limited type with other code", 429, pe("other", "rate_limit_exceeded", "", ""), outcomePassThrough},
		{"unclassified 429", 429, providerError{}, outcomePassThrough},
		{"401", 401, providerError{}, outcomeAuth},
		{"403", 403, pe("", "", "", ""), outcomeAuth},
		{"405", 405, providerError{}, outcomeUnsupported},
		{"501", 501, providerError{}, outcomeUnsupported},
		{"404 unstructured", 404, providerError{}, outcomeUnsupported},
		{"404 model_not_found", 404, pe("model_not_found", "", "", ""), outcomeUnsupported},
		{"404 unknown_url", 404, pe("unknown_url", "", "", ""), outcomeUnsupported},
		{"404 file_not_found naming the model", 404, pe("file_not_found", "", "", "m1 file"), outcomePassThrough},
		{"404 param model", 404, pe("", "", "model", ""), outcomeUnsupported},
		{"404 param input", 404, pe("", "", "input", "m1"), outcomePassThrough},
		{"404 message names model", 404, pe("", "", "", "m1 does not exist"), outcomeUnsupported},
		{"404 message names path", 404, pe("", "", "", "no /v1/chat/completions here"), outcomeUnsupported},
		{"404 message about content", 404, pe("", "", "", "no such thread"), outcomePassThrough},
		{"400", 400, pe("invalid_value", "", "messages", ""), outcomePassThrough},
		{"500", 500, providerError{}, outcomePassThrough},
	} {
		if got := classify(c.status, c.pe, "m1", "/v1/chat/completions"); got != c.want {
			t.Errorf("%s: classify(%d) = %d, want %d", c.name, c.status, got, c.want)
		}
	}
}

// A cost budget admits priced traffic on the OpenAI routes, with the row's
// cost computed by the ledger; an unpriced model is refused before
// discovery with 403 policy_blocked; a used-up cost budget is 429
// budget_exceeded.
func TestCostBudgetOnOpenAIRoutes(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	ctx := context.Background()
	u.catalogs[keyA] = append(u.catalogs[keyA], "unpriced")
	if err := h.store.PutBudget(ctx, budgets.Budget{Name: "spend", Kind: budgets.KindCost, Limit: 100, Window: budgets.Window{Calendar: "month"}}.Record(), false); err != nil {
		t.Fatal(err)
	}
	// $1 per 1M input, $2 per 1M output: 11 in and 7 out cost 25 micro-USD.
	if _, err := h.store.PutPrices(ctx, []ledger.Price{{Model: "gpt-test", InputMicros: 1_000_000, OutputMicros: 2_000_000, Source: ledger.SourceSet}}, true); err != nil {
		t.Fatal(err)
	}
	r := h.do(ctx, KindChat.Path, `{"model":"api/unpriced","messages":[]}`)
	wantStatus(t, r, 403, httpx.CodePolicyBlocked)
	if len(u.requests()) != 0 {
		t.Fatalf("an unpriced model reached the provider")
	}
	u.script(keyA, KindChat.Path, upReply{status: 200, body: chatAnswer})
	for range 4 {
		r = h.do(ctx, KindChat.Path, `{"model":"api/gpt-test","messages":[]}`)
		wantStatus(t, r, 200, "")
	}
	if row := h.row(r.header.Get("X-Request-ID")); row.CostMicros != ledger.Known(25) {
		t.Errorf("row cost %+v, want 25 micro-USD", row.CostMicros)
	}
	wantStatus(t, h.do(ctx, KindChat.Path, `{"model":"api/gpt-test","messages":[]}`), 429, httpx.CodeBudgetExceeded)
}

func TestOpenAIRoutesNameTheirOwnErrors(t *testing.T) {
	for _, c := range []struct {
		k         *Kind
		err       error
		code      string
		status    int
		neverRetr bool
	}{
		{KindChat, ErrResponseTooLarge, "response_too_large", 502, true},
		{KindResponses, ErrPoolUnavailable, "pool_unavailable", 503, true},
		{KindDecisions, ErrResponseTooLarge, "decisions_response_too_large", 502, true},
		{KindDecisions, ErrPoolUnavailable, "decisions_pool_unavailable", 503, true},
		{KindEmbeddings, ErrModelNotAvailable, "model_not_available", 404, false},
	} {
		e := c.k.errorResponse(c.err)
		if e.Code != c.code || e.Status != c.status || e.NeverRetry != c.neverRetr {
			t.Errorf("%s %v: %d %s never-retry %v, want %d %s %v", c.k.Path, c.err, e.Status, e.Code, e.NeverRetry, c.status, c.code, c.neverRetr)
		}
	}
}

// wantModels checks that GET /v1/models answers 200 with body want.
func wantModels(t *testing.T, h *harness, want string) {
	t.Helper()
	status, body := getModels(t, h)
	if status != 200 || body != want {
		t.Errorf("GET /v1/models: %d %s\nwant %s", status, body, want)
	}
}

// GET /v1/models in a region no credential serves is 400 unknown_region,
// as every other route answers it, not 200 with an empty list that reads
// as "no models".
func TestModelsInAnUnknownRegionIs400(t *testing.T) {
	h, _ := newOpenAIHarness(t, opts{})
	wantStatus(t, h.do(context.Background(), KindChat.Path, `{"model":"api/gpt-test","messages":[]}`, RegionHeader, "mars"), 400, httpx.CodeUnknownRegion)
	req, _ := http.NewRequest("GET", h.srv.URL+"/v1/models", nil)
	req.Header.Set(RegionHeader, "mars")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("GET /v1/models with X-Rotor-Region: mars = %d, want 400 unknown_region", resp.StatusCode)
	}
}

// On the OpenAI routes the generation deadline bounds the whole answer,
// but waits for a release stay within runtime.deadline (README): a
// cooldown longer than what runtime.deadline leaves is answered 429 with
// it at once, never waited out on the generation deadline.
func TestOpenAIRouteWaitsOnlyWithinTheDecisionsDeadline(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{deadline: 10 * time.Second, generation: 10 * time.Minute})
	limited := upReply{status: 429, header: map[string]string{"Retry-After": "30"}, body: `{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`}
	u.script(keyA, KindChat.Path, limited)
	u.script(keyB, KindChat.Path, limited)
	done := make(chan reply, 1)
	go func() { done <- h.do(context.Background(), KindChat.Path, `{"model":"api/gpt-test","messages":[]}`) }()
	waited := false
	for {
		select {
		case r := <-done:
			if waited {
				t.Errorf("the request waited for a 30 s release with 10 s of runtime.deadline left")
			}
			wantStatus(t, r, 429, "")
			if got := r.header.Get("Retry-After"); got != "30" && !waited {
				t.Errorf("Retry-After %q, want 30", got)
			}
			return
		default:
		}
		if h.clk.Timers() > 0 {
			waited = true
			h.clk.Advance(time.Hour) // let the request go on to its answer
		}
		time.Sleep(time.Millisecond)
	}
}

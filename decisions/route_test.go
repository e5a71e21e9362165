package decisions

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/internal/clock"
	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/internal/testutil/ledgertest"
	"github.com/rotorhq/rotor/ledger"
	"github.com/rotorhq/rotor/pool"
)

// Spec: "The runtime rotation proxy accepts POST /v1/decisions and POST
// /decisions ... Requests go to the selected credential's regional
// /v1/decisions endpoint; they are never translated."
func TestBothRoutesForwardToRegionalDecisionsEndpoint(t *testing.T) {
	h := newHarness(t, opts{})
	for _, path := range []string{"/v1/decisions", "/decisions"} {
		r := h.do(context.Background(), path, decision("api/decide-mini"))
		wantStatus(t, r, 200, "")
	}
	for _, rec := range h.fp.Requests() {
		if rec.Method == http.MethodPost && rec.Path != fp.PathDecisions {
			t.Errorf("forwarded to %s, want %s", rec.Path, fp.PathDecisions)
		}
	}
	if got := h.fp.Hits(fp.PathDecisions); got != 2 {
		t.Errorf("decisions hits = %d, want 2", got)
	}
}

// Spec: "Select api/<model> or zdr/<model> explicitly. Bare subscription
// models, PSP routes, and speed-tier aliases are rejected before discovery
// or inference."
func TestBareModelsRejectedBeforeDiscoveryOrInference(t *testing.T) {
	h := newHarness(t, opts{})
	for _, model := range []string{"decide-mini", "psp/decide-mini", "decide-mini:fast", "API/decide-mini", "api/", "zdr/", "", "openai/decide-mini"} {
		r := h.post(decision(model))
		wantStatus(t, r, 400, "invalid_model_prefix")
		if r.err.Param == nil || *r.err.Param != "model" {
			t.Errorf("%q: param = %v, want model", model, r.err.Param)
		}
	}
	wantStatus(t, h.post(`{"input":"no model"}`), 400, "invalid_model_prefix")
	wantStatus(t, h.post(`{"model":7}`), 400, "invalid_model_prefix")
	h.wantUntouched()
}

// A model holding a NUL or another control character is listed by no
// provider: 404 model_not_available before admission, no row
// (PostgreSQL refused a NUL in the reservation, where SQLite stored it).
func TestModelWithControlCharactersRefusedBeforeAdmission(t *testing.T) {
	h := newHarness(t, opts{})
	for _, body := range []string{`{"model":"api/decide\u0000mini"}`, `{"model":"api/decide-mini\n"}`, `{"model":"api/decide\u001bmini"}`} {
		r := h.post(body)
		wantStatus(t, r, 404, "model_not_available")
		if r.err.Param == nil || *r.err.Param != "model" {
			t.Errorf("%q: param = %v, want model", body, r.err.Param)
		}
	}
	h.wantUntouched()
}

func TestInvalidJSONIs400BeforeAnything(t *testing.T) {
	h := newHarness(t, opts{})
	for _, body := range []string{"", "{", "[]", `"api/decide-mini"`, `{"model":"api/decide-mini"} trailing`, "null"} {
		wantStatus(t, h.post(body), 400, "invalid_json")
	}
	// Two model fields (or a case variant a lenient decoder would also read)
	// are refused: rotor and the provider must agree on the model.
	// The answer names model as the param at fault, as for a bad prefix.
	for _, body := range []string{`{"model":"api/decide-mini","model":"decide-large"}`, `{"model":"api/decide-mini","Model":"decide-large"}`} {
		r := h.post(body)
		wantStatus(t, r, 400, "invalid_json")
		if r.err.Param == nil || *r.err.Param != "model" {
			t.Errorf("%s: param = %v, want model", body, r.err.Param)
		}
	}
	h.wantNoProviderCall()
}

func TestRequestOver64MiBIs413BeforeAnything(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 64 MiB")
	}
	h := newHarness(t, opts{})
	big := `{"model":"api/decide-mini","input":"` + strings.Repeat("x", MaxBody) + `"}`
	wantStatus(t, h.post(big), 413, "request_too_large")
	h.wantUntouched()
}

// Spec: "A zdr/ selection uses only operator-declared ZDR credentials."
func TestZDRSelectionUsesOnlyZDRCredentials(t *testing.T) {
	creds := append(defaultCreds(), cred{name: "zdr-1", pool: "zdr", key: "sk-test-zdr-00000000000000000003", models: []string{"decide-mini"}})
	h := newHarness(t, opts{creds: creds})
	r := h.post(decision("zdr/decide-mini"))
	wantStatus(t, r, 200, "")
	if got := r.header.Get("X-Rotor-Credential"); got != "zdr-1" {
		t.Errorf("served by %q, want zdr-1", got)
	}
	for _, name := range []string{"team-a", "team-b"} {
		if n := h.hits(name, fp.PathModels) + h.hits(name, fp.PathDecisions); n != 0 {
			t.Errorf("api credential %s was touched %d times by a zdr/ request", name, n)
		}
	}
}

// Spec: eligibility requires the pool, the discovered catalog, the
// visibility policy and the operator profile; "A model ID returned by
// /models alone does not grant endpoint capability."
func TestEligibilityRequiresCatalogVisibilityAndProfile(t *testing.T) {
	tests := []struct {
		name string
		c    cred
	}{
		{"not in catalog", cred{models: []string{"decide-large"}}},
		{"denied by visibility", cred{models: []string{"decide-mini"}, deny: []string{"decide-*"}}},
		{"not allowed by visibility", cred{models: []string{"decide-mini"}, allow: []string{"other-*"}}},
		{"listed but no Decisions profile", cred{models: []string{"decide-mini"}, profiled: []string{}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.c
			c.name, c.pool, c.key = "only", "api", "sk-test-only-000000000000000000"
			h := newHarness(t, opts{creds: []cred{c}})
			wantStatus(t, h.post(decision("api/decide-mini")), 404, "model_not_available")
			if n := h.fp.Hits(fp.PathDecisions); n != 0 {
				t.Errorf("ineligible credential got %d decisions", n)
			}
			if n := len(h.rows()); n != 0 {
				t.Errorf("%d ledger rows for a request that sent nothing", n)
			}
		})
	}
}

// Spec: "Only the routing prefix is removed from model. No Responses-only
// store, stream, or reasoning settings are injected."
func TestForwardedBodyEqualsCallerBodyApartFromModel(t *testing.T) {
	h := newHarness(t, opts{})
	body := "{ \"input\" : \"caf\\u00e9 \\\"quoted\\\" ✓\",\n\t\"model\":\"api/decide-mini\" ,\"question\":{\"type\":\"choice\",\"choices\":[true,false]},\"cache\":{\"key\":\"k1\"},\"safety\":{\"level\":\"strict\"},\"n\":1.50e2}"
	wantStatus(t, h.post(body), 200, "")
	recs := h.fp.RequestsFor(h.keys["team-a"], fp.PathDecisions)
	if len(recs) != 1 {
		t.Fatalf("%d forwarded requests", len(recs))
	}
	want := strings.Replace(body, `"api/decide-mini"`, `"decide-mini"`, 1)
	if got := string(recs[0].Body); got != want {
		t.Errorf("forwarded body\n got %q\nwant %q", got, want)
	}
	for _, k := range []string{"Authorization"} {
		if !strings.HasPrefix(recs[0].Header.Get(k), "Bearer sk-test-a") {
			t.Errorf("%s = %q, want the credential's key", k, recs[0].Header.Get(k))
		}
	}
}

// Spec: "Native answers, refusals, and usage remain intact." and "The full
// provider usage object is returned to the caller."
func TestAnswersRefusalsAndUsageReturnedIntact(t *testing.T) {
	h := newHarness(t, opts{})
	for _, in := range []string{"Is the sky blue?", "Please refuse this"} {
		body := `{"model":"api/decide-mini","input":"` + in + `","question":{"type":"score","min":0,"max":1}}`
		r := h.post(body)
		wantStatus(t, r, 200, "")
		recs := h.fp.Requests()
		var sent []byte
		for _, rec := range recs {
			if rec.Path == fp.PathDecisions {
				sent = rec.Body
			}
		}
		var ans map[string]any
		if err := json.Unmarshal(r.body, &ans); err != nil {
			t.Fatalf("answer not JSON: %s", r.body)
		}
		usage, _ := ans["usage"].(map[string]any)
		in, out, total := fp.ExpectedUsage(sent)
		if usage["input_tokens"] != float64(in) || usage["output_tokens"] != float64(out) || usage["total_tokens"] != float64(total) || usage["input_tokens_details"] == nil {
			t.Errorf("usage = %v, want the provider's full usage object", usage)
		}
		if strings.Contains(body, "refuse") {
			if o, _ := ans["output"].(map[string]any); o["type"] != "refusal" {
				t.Errorf("refusal not passed through: %s", r.body)
			}
		}
	}
}

// Spec: "The usage ledger records the decisions operation and actual
// provider token counts ... estimated cost remains unknown (null)."
func TestLedgerRecordsDecisionsOperationRealTokensAndUnknownCost(t *testing.T) {
	h := newHarness(t, opts{})
	r := h.post(decision("api/decide-mini"))
	wantStatus(t, r, 200, "")
	rows := h.rows()
	if len(rows) != 1 {
		t.Fatalf("%d rows, want 1", len(rows))
	}
	row := rows[0]
	recs := h.fp.RequestsFor(h.keys["team-a"], fp.PathDecisions)
	in, out, total := fp.ExpectedUsage(recs[0].Body)
	if row.Operation != "decisions" || row.Model != "decide-mini" || row.Pool != "api" || row.Credential != "team-a" || row.Client != "test-client" ||
		row.Attempts != 1 || row.Status != 200 || !row.Settled || row.RequestID != r.header.Get("X-Request-ID") {
		t.Errorf("row = %+v", row)
	}
	if row.InputTokens != ledger.Known(in) || row.OutputTokens != ledger.Known(out) || row.TotalTokens != ledger.Known(total) {
		t.Errorf("tokens = %v/%v/%v, want %d/%d/%d", row.InputTokens, row.OutputTokens, row.TotalTokens, in, out, total)
	}
	if row.CostMicros.Known {
		t.Errorf("cost = %v, want unknown (null), never zero", row.CostMicros)
	}
}

// Spec: "Provider rejection status and safe error code/type/parameter
// fields are preserved; error messages are sanitized to avoid reflecting
// private input."
func TestProviderRejectionKeepsStatusAndSafeFieldsSanitizesMessage(t *testing.T) {
	h := newHarness(t, opts{})
	h.fp.Script(h.keys["team-a"], "", fp.EchoSecrets())
	body := `{"model":"api/decide-mini","input":"my private diary entry 4711"}`
	r := h.post(body)
	if r.status != 400 {
		t.Fatalf("status %d, want the provider's 400: %s", r.status, r.body)
	}
	if r.code() == "" || r.err.Type == "" {
		t.Errorf("code/type dropped: %s", r.body)
	}
	for _, leak := range []string{"4711", "diary", h.keys["team-a"], "sk-test"} {
		if bytes.Contains(r.body, []byte(leak)) {
			t.Errorf("answer reflects %q: %s", leak, r.body)
		}
	}
	if n := h.hits("team-b", fp.PathDecisions); n != 0 {
		t.Errorf("a caller error was replayed on team-b")
	}
}

// A provider rejection that names no type gets rotor's: invalid_request_error
// for a 4xx, api_error for a 5xx (a 500 is the provider's failure, not
// the caller's); a numeric code is kept as its digits.
func TestProviderRejectionWithoutATypeGetsRotorsType(t *testing.T) {
	for _, c := range []struct {
		status          int
		body, typ, code string
	}{
		{400, `{"error":{"message":"bad","code":"bad_field"}}`, "invalid_request_error", "bad_field"},
		{409, `{"error":{"message":"busy","code":1042}}`, "invalid_request_error", "1042"},
		{500, "oops", "api_error", ""},
		{502, `{"error":{"message":"upstream"}}`, "api_error", ""},
	} {
		h := newHarness(t, opts{})
		h.fp.Script(h.keys["team-a"], "", fp.Status(c.status, c.body, http.Header{"Content-Type": {"application/json"}}))
		r := h.post(decision("api/decide-mini"))
		wantStatus(t, r, c.status, c.code)
		if r.err.Type != c.typ {
			t.Errorf("%d %s: type %q, want %q", c.status, c.body, r.err.Type, c.typ)
		}
	}
}

// rotor drops an idle provider connection before the provider would
// (fake provider: 60 s, as many load balancers): a request written to a
// connection the provider is closing is answered 502 "may have run" with
// unknown usage although the provider never read it.
func TestProviderConnectionsIdleOutBeforeTheProviders(t *testing.T) {
	tr, ok := NewHTTPClient().Transport.(*http.Transport)
	if !ok {
		t.Fatalf("transport %T", NewHTTPClient().Transport)
	}
	if tr.IdleConnTimeout <= 0 || tr.IdleConnTimeout >= fp.IdleTimeout {
		t.Errorf("IdleConnTimeout = %v, want above 0 and below the provider's %v", tr.IdleConnTimeout, fp.IdleTimeout)
	}
}

// reservations records the reservations the route takes.
type reservations struct {
	Ledger
	mu  sync.Mutex
	got []ledger.Reservation
}

func (r *reservations) Reserve(ctx context.Context, res ledger.Reservation, admit ledger.Admitter) error {
	r.mu.Lock()
	r.got = append(r.got, res)
	r.mu.Unlock()
	return r.Ledger.Reserve(ctx, res, admit)
}

// A reservation expires (its row's expires, after which it counts as
// unknown usage) when the request's own bound and the reservation grace
// have passed: the Decisions deadline on Decisions, the generation
// deadline on the OpenAI routes, whose answers may take that long.
func TestReservationExpiresAfterTheRoutesDeadlineAndGrace(t *testing.T) {
	rec := &reservations{}
	h, u := newOpenAIHarness(t, opts{deadline: 20 * time.Second, generation: 5 * time.Minute, reservationGrace: 7 * time.Second,
		wrapLedger: func(l Ledger) Ledger { rec.Ledger = l; return rec }})
	u.script(keyA, KindChat.Path, upReply{status: 200, body: chatAnswer})
	u.script(keyA, KindDecisions.Path, upReply{status: 200, body: `{"id":"d1","usage":{"input_tokens":1,"output_tokens":1,"total_tokens":2}}`})
	wantStatus(t, h.post(decision("api/decide-only")), 200, "")
	wantStatus(t, h.do(context.Background(), KindChat.Path, `{"model":"api/gpt-test","messages":[]}`), 200, "")
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.got) != 2 {
		t.Fatalf("%d reservations, want 2", len(rec.got))
	}
	for i, want := range []time.Time{t0.Add(27 * time.Second), t0.Add(5*time.Minute + 7*time.Second)} {
		if got := rec.got[i].Expires; !got.Equal(want) {
			t.Errorf("%s reservation expires %v, want %v", rec.got[i].Operation, got, want)
		}
	}
}

// A row's latency (latency_ms in ledger rows) is the time from admission
// to the answer on the route's clock.
func TestRowRecordsTheRequestsLatency(t *testing.T) {
	h := newHarness(t, opts{})
	h.fp.OnRequest(func(r fp.Received) {
		if r.Path == fp.PathDecisions {
			h.clk.Advance(1500 * time.Millisecond)
		}
	})
	r := h.post(decision("api/decide-mini"))
	wantStatus(t, r, 200, "")
	if row := h.row(r.header.Get("X-Request-ID")); row.Latency != 1500*time.Millisecond {
		t.Errorf("row latency %v, want 1.5s", row.Latency)
	}
}

// A pool whose every configured credential is unusable answers 503
// no_credentials saying why each one is (a key file that cannot be read,
// say), so the operator can fix it from the answer.
func TestNoCredentialsAnswerSaysWhyEachIsUnusable(t *testing.T) {
	clk := clock.NewFake(t0)
	store := ledgertest.Open(t, ledger.Options{Clock: clk})
	pl := pool.New(pool.Config{Options: pool.Options{Name: "api"}, Store: pool.NewStore(clk, 0), Clock: clk})
	rt := New(Config{Pools: []PoolConfig{{Name: "api", Pool: pl, Unusable: []string{"team-a: key_file unreadable"}}},
		Ledger: store, Admitter: budgets.NewAdmitter(), Clock: clk})
	rec := httptest.NewRecorder()
	rt.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Endpoint, strings.NewReader(decision("api/decide-mini"))))
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), `"no_credentials"`) || !strings.Contains(rec.Body.String(), "team-a: key_file unreadable") {
		t.Errorf("answer %d %s, want 503 no_credentials naming team-a's reason", rec.Code, rec.Body)
	}
}

// A body cut by a server's own cap (the bridge's http.MaxBytesReader, for
// a chunked body with no Content-Length) is 413 request_too_large, as over
// rotor's cap, not 400 invalid_json.
func TestBodyCutByTheServersCapIs413(t *testing.T) {
	h := newHarness(t, opts{})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, Endpoint, strings.NewReader(decision("api/decide-mini")))
	req.ContentLength = -1
	req.Body = http.MaxBytesReader(rec, req.Body, 16)
	h.router.ServeHTTP(rec, req)
	if rec.Code != 413 || !strings.Contains(rec.Body.String(), `"request_too_large"`) {
		t.Errorf("answer %d %s, want 413 request_too_large", rec.Code, rec.Body)
	}
	h.wantUntouched()
}

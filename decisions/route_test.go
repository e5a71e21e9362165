package decisions

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/budgets"
	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/ledger"
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
	if n := h.fp.Hits(fp.PathModels) + h.fp.Hits(fp.PathDecisions); n != 0 {
		t.Errorf("provider hit %d times, want 0", n)
	}
	if n := len(h.rows()); n != 0 {
		t.Errorf("%d ledger rows, want 0", n)
	}
}

func TestInvalidJSONIs400BeforeAnything(t *testing.T) {
	h := newHarness(t, opts{})
	for _, body := range []string{"", "{", "[]", `"api/decide-mini"`, `{"model":"api/decide-mini"} trailing`, "null"} {
		wantStatus(t, h.post(body), 400, "invalid_json")
	}
	// Two model fields (or a case variant a lenient decoder would also read)
	// are refused: rotor and the provider must agree on the model.
	wantStatus(t, h.post(`{"model":"api/decide-mini","model":"decide-large"}`), 400, "invalid_json")
	wantStatus(t, h.post(`{"model":"api/decide-mini","Model":"decide-large"}`), 400, "invalid_json")
	if n := h.fp.Hits(fp.PathModels) + h.fp.Hits(fp.PathDecisions); n != 0 {
		t.Errorf("provider hit %d times, want 0", n)
	}
}

func TestRequestOver64MiBIs413BeforeAnything(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 64 MiB")
	}
	h := newHarness(t, opts{})
	big := `{"model":"api/decide-mini","input":"` + strings.Repeat("x", MaxBody) + `"}`
	wantStatus(t, h.post(big), 413, "request_too_large")
	if n := h.fp.Hits(fp.PathModels) + h.fp.Hits(fp.PathDecisions); n != 0 {
		t.Errorf("provider hit %d times, want 0", n)
	}
	if n := len(h.rows()); n != 0 {
		t.Errorf("%d ledger rows, want 0", n)
	}
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

// Spec: unsupported endpoint responses (405, 501, and a 404 that names the
// model or endpoint or carries no structured error) allow another eligible
// credential and are cached for five minutes per credential, model and
// endpoint.
func TestUnsupportedEndpointFailsOverAndIsCachedFiveMinutes(t *testing.T) {
	for _, step := range []struct {
		name string
		s    fp.Step
	}{
		{"405", fp.MethodNotAllowed()}, {"501", fp.NotImplemented()}, {"404 model", fp.NotFoundModel()},
		{"404 endpoint", fp.NotFoundEndpoint()}, {"404 unstructured", fp.NotFoundBare()},
	} {
		t.Run(step.name, func(t *testing.T) {
			h := newHarness(t, opts{})
			h.fp.SetDefault(h.keys["team-a"], "decide-mini", step.s)
			r := h.post(decision("api/decide-mini"))
			wantStatus(t, r, 200, "")
			if got := r.header.Get("X-Rotor-Credential"); got != "team-b" {
				t.Fatalf("served by %s, want team-b after failover", got)
			}
			// Cached: the next requests skip team-a for this model.
			for i := 0; i < 3; i++ {
				wantStatus(t, h.post(decision("api/decide-mini")), 200, "")
			}
			if n := h.hits("team-a", fp.PathDecisions); n != 1 {
				t.Errorf("team-a got %d decisions, want 1 (cached as unsupported)", n)
			}
			// Another model on team-a is unaffected.
			if r := h.post(decision("api/decide-large")); r.header.Get("X-Rotor-Credential") != "team-a" {
				t.Errorf("decide-large served by %s, want team-a", r.header.Get("X-Rotor-Credential"))
			}
			h.clk.Advance(UnsupportedTTL - time.Second)
			h.post(decision("api/decide-mini"))
			if n := h.hits("team-a", fp.PathDecisions); n != 2 {
				t.Errorf("before five minutes: team-a decisions = %d, want 2 (1 + decide-large)", n)
			}
			h.clk.Advance(time.Second)
			h.post(decision("api/decide-mini"))
			if n := h.hits("team-a", fp.PathDecisions); n != 3 {
				t.Errorf("after five minutes: team-a decisions = %d, want 3 (tried again)", n)
			}
			first := h.row(r.header.Get("X-Request-ID"))
			if first.Attempts != 2 || first.Credential != "team-b" {
				t.Errorf("first row = %+v, want 2 attempts answered by team-b", first)
			}
		})
	}
}

// Spec: "A 404 about request content, such as a missing input file, is
// returned to the caller without failover or caching."
func TestNotFoundAboutContentReturnedWithoutFailoverOrCache(t *testing.T) {
	h := newHarness(t, opts{})
	h.fp.Script(h.keys["team-a"], "decide-mini", fp.NotFoundContent())
	r := h.post(decision("api/decide-mini"))
	wantStatus(t, r, 404, "file_not_found")
	if n := h.hits("team-b", fp.PathDecisions); n != 0 {
		t.Errorf("failed over to team-b %d times", n)
	}
	wantStatus(t, h.post(decision("api/decide-mini")), 200, "")
	if n := h.hits("team-a", fp.PathDecisions); n != 2 {
		t.Errorf("team-a decisions = %d, want 2 (not cached)", n)
	}
}

// Spec: "A credential rejected with 401, 403, or a permanent quota 429 ...
// the next eligible credential in the same pool and region is tried and
// the rejected one is not sent again for that request."
func TestRejectedCredentialTriesNextAndIsNotSentAgain(t *testing.T) {
	for _, step := range []struct {
		name string
		s    fp.Step
	}{{"401", fp.Unauthorized()}, {"403", fp.Forbidden()}, {"permanent quota", fp.InsufficientQuota()}} {
		t.Run(step.name, func(t *testing.T) {
			creds := append(defaultCreds(), cred{name: "team-c", pool: "api", key: "sk-test-c-0000000000000000000003", models: []string{"decide-mini"}})
			h := newHarness(t, opts{creds: creds})
			h.fp.SetDefault(h.keys["team-a"], "", step.s)
			h.fp.Script(h.keys["team-b"], "", fp.ServerError())
			// team-b's 500 is not replayed, so the request ends there;
			// what matters is that team-a was tried exactly once.
			h.post(decision("api/decide-mini"))
			if n := h.hits("team-a", fp.PathDecisions); n != 1 {
				t.Errorf("team-a decisions = %d, want 1", n)
			}
			if n := h.hits("team-b", fp.PathDecisions); n != 1 {
				t.Errorf("team-b decisions = %d, want 1 (the next credential)", n)
			}
		})
	}
}

// Spec: "If every credential is rejected with 401 or 403, the caller gets
// 503 decisions_pool_unavailable, never a 401 or 403."
func TestEveryCredentialRejectedAuthGives503PoolUnavailable(t *testing.T) {
	t.Run("at inference", func(t *testing.T) {
		h := newHarness(t, opts{})
		h.fp.SetDefault(h.keys["team-a"], "", fp.Unauthorized())
		h.fp.SetDefault(h.keys["team-b"], "", fp.Forbidden())
		r := h.post(decision("api/decide-mini"))
		wantStatus(t, r, 503, "decisions_pool_unavailable")
		if r.header.Get("x-should-retry") != "false" {
			t.Error("pool unavailable without x-should-retry: false")
		}
		rows := h.rows()
		if len(rows) != 1 || rows[0].Attempts != 2 || rows[0].Status != 503 {
			t.Errorf("rows = %+v, want one row with 2 attempts and status 503", rows)
		}
	})
	t.Run("at catalog discovery", func(t *testing.T) {
		h := newHarness(t, opts{})
		h.fp.SetCatalogDefault(h.keys["team-a"], fp.Unauthorized())
		h.fp.SetCatalogDefault(h.keys["team-b"], fp.Forbidden())
		wantStatus(t, h.post(decision("api/decide-mini")), 503, "decisions_pool_unavailable")
		if n := h.fp.Hits(fp.PathDecisions); n != 0 {
			t.Errorf("%d decisions sent by rejected credentials", n)
		}
		if n := len(h.rows()); n != 0 {
			t.Errorf("%d rows for a request that sent nothing", n)
		}
	})
	t.Run("mixed with permanent quota", func(t *testing.T) {
		h := newHarness(t, opts{})
		h.fp.SetDefault(h.keys["team-a"], "", fp.Unauthorized())
		h.fp.SetDefault(h.keys["team-b"], "", fp.InsufficientQuota())
		wantStatus(t, h.post(decision("api/decide-mini")), 503, "decisions_pool_unavailable")
	})
}

// Spec: "a pool-wide permanent quota rejection stays a sanitized 429."
func TestPoolWidePermanentQuotaIsSanitized429(t *testing.T) {
	h := newHarness(t, opts{})
	h.fp.SetDefault(h.keys["team-a"], "", fp.InsufficientQuota())
	h.fp.SetDefault(h.keys["team-b"], "", fp.InsufficientQuota())
	r := h.post(decision("api/decide-mini"))
	wantStatus(t, r, 429, "insufficient_quota")
	if strings.Contains(string(r.body), "billing") || strings.Contains(string(r.body), "sk-test") {
		t.Errorf("provider message passed through: %s", r.body)
	}
}

// Spec: "Confirmed temporary rate_limit_exceeded 429 responses use
// Retry-After and shared backoff."
func TestTemporaryRateLimitUsesRetryAfterAndSharedBackoff(t *testing.T) {
	for _, scoped := range []bool{false, true} {
		h := newHarness(t, opts{modelCooldown: scoped})
		h.fp.Script(h.keys["team-a"], "decide-mini", fp.RateLimited("30"))
		r := h.post(decision("api/decide-mini"))
		wantStatus(t, r, 200, "")
		if r.header.Get("X-Rotor-Credential") != "team-b" {
			t.Fatalf("served by %s, want team-b", r.header.Get("X-Rotor-Credential"))
		}
		// The cooldown is shared: the next requests skip team-a.
		for i := 0; i < 3; i++ {
			h.post(decision("api/decide-mini"))
		}
		if n := h.hits("team-a", fp.PathDecisions); n != 1 {
			t.Errorf("scoped=%v: team-a decisions = %d, want 1 while cooling", scoped, n)
		}
		h.clk.Advance(30 * time.Second)
		if r := h.post(decision("api/decide-mini")); r.header.Get("X-Rotor-Credential") != "team-a" {
			t.Errorf("scoped=%v: after Retry-After, served by %s, want team-a", scoped, r.header.Get("X-Rotor-Credential"))
		}
	}
}

// Spec: "When the shortest cooldown left in the pool outlasts the request
// deadline, the caller gets 429 rate_limit_exceeded with Retry-After and
// retry_after_ms set to that cooldown, including when the cooldown was
// cached by an earlier request." (model_cooldown on the scoped path.)
func TestCooldownOutlastingDeadlineGives429WithThatCooldown(t *testing.T) {
	for _, tt := range []struct {
		scoped bool
		code   string
	}{{false, "rate_limit_exceeded"}, {true, "model_cooldown"}} {
		creds := defaultCreds()[:1]
		h := newHarness(t, opts{creds: creds, modelCooldown: tt.scoped, deadline: 10 * time.Second})
		h.fp.SetDefault(h.keys["team-a"], "", fp.RateLimited("120"))
		r := h.post(decision("api/decide-mini"))
		wantStatus(t, r, 429, tt.code)
		if r.header.Get("Retry-After") != "120" || r.err.RetryAfterMS != 120000 {
			t.Errorf("scoped=%v: Retry-After %q, retry_after_ms %d; want 120 and 120000", tt.scoped, r.header.Get("Retry-After"), r.err.RetryAfterMS)
		}
		// A later request hits the cached cooldown without a provider call.
		h.clk.Advance(20 * time.Second)
		r = h.post(decision("api/decide-mini"))
		wantStatus(t, r, 429, tt.code)
		if r.header.Get("Retry-After") != "100" {
			t.Errorf("scoped=%v: cached cooldown Retry-After = %q, want 100", tt.scoped, r.header.Get("Retry-After"))
		}
		if n := h.hits("team-a", fp.PathDecisions); n != 1 {
			t.Errorf("scoped=%v: %d provider calls, want 1", tt.scoped, n)
		}
		if rows := h.rows(); len(rows) != 1 {
			t.Errorf("scoped=%v: %d rows, want 1 (the cached refusal sent nothing)", tt.scoped, len(rows))
		}
	}
}

// DESIGN: the route waits for the earliest release when it falls inside
// the remaining deadline.
func TestWaitsForEarliestReleaseInsideDeadline(t *testing.T) {
	h := newHarness(t, opts{creds: defaultCreds()[:1], modelCooldown: true})
	h.fp.Script(h.keys["team-a"], "decide-mini", fp.RateLimited("5"))
	done := make(chan reply, 1)
	go func() { done <- h.post(decision("api/decide-mini")) }()
	h.waitTimers(1)
	select {
	case r := <-done:
		t.Fatalf("answered %d before the cooldown released", r.status)
	default:
	}
	h.clk.Advance(5 * time.Second)
	r := <-done
	wantStatus(t, r, 200, "")
	if n := h.hits("team-a", fp.PathDecisions); n != 2 {
		t.Errorf("team-a decisions = %d, want 2 (throttled, then served)", n)
	}
	if rows := h.rows(); len(rows) != 1 || rows[0].Attempts != 2 {
		t.Errorf("rows = %+v, want one row with 2 attempts", rows)
	}
}

// Spec: "Unclassified 429 rejections, network ambiguity, and other server
// errors are not replayed."
func TestAmbiguousFailuresAreNotReplayed(t *testing.T) {
	for _, tt := range []struct {
		name   string
		s      fp.Step
		status int
	}{
		{"unclassified 429", fp.Unclassified429(), 429},
		{"500", fp.ServerError(), 500},
		{"connection reset after send", fp.ResetAfterRead(), 502},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, opts{})
			h.fp.Script(h.keys["team-a"], "", tt.s)
			r := h.post(decision("api/decide-mini"))
			if r.status != tt.status {
				t.Fatalf("status %d, want %d: %s", r.status, tt.status, r.body)
			}
			if n := h.fp.Hits(fp.PathDecisions); n != 1 {
				t.Errorf("%d decisions sent, want 1 (no replay)", n)
			}
			rows := h.rows()
			if len(rows) != 1 || rows[0].Attempts != 1 || rows[0].TotalTokens.Known {
				t.Errorf("rows = %+v, want one row, 1 attempt, unknown tokens", rows)
			}
		})
	}
}

// Spec: "Discovery, admission, response-body reads, and retries share a
// 60-second deadline and respect cancellation."
func TestDeadlineSharedAndProviderThatNeverAnswersIsNotReplayed(t *testing.T) {
	h := newHarness(t, opts{deadline: 300 * time.Millisecond})
	h.fp.Script(h.keys["team-a"], "", fp.Stall())
	start := time.Now()
	r := h.post(decision("api/decide-mini"))
	wantStatus(t, r, 504, "deadline_exceeded")
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("answered after %v, want about the 300ms deadline", el)
	}
	if n := h.fp.Hits(fp.PathDecisions); n != 1 {
		t.Errorf("%d decisions, want 1: no replay on another credential", n)
	}
	rows := h.rows()
	if len(rows) != 1 || rows[0].Status != 504 || rows[0].TotalTokens.Known {
		t.Errorf("rows = %+v, want one row of unknown usage", rows)
	}
}

// Spec: "A larger answer returns 502 decisions_response_too_large; the
// provider has already run that request, but its usage cannot be read, so
// no token counts are recorded."
func TestAnswerOver64MiBGives502AndNullTokens(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 64 MiB")
	}
	h := newHarness(t, opts{})
	h.fp.Script(h.keys["team-a"], "", fp.HugeAnswer(MaxBody+1))
	r := h.post(decision("api/decide-mini"))
	wantStatus(t, r, 502, "decisions_response_too_large")
	if r.header.Get("x-should-retry") != "false" {
		t.Error("502 too large without x-should-retry: false")
	}
	rows := h.rows()
	if len(rows) != 1 || rows[0].Status != 502 || rows[0].TotalTokens.Known || rows[0].InputTokens.Known {
		t.Errorf("rows = %+v, want one row with NULL tokens", rows)
	}
	if n := h.hits("team-b", fp.PathDecisions); n != 0 {
		t.Error("replayed after the provider ran the request")
	}
}

// Spec: "Error bodies are read only until 5 seconds pass without data or
// 64 KiB arrive, so a stalled rejection cannot hold failover until the
// deadline." (Here with a 200ms idle setting.)
func TestStalledErrorBodyReleasesFailover(t *testing.T) {
	h := newHarness(t, opts{errorIdle: 200 * time.Millisecond})
	h.fp.Script(h.keys["team-a"], "", fp.StallErrorBody(401, "", 30*time.Second))
	start := time.Now()
	r := h.post(decision("api/decide-mini"))
	wantStatus(t, r, 200, "")
	if r.header.Get("X-Rotor-Credential") != "team-b" {
		t.Errorf("served by %s, want team-b", r.header.Get("X-Rotor-Credential"))
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("failover took %v, want about the 200ms idle limit", el)
	}
}

func TestErrorBodyReadStopsAt64KiB(t *testing.T) {
	h := newHarness(t, opts{})
	h.fp.Script(h.keys["team-a"], "", fp.DripErrorBody(401, 10<<20))
	start := time.Now()
	r := h.post(decision("api/decide-mini"))
	wantStatus(t, r, 200, "")
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("took %v", el)
	}
}

// A client that disconnects cancels the upstream call, and the ledger row
// is still committed (the write does not use the cancelled context).
func TestClientDisconnectCancelsUpstreamAndRowIsCommitted(t *testing.T) {
	h := newHarness(t, opts{})
	h.fp.Script(h.keys["team-a"], "", fp.Stall())
	ctx, cancel := context.WithCancel(context.Background())
	h.fp.OnRequest(func(rec fp.Received) {
		if rec.Path == fp.PathDecisions {
			cancel()
		}
	})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.srv.URL+"/v1/decisions", strings.NewReader(decision("api/decide-mini")))
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("request succeeded after cancel")
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if _, err := h.fp.WaitCanceled(wctx); err != nil {
		t.Fatalf("provider never saw the cancellation: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		rows := h.rows()
		if len(rows) == 1 && rows[0].Settled {
			if rows[0].Status != 499 || rows[0].Attempts != 1 {
				t.Errorf("row = %+v, want status 499, 1 attempt", rows[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no settled row after the client left: %+v", rows)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Parallel requests against a throttled credential share one cooldown.
func TestParallelRequestsShareOneCooldown(t *testing.T) {
	h := newHarness(t, opts{modelCooldown: true})
	h.fp.SetDefault(h.keys["team-a"], "", fp.RateLimited("60"))
	wantStatus(t, h.post(decision("api/decide-mini")), 200, "")
	done := make(chan reply, 16)
	for i := 0; i < 16; i++ {
		go func() { done <- h.post(decision("api/decide-mini")) }()
	}
	for i := 0; i < 16; i++ {
		r := <-done
		if r.status != 200 || r.header.Get("X-Rotor-Credential") != "team-b" {
			t.Errorf("answer %d by %s", r.status, r.header.Get("X-Rotor-Credential"))
		}
	}
	if n := h.hits("team-a", fp.PathDecisions); n != 1 {
		t.Errorf("team-a decisions = %d, want 1", n)
	}
	snap := h.pools["api"].Snapshot()
	if snap.Credentials[0].ScopedObservations != 1 {
		t.Errorf("team-a observations = %d, want one shared cooldown", snap.Credentials[0].ScopedObservations)
	}
}

// Spec: "Credentials whose catalog is already fresh are tried first, so a
// cold or stalled catalog elsewhere in the pool never delays them."
func TestWarmCredentialsServedWhileAnotherCatalogStalls(t *testing.T) {
	// A request that waited on team-b's stalled catalog would take the
	// whole catalog timeout; one that did not takes far less, also on a
	// loaded machine.
	const catalogTimeout = 10 * time.Second
	h := newHarness(t, opts{deadline: 2 * catalogTimeout, catalogTimeout: catalogTimeout})
	// team-b's first catalog fetch fails, so only team-a is warm; then
	// team-b's catalog stalls far longer than the deadline.
	h.fp.ScriptCatalog(h.keys["team-b"], fp.ServerError())
	wantStatus(t, h.post(decision("api/decide-mini")), 200, "")
	h.fp.SetCatalogDefault(h.keys["team-b"], fp.SlowCatalog(time.Minute))
	for i := 0; i < 3; i++ {
		start := time.Now()
		r := h.post(decision("api/decide-mini"))
		wantStatus(t, r, 200, "")
		if el := time.Since(start); el >= catalogTimeout {
			t.Errorf("warm request took %v: the stalled catalog delayed it", el)
		}
	}
	if n := h.hits("team-b", fp.PathModels); n != 1 {
		t.Errorf("team-b catalog fetched %d times, want 1 (warm credentials go first)", n)
	}
}

// Spec: "Other credentials in the same pool and region are discovered only
// after the warm ones fail or are rate limited."
func TestColdCredentialsDiscoveredOnlyAfterWarmOnesFailOrAreRateLimited(t *testing.T) {
	h := newHarness(t, opts{})
	h.fp.ScriptCatalog(h.keys["team-b"], fp.ServerError())
	wantStatus(t, h.post(decision("api/decide-mini")), 200, "") // team-a warm, team-b cold
	h.fp.Script(h.keys["team-a"], "", fp.RateLimited("30"))
	before := h.hits("team-b", fp.PathModels)
	r := h.post(decision("api/decide-mini"))
	wantStatus(t, r, 200, "")
	if r.header.Get("X-Rotor-Credential") != "team-b" || h.hits("team-b", fp.PathModels) != before+1 {
		t.Errorf("served by %s; team-b catalog fetches %d -> %d; want team-b discovered after team-a was rate limited",
			r.header.Get("X-Rotor-Credential"), before, h.hits("team-b", fp.PathModels))
	}
	var order []string
	for _, rec := range h.fp.Requests()[3:] {
		order = append(order, rec.Key[8:9]+rec.Path)
	}
	want := []string{"a/v1/decisions", "b/v1/models", "b/v1/decisions"}
	if strings.Join(order, ",") != strings.Join(want, ",") {
		t.Errorf("order %v, want %v", order, want)
	}
}

// Spec: "When no catalog is fresh, the whole pool is discovered before the
// first send."
func TestNoFreshCatalogDiscoversWholePoolBeforeFirstSend(t *testing.T) {
	creds := append(defaultCreds(), cred{name: "team-c", pool: "api", key: "sk-test-c-0000000000000000000003", models: []string{"decide-mini"}})
	h := newHarness(t, opts{creds: creds})
	wantStatus(t, h.post(decision("api/decide-mini")), 200, "")
	recs := h.fp.Requests()
	if len(recs) != 4 {
		t.Fatalf("%d provider requests, want 3 catalogs and 1 decision", len(recs))
	}
	for i := 0; i < 3; i++ {
		if recs[i].Path != fp.PathModels {
			t.Errorf("request %d is %s before every catalog was fetched", i, recs[i].Path)
		}
	}
	if recs[3].Path != fp.PathDecisions {
		t.Errorf("last request %s, want the decision", recs[3].Path)
	}
}

// A request stays in one region: the header names it, else the region of
// the pool's first enabled credential.
func TestRequestStaysInItsRegion(t *testing.T) {
	creds := []cred{
		{name: "us-1", pool: "api", region: "us", key: "sk-test-us-00000000000000000001", models: []string{"decide-mini"}},
		{name: "eu-1", pool: "api", region: "eu", key: "sk-test-eu-00000000000000000002", models: []string{"decide-mini"}},
	}
	h := newHarness(t, opts{creds: creds})
	h.fp.SetDefault("sk-test-us-00000000000000000001", "", fp.Unauthorized())
	wantStatus(t, h.post(decision("api/decide-mini")), 503, "decisions_pool_unavailable")
	if n := h.hits("eu-1", fp.PathDecisions) + h.hits("eu-1", fp.PathModels); n != 0 {
		t.Errorf("the default region us reached eu-1 %d times", n)
	}
	r := h.post(decision("api/decide-mini"), RegionHeader, "eu")
	wantStatus(t, r, 200, "")
	if r.header.Get("X-Rotor-Credential") != "eu-1" {
		t.Errorf("served by %s", r.header.Get("X-Rotor-Credential"))
	}
	wantStatus(t, h.post(decision("api/decide-mini"), RegionHeader, "mars"), 400, "unknown_region")
}

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
	if n := h.fp.Hits(fp.PathModels) + h.fp.Hits(fp.PathDecisions); n != 0 {
		t.Errorf("provider touched %d times", n)
	}
	if n := len(h.rows()); n != 0 {
		t.Errorf("%d rows", n)
	}
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
	wantStatus(t, h.post(big), 503, "server_overloaded")
	wantStatus(t, h.post(decision("api/decide-mini")), 200, "")
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
	if resp.StatusCode != 405 {
		t.Errorf("GET = %d, want 405", resp.StatusCode)
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

package decisions

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
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
		t.Run(fmt.Sprintf("scoped=%v", tt.scoped), func(t *testing.T) {
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
		})
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

// countingTransport counts the bytes the route reads from the bodies of
// provider error answers to POST /v1/decisions.
type countingTransport struct {
	http.RoundTripper
	read atomic.Int64
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.RoundTripper.RoundTrip(req)
	if err == nil && resp.StatusCode >= 400 && req.URL.Path == fp.PathDecisions {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.read}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

// Spec: error bodies are read "only until ... 64 KiB arrive". The provider
// drips a 10 MiB error body without pauses long enough for the idle limit:
// the route reads exactly 64 KiB of it, then fails over. (Before, this test
// only bounded the time, and still passed with the cap raised to 64 MiB.)
func TestErrorBodyReadStopsAt64KiB(t *testing.T) {
	client := NewHTTPClient()
	ct := &countingTransport{RoundTripper: client.Transport}
	client.Transport = ct
	h := newHarness(t, opts{httpClient: client})
	h.fp.Script(h.keys["team-a"], "", fp.DripErrorBody(401, 10<<20))
	r := h.post(decision("api/decide-mini"))
	wantStatus(t, r, 200, "")
	if r.header.Get("X-Rotor-Credential") != "team-b" {
		t.Errorf("served by %s, want team-b after the 401", r.header.Get("X-Rotor-Credential"))
	}
	if n := ct.read.Load(); n != 64<<10 {
		t.Errorf("read %d bytes of the error body, want exactly 64 KiB", n)
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

// Issue 14, item 2: with model cooldown off, first_key_fallback on and
// every credential answering 429 rate_limit_exceeded with Retry-After: 30,
// one request made 20,711 provider calls and ended in 504: the fallback
// offered the first key again after every 429. It is given once per
// request, and only to a key the request has not sent to; then the route
// waits for the earliest release inside the deadline, else answers 429
// rate_limit_exceeded with that release as Retry-After.
func TestFirstKeyFallbackRetryStormEndsIn429(t *testing.T) {
	h := newHarness(t, opts{firstKeyFallback: true})
	for _, name := range []string{"team-a", "team-b"} {
		h.fp.SetDefault(h.keys[name], "", fp.RateLimited("30"))
	}
	// First request: a and b answer 429 (no fallback: a was sent to),
	// the route waits the 30 s release, a and b answer 429 again, and the
	// next release (30 s) no longer falls inside the 60 s deadline.
	done := make(chan reply, 1)
	go func() { done <- h.post(decision("api/decide-mini")) }()
	h.waitTimers(1)
	h.clk.Advance(30 * time.Second)
	r := <-done
	wantStatus(t, r, 429, "rate_limit_exceeded")
	if r.header.Get("Retry-After") != "30" || r.err.RetryAfterMS != 30000 {
		t.Errorf("Retry-After %q, retry_after_ms %d; want 30 and 30000", r.header.Get("Retry-After"), r.err.RetryAfterMS)
	}
	if n := h.fp.Hits(fp.PathDecisions); n != 4 {
		t.Errorf("first request: %d provider calls, want 4 (each key twice, one wait between)", n)
	}
	if row := h.row(r.header.Get("X-Request-ID")); row.Attempts != 4 || row.Status != 429 {
		t.Errorf("row = %+v, want 4 attempts and status 429", row)
	}

	// A request that finds every key resting: the fallback sends to a
	// once; the next release (30 s) outlasts the 20 s deadline, so the
	// route answers 429 at once.
	h2 := newHarness(t, opts{firstKeyFallback: true, deadline: 20 * time.Second})
	for _, name := range []string{"team-a", "team-b"} {
		h2.fp.SetDefault(h2.keys[name], "", fp.RateLimited("30"))
	}
	wantStatus(t, h2.post(decision("api/decide-mini")), 429, "rate_limit_exceeded") // a, b: 429
	before := h2.fp.Hits(fp.PathDecisions)
	r = h2.post(decision("api/decide-mini"))
	wantStatus(t, r, 429, "rate_limit_exceeded")
	if n := h2.fp.Hits(fp.PathDecisions) - before; n != 1 || h2.hits("team-a", fp.PathDecisions) != 2 {
		t.Errorf("all resting: %d provider calls, want 1 (the first key, once)", n)
	}
	if r.header.Get("Retry-After") != "30" {
		t.Errorf("Retry-After %q, want 30", r.header.Get("Retry-After"))
	}
}

// Issue 14, item 3: a 404 is read by its structured error first (DESIGN,
// "Reading the spec"): codes model_not_found and unknown_url, or no code
// and no param with a message naming the model or endpoint, mean the
// endpoint is unsupported (failover, cached five minutes); a param other
// than model, or any other code, is about the request's content (returned,
// no failover, no cache), whatever its message names. Before, a
// file_not_found whose message named the model failed over and blocked a
// healthy credential for five minutes for every caller.
func TestNotFoundClassifiedByStructuredErrorFirst(t *testing.T) {
	for _, tt := range []struct {
		name        string
		err         string // the provider's error object
		unsupported bool
	}{
		{"file_not_found naming the model", `{"message":"No such file for decide-mini on /v1/decisions: file-abc","type":"invalid_request_error","code":"file_not_found","param":"input"}`, false},
		{"other code naming the model, no param", `{"message":"previous decision of decide-mini not found at /v1/decisions endpoint","type":"invalid_request_error","code":"previous_response_not_found","param":null}`, false},
		{"param input, no code, naming the model", `{"message":"input for decide-mini not found","type":"invalid_request_error","code":null,"param":"input"}`, false},
		{"no code, no param, naming nothing", `{"message":"No such object","type":"invalid_request_error","code":null,"param":null}`, false},
		{"model_not_found", `{"message":"no such model","type":"invalid_request_error","code":"model_not_found","param":null}`, true},
		{"unknown_url", `{"message":"Unknown request URL","type":"invalid_request_error","code":"unknown_url","param":null}`, true},
		{"param model, no code", `{"message":"not found","type":"invalid_request_error","code":null,"param":"model"}`, true},
		{"no code, no param, naming the endpoint", `{"message":"Invalid URL (POST /v1/decisions)","type":"invalid_request_error","code":null,"param":null}`, true},
		{"no code, no param, naming the model", "{\"message\":\"The model `decide-mini` does not exist\",\"type\":\"invalid_request_error\",\"code\":null,\"param\":null}", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, opts{})
			h.fp.Script(h.keys["team-a"], "decide-mini", fp.Status(404, `{"error":`+tt.err+`}`, http.Header{"Content-Type": {"application/json"}}))
			r := h.post(decision("api/decide-mini"))
			again := h.post(decision("api/decide-mini"))
			if tt.unsupported {
				wantStatus(t, r, 200, "")
				if r.header.Get("X-Rotor-Credential") != "team-b" || again.header.Get("X-Rotor-Credential") != "team-b" {
					t.Errorf("served by %s then %s, want team-b twice (failover, then cached)", r.header.Get("X-Rotor-Credential"), again.header.Get("X-Rotor-Credential"))
				}
				if n := h.hits("team-a", fp.PathDecisions); n != 1 {
					t.Errorf("team-a decisions = %d, want 1 (cached as unsupported)", n)
				}
				return
			}
			wantStatus(t, r, 404, "")
			if n := h.hits("team-b", fp.PathDecisions); n != 0 {
				t.Errorf("a 404 about content failed over to team-b")
			}
			wantStatus(t, again, 200, "")
			if again.header.Get("X-Rotor-Credential") != "team-a" {
				t.Errorf("next request served by %s, want team-a (not cached)", again.header.Get("X-Rotor-Credential"))
			}
		})
	}
}

// Issue 14, item 4: 503 decisions_pool_unavailable only when every
// credential was rejected with 401 or 403. DESIGN ("HTTP") rules on the
// mixes: an unsupported answer (405, 501, an unsupported 404) does not
// count either way, a permanent quota rejection joins the 503, a temporary
// 429 gives the 429, an unclassified error that ended the request passes
// through, and a credential whose catalog could not be fetched was not
// rejected (502 catalog_unavailable: a retry may succeed).
func TestPoolUnavailableOnlyWhenEveryCredentialRejected(t *testing.T) {
	for _, tt := range []struct {
		name         string
		b            fp.Step // team-b's answer at inference
		bCatalog     fp.Step // team-b's catalog answer, when not OK
		status       int
		code, header string
	}{
		{"401 and 403", fp.Forbidden(), fp.Step{}, 503, "decisions_pool_unavailable", ""},
		{"401 and 405", fp.MethodNotAllowed(), fp.Step{}, 503, "decisions_pool_unavailable", ""},
		{"401 and 501", fp.NotImplemented(), fp.Step{}, 503, "decisions_pool_unavailable", ""},
		{"401 and an unsupported 404", fp.NotFoundModel(), fp.Step{}, 503, "decisions_pool_unavailable", ""},
		{"401 and permanent quota", fp.InsufficientQuota(), fp.Step{}, 503, "decisions_pool_unavailable", ""},
		{"401 and a temporary 429", fp.RateLimited("120"), fp.Step{}, 429, "rate_limit_exceeded", "120"},
		{"401 and an unclassified 500", fp.ServerError(), fp.Step{}, 500, "", ""},
		{"401 and a catalog that failed", fp.OK(), fp.ServerError(), 502, "catalog_unavailable", ""},
		{"401 at the catalog and a catalog that failed", fp.OK(), fp.ServerError(), 502, "catalog_unavailable", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, opts{deadline: 10 * time.Second})
			if strings.HasPrefix(tt.name, "401 at the catalog") {
				h.fp.SetCatalogDefault(h.keys["team-a"], fp.Unauthorized())
			} else {
				h.fp.SetDefault(h.keys["team-a"], "", fp.Unauthorized())
			}
			h.fp.SetDefault(h.keys["team-b"], "", tt.b)
			if tt.bCatalog.String() != "" {
				h.fp.SetCatalogDefault(h.keys["team-b"], tt.bCatalog)
			}
			r := h.post(decision("api/decide-mini"))
			wantStatus(t, r, tt.status, tt.code)
			if tt.header != "" && r.header.Get("Retry-After") != tt.header {
				t.Errorf("Retry-After %q, want %s", r.header.Get("Retry-After"), tt.header)
			}
		})
	}
}

// settleFails is a ledger whose settlements fail: the provider has run the
// request but its row cannot be written.
type settleFails struct{ Ledger }

func (settleFails) Settle(context.Context, ledger.Settlement) error { return ledger.ErrUnavailable }

// Issue 14, item 7: a 502, 503 or 504 answered after a provider call may
// have run carries x-should-retry: false, since an OpenAI SDK retries them
// and pays twice (DESIGN, retry hints); so does 503 no_credentials, which
// a retry cannot change. The same statuses when no call may have run
// (nothing sent, or only classified rejections, which no provider bills)
// keep the client's retry.
func TestNoRetryHintAfterAProviderCallMayHaveRun(t *testing.T) {
	for _, tt := range []struct {
		name   string
		o      opts
		step   fp.Step
		model  string
		status int
		code   string
		never  bool
	}{
		{"upstream_error", opts{}, fp.ResetAfterRead(), "api/decide-mini", 502, "upstream_error", true},
		{"deadline_exceeded", opts{deadline: 2 * time.Second}, fp.Stall(), "api/decide-mini", 504, "deadline_exceeded", true},
		{"provider 503 passed through", opts{}, fp.Overloaded(""), "api/decide-mini", 503, "overloaded", true},
		{"ledger_unavailable at settlement", opts{wrapLedger: func(l Ledger) Ledger { return settleFails{l} }}, fp.OK(), "api/decide-mini", 503, "ledger_unavailable", true},
		{"no_credentials", opts{}, fp.OK(), "zdr/decide-mini", 503, "no_credentials", true},
		{"catalog_unavailable, nothing sent", opts{}, fp.OK(), "api/decide-mini", 502, "catalog_unavailable", false},
		{"catalog_unavailable after a 401, which ran nothing", opts{}, fp.Unauthorized(), "api/decide-mini", 502, "catalog_unavailable", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.o)
			if tt.code == "deadline_exceeded" {
				// Warm catalogs: the deadline must cut the call, not
				// discovery on a loaded machine.
				wantStatus(t, h.post(decision(tt.model)), 200, "")
			}
			h.fp.Script(h.keys["team-a"], "", tt.step)
			if tt.code == "catalog_unavailable" {
				h.fp.SetCatalogDefault(h.keys["team-b"], fp.ServerError())
				if !tt.never && tt.step.String() == "OK" {
					h.fp.SetCatalogDefault(h.keys["team-a"], fp.ServerError())
				}
			}
			r := h.post(decision(tt.model))
			wantStatus(t, r, tt.status, tt.code)
			if got := r.header.Get("x-should-retry") == "false"; got != tt.never {
				t.Errorf("x-should-retry: false is %v, want %v", got, tt.never)
			}
		})
	}
}

// Spec (model-cooldown): "At capacity, live observations are never
// evicted ... During that interval new admission fails closed with 503 and
// bounded Retry-After." At the route, the pool's CapacityError goes through
// the route's one error table: the store holds one observation (team-a on
// decide-large); team-a's throttle on decide-mini cannot be kept, so the
// failover to a healthy team-b fails closed with 503
// model_cooldown_capacity and the dropped observation's TTL as
// Retry-After, and no credential was marked to rest by it.
func TestCooldownStoreFullGives503ModelCooldownCapacity(t *testing.T) {
	h := newHarness(t, opts{modelCooldown: true, storeLimit: 1})
	h.fp.Script(h.keys["team-a"], "decide-large", fp.RateLimited("600"))
	h.fp.Script(h.keys["team-a"], "decide-mini", fp.RateLimited("90"))
	r := h.post(decision("api/decide-large"))
	wantStatus(t, r, 200, "")
	if r.header.Get("X-Rotor-Credential") != "team-b" {
		t.Fatalf("decide-large served by %s, want team-b", r.header.Get("X-Rotor-Credential"))
	}
	r = h.post(decision("api/decide-mini"))
	wantStatus(t, r, 503, "model_cooldown_capacity")
	if r.header.Get("Retry-After") != "90" || r.err.RetryAfterMS != 90000 {
		t.Errorf("Retry-After %q, retry_after_ms %d; want 90 and 90000 (the dropped observation's TTL)", r.header.Get("Retry-After"), r.err.RetryAfterMS)
	}
	if r.header.Get("x-should-retry") != "" {
		t.Error("capacity after a 429 carries x-should-retry: the 429 ran nothing")
	}
	if n := h.hits("team-b", fp.PathDecisions); n != 1 {
		t.Errorf("team-b decisions = %d, want 1: admission failed closed", n)
	}
	// The guard ends with the dropped TTL; the kept observation still
	// holds team-a off decide-large.
	h.clk.Advance(90 * time.Second)
	if r := h.post(decision("api/decide-mini")); r.status != 200 || r.header.Get("X-Rotor-Credential") != "team-a" {
		t.Errorf("after the guard: %d by %s, want 200 by team-a", r.status, r.header.Get("X-Rotor-Credential"))
	}
	if r := h.post(decision("api/decide-large")); r.header.Get("X-Rotor-Credential") != "team-b" {
		t.Errorf("decide-large served by %s, want team-b (the live observation was never evicted)", r.header.Get("X-Rotor-Credential"))
	}
}

package decisions

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/internal/testutil"
	"github.com/rotorhq/rotor/ledger"
	"github.com/rotorhq/rotor/pool"
)

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
			t.Fatalf("rows = %+v, want one row with 2 attempts and status 503", rows)
		}
		// Both calls were refused: 0 tokens, as for a refusal passed
		// through; the cost stays unknown, as every Decisions cost does.
		if row := rows[0]; row.InputTokens != ledger.Known(0) || row.OutputTokens != ledger.Known(0) || row.CostMicros.Known {
			t.Errorf("row tokens %+v/%+v cost %+v, want 0 tokens and unknown cost", row.InputTokens, row.OutputTokens, row.CostMicros)
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
	// A catalog probe refused for permanent quota rejects the credential
	// as inference would, never counted as a catalog that could not be
	// fetched (502 catalog_unavailable).
	t.Run("permanent quota at catalog discovery", func(t *testing.T) {
		for _, tt := range []struct {
			name   string
			a      fp.Step
			status int
			code   string
		}{
			{"with 401", fp.Unauthorized(), 503, "decisions_pool_unavailable"},
			{"pool-wide", fp.InsufficientQuota(), 429, "insufficient_quota"},
		} {
			h := newHarness(t, opts{})
			h.fp.SetCatalogDefault(h.keys["team-a"], tt.a)
			h.fp.SetCatalogDefault(h.keys["team-b"], fp.InsufficientQuota())
			wantStatus(t, h.post(decision("api/decide-mini")), tt.status, tt.code)
			if n := h.fp.Hits(fp.PathDecisions); n != 0 {
				t.Errorf("%s: %d decisions sent by rejected credentials", tt.name, n)
			}
		}
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
	// A retry finds every quota spent again: an SDK is told not to
	// (openai-go retried it, waiting out the pool's 60 s rest, and paid
	// another call).
	if r.header.Get("x-should-retry") != "false" {
		t.Errorf("x-should-retry %q, want false", r.header.Get("x-should-retry"))
	}
}

// DESIGN ("HTTP"): permanent quota is the pool's answer only when every
// credential that could serve was rejected; a credential whose catalog
// could not be fetched was not, and a retry may succeed: 502
// catalog_unavailable, not 429 insufficient_quota.
func TestPermanentQuotaBesideAFailedCatalogIsCatalogUnavailable(t *testing.T) {
	h := newHarness(t, opts{deadline: 10 * time.Second})
	h.fp.SetDefault(h.keys["team-a"], "", fp.InsufficientQuota())
	h.fp.SetCatalogDefault(h.keys["team-b"], fp.ServerError())
	wantStatus(t, h.post(decision("api/decide-mini")), 502, "catalog_unavailable")
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

// The wait for a release must fit what is left of the request on its
// context too, not only on the route's clock: a request whose context ends
// sooner (its deadline ran from before the body was read and admitted)
// answers 429 with the cooldown at once rather than sleeping into a 504.
func TestCooldownOutlastingTheContextDeadlineGives429(t *testing.T) {
	h := newHarness(t, opts{creds: defaultCreds()[:1]})
	h.fp.SetDefault(h.keys["team-a"], "", fp.RateLimited("30"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rec, _ := h.serveRecorded(ctx, decision("api/decide-mini"))
	if rec.Code != 429 || rec.Header().Get("Retry-After") != "30" {
		t.Errorf("answer %d Retry-After %q, want 429 with 30\n%s", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
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
	r := h.postAcrossWait(decision("api/decide-mini"), 30*time.Second)
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

// refuseDial fails, as a refused connection (nothing sent), every
// inference POST made with key while on is set; catalogs still load.
type refuseDial struct {
	http.RoundTripper
	key     string
	on      atomic.Bool
	refused atomic.Int32
}

func (rd *refuseDial) RoundTrip(r *http.Request) (*http.Response, error) {
	if rd.on.Load() && r.Method == http.MethodPost && r.Header.Get("Authorization") == "Bearer "+rd.key {
		rd.refused.Add(1)
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	}
	return rd.RoundTripper.RoundTrip(r)
}

// The legacy first-key fallback is offered once per request, also when
// the key it offered could not be reached: a request that finds every key
// resting sends to the first key once, and when that connection is
// refused it does not take the fallback again for the next key (the
// rule is one fallback call per request while every key rests), but
// answers 429 with the earliest release.
func TestFirstKeyFallbackOncePerRequestEvenWhenUnreachable(t *testing.T) {
	client := NewHTTPClient()
	rd := &refuseDial{RoundTripper: client.Transport}
	client.Transport = rd
	h := newHarness(t, opts{firstKeyFallback: true, deadline: 20 * time.Second, httpClient: client})
	rd.key = h.keys["team-a"]
	for _, name := range []string{"team-a", "team-b"} {
		h.fp.SetDefault(h.keys[name], "", fp.RateLimited("30"))
	}
	wantStatus(t, h.post(decision("api/decide-mini")), 429, "rate_limit_exceeded") // a, b: 429; both rest 30 s
	rd.on.Store(true)
	b := h.hits("team-b", fp.PathDecisions)
	r := h.post(decision("api/decide-mini"))
	wantStatus(t, r, 429, "rate_limit_exceeded")
	if n := h.hits("team-b", fp.PathDecisions) - b; n != 0 {
		t.Errorf("team-b got %d calls while resting, want 0: the fallback went to team-a, once", n)
	}
	if n := rd.refused.Load(); n != 1 {
		t.Errorf("%d refused calls to team-a, want 1 (the fallback, once)", n)
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
		// Neither the model nor the path, but the word endpoint, in any case:
		// the endpoint is what is missing, not the request's content.
		{"no code, no param, saying endpoint", `{"message":"Endpoint not available for this account","type":"invalid_request_error","code":null,"param":null}`, true},
		// An error object that says nothing is no structured error.
		{"empty error object", `{}`, true},
		{"error object of nulls and a type", `{"message":null,"type":"invalid_request_error","code":null,"param":null}`, true},
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

// A success of a call sent before another call with the same credential
// and model was throttled (a long generation in flight through the
// throttle) does not end that cooldown: it says nothing of the quota
// since. The next request goes to the other credential, not back to the
// throttled one for another 429.
func TestInFlightSuccessDoesNotEndALaterThrottlesCooldown(t *testing.T) {
	h := newHarness(t, opts{modelCooldown: true})
	ready := make(chan struct{})
	h.fp.Script(h.keys["team-a"], "decide-mini", fp.Await(ready, fp.OK()), fp.RateLimited("30"))
	long := make(chan reply, 1)
	go func() { long <- h.post(decision("api/decide-mini")) }()
	testutil.WaitUntil(t, "the long call at the provider", func() bool { return h.hits("team-a", fp.PathDecisions) >= 1 })
	h.clk.Advance(time.Second)
	wantStatus(t, h.post(decision("api/decide-mini")), 200, "") // team-a 429, then team-b
	if h.hits("team-a", fp.PathDecisions) != 2 || h.hits("team-b", fp.PathDecisions) != 1 {
		t.Fatalf("hits a=%d b=%d, want the second request throttled on team-a and served by team-b",
			h.hits("team-a", fp.PathDecisions), h.hits("team-b", fp.PathDecisions))
	}
	close(ready)
	wantStatus(t, <-long, 200, "")
	wantStatus(t, h.post(decision("api/decide-mini")), 200, "")
	if a, b := h.hits("team-a", fp.PathDecisions), h.hits("team-b", fp.PathDecisions); a != 2 || b != 2 {
		t.Errorf("after the long call's success: hits a=%d b=%d, want team-a still cooling (2, 2)", a, b)
	}
}

// README: "Where a wait is advised, Retry-After, retry-after-ms and
// error.retry_after_ms are set." An unclassified 429 passed through (a
// provider's tokens-per-minute limit with no code) keeps the provider's
// advice, so a client's own retry waits as the provider asked instead of
// an SDK's short backoff; without advice none is made up.
func TestUnclassified429PassesOnTheProvidersWait(t *testing.T) {
	body := `{"error":{"message":"Request too large for gpt-test on tokens per min","type":"tokens","param":null,"code":null}}`
	for _, tt := range []struct {
		name       string
		header     map[string]string
		wantHeader string
		wantMS     string
	}{
		{"Retry-After", map[string]string{"Retry-After": "7"}, "7", "7000"},
		{"retry-after-ms first", map[string]string{"Retry-After": "9", "retry-after-ms": "1500"}, "2", "1500"},
		{"no advice", nil, "", ""},
		// Advice of 0 still advises a wait: Retry-After at least 1.
		{"zero advice", map[string]string{"Retry-After": "0"}, "1", "1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, u := newOpenAIHarness(t, opts{})
			hdr := map[string]string{"Content-Type": "application/json"}
			for k, v := range tt.header {
				hdr[k] = v
			}
			u.script(keyA, KindChat.Path, upReply{status: 429, header: hdr, body: body})
			r := h.do(context.Background(), KindChat.Path, `{"model":"api/gpt-test","messages":[]}`)
			wantStatus(t, r, 429, "")
			if got := r.header.Get("Retry-After"); got != tt.wantHeader {
				t.Errorf("Retry-After = %q, want %q", got, tt.wantHeader)
			}
			if got := r.header.Get("retry-after-ms"); got != tt.wantMS {
				t.Errorf("retry-after-ms = %q, want %q", got, tt.wantMS)
			}
			var e struct {
				Error struct {
					Type         string          `json:"type"`
					RetryAfterMS json.RawMessage `json:"retry_after_ms"`
				} `json:"error"`
			}
			json.Unmarshal(r.body, &e)
			if got := string(e.Error.RetryAfterMS); got != tt.wantMS && !(tt.wantMS == "" && (got == "" || got == "null")) {
				t.Errorf("error.retry_after_ms = %s, want %q", got, tt.wantMS)
			}
			if e.Error.Type != "tokens" {
				t.Errorf("error.type = %q, want the provider's tokens", e.Error.Type)
			}
			if n := len(u.requests()); n != 1 {
				t.Errorf("%d provider calls, want 1 (an unclassified 429 is not replayed)", n)
			}
		})
	}
}

// DESIGN ("HTTP"): a credential whose provider could not be reached was
// not rejected, and a retry may succeed: a 401 on one credential beside a
// dial failure on the other (its catalog fresh) is 502 upstream_error,
// never 503 decisions_pool_unavailable, which tells a client not to retry.
func TestAuthRejectionBesideAnUnreachableProviderIsNot503(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			w.Header().Set("Content-Type", "application/json")
			w.Write([]byte(`{"data":[{"id":"decide-mini"}]}`))
			return
		}
		http.Error(w, "not expected", http.StatusTeapot)
	}))
	creds := defaultCreds()
	creds[1].baseURL = srv.URL
	creds[1].models = []string{"decide-mini"}
	h := newHarness(t, opts{creds: creds})
	wantStatus(t, h.post(decision("api/decide-mini")), 200, "") // both catalogs now fresh
	srv.Close()                                                 // team-b's provider cannot be reached
	h.fp.SetDefault(h.keys["team-a"], "", fp.Unauthorized())
	wantStatus(t, h.post(decision("api/decide-mini")), 502, "upstream_error")
}

// A provider that answers rate_limit_exceeded advising a millisecond
// again and again got a call every millisecond until the deadline (60 s:
// tens of thousands of calls for one request). Each credential takes at
// most maxThrottles temporary 429s in one request; then, with nothing
// else left, the caller gets 429 with the cooldown, as when it outlasts
// the deadline.
func TestRepeatedRateLimitsEndIn429NotAStorm(t *testing.T) {
	body := `{"error":{"message":"slow down","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	tiny := fp.Status(429, body, http.Header{"Retry-After-Ms": {"1"}, "Content-Type": {"application/json"}})
	for _, c := range []struct {
		n      int
		scoped bool
		code   string
	}{{1, true, "model_cooldown"}, {2, true, "model_cooldown"}, {1, false, "rate_limit_exceeded"}, {2, false, "rate_limit_exceeded"}} {
		n := c.n
		h := newHarness(t, opts{creds: defaultCreds()[:n], modelCooldown: c.scoped})
		for _, k := range h.keys {
			h.fp.SetDefault(k, "", tiny)
		}
		// Let every wait for a release run out until the request ends;
		// a storm shows as calls past the cap.
		r := h.postRunningWaitsOut(decision("api/decide-mini"), func() {
			if calls := h.fp.Hits(fp.PathDecisions); calls > 10*maxThrottles*n {
				h.clk.Advance(time.Hour) // end the storm the test found
				t.Fatalf("%d credentials: %d provider calls and still going", n, calls)
			}
		})
		wantStatus(t, r, 429, c.code)
		if got := r.header.Get("Retry-After"); got != "1" {
			t.Errorf("%d credentials: Retry-After %q, want 1", n, got)
		}
		if calls := h.fp.Hits(fp.PathDecisions); calls != maxThrottles*n {
			t.Errorf("%d credentials: %d provider calls, want %d", n, calls, maxThrottles*n)
		}
		if rows := h.rows(); len(rows) != 1 || rows[0].Attempts != maxThrottles*n {
			t.Errorf("%d credentials: rows %+v, want one row with %d attempts", n, rows, maxThrottles*n)
		}
	}
}

// A credential that took its maxThrottles rate limits stays out of the
// request even once its rest is over; when the credential tried after it
// (which rested longer) is rejected, the caller gets 429 advising the
// least wait, a millisecond (Retry-After 1), not the rest just ended.
func TestCappedCredentialWhoseRestEndedAdvisesTheLeastWait(t *testing.T) {
	body := `{"error":{"message":"slow down","type":"requests","param":null,"code":"rate_limit_exceeded"}}`
	tiny := fp.Status(429, body, http.Header{"Retry-After-Ms": {"1"}, "Content-Type": {"application/json"}})
	for _, c := range []struct {
		scoped bool
		code   string
	}{{true, "model_cooldown"}, {false, "rate_limit_exceeded"}} {
		h := newHarness(t, opts{modelCooldown: c.scoped})
		h.fp.SetDefault(h.keys["team-a"], "", tiny)
		h.fp.SetDefault(h.keys["team-b"], "", fp.Unauthorized())
		// team-b rests 50 ms, so team-a takes its three rate limits first.
		pl := h.pools["api"]
		pl.Record("team-b", pool.Observation{Scope: pool.Scope{Model: "decide-mini", QuotaBucket: pl.BucketFor("decide-mini")},
			Status: 429, RetryAfter: 0.05, HasRetryAfter: true})
		r := h.postRunningWaitsOut(decision("api/decide-mini"), func() {})
		wantStatus(t, r, 429, c.code)
		if got, ms := r.header.Get("Retry-After"), r.header.Get("retry-after-ms"); got != "1" || ms != "1" {
			t.Errorf("scoped %v: Retry-After %q, retry-after-ms %q; want 1 and 1", c.scoped, got, ms)
		}
		if a, b := h.hits("team-a", fp.PathDecisions), h.hits("team-b", fp.PathDecisions); a != maxThrottles || b != 1 {
			t.Errorf("scoped %v: %d calls with team-a and %d with team-b, want %d and 1", c.scoped, a, b, maxThrottles)
		}
	}
}

// The first-key fallback's call is a success: that key's rest is over (its
// provider answered), for a buffered answer and for a stream alike. The
// pool no longer holds it resting, so /v1/status stops listing its
// cooldown and the next request takes it as any available key.
func TestFirstKeyFallbackSuccessEndsTheKeysRest(t *testing.T) {
	for _, c := range []struct {
		name, path, body string
		reply            upReply
	}{
		{"buffered", KindChat.Path, `{"model":"api/gpt-test","messages":[]}`, upReply{status: 200, body: chatAnswer}},
		{"stream", KindChat.Path, `{"model":"api/gpt-test","stream":true,"messages":[]}`, upReply{status: 200, events: chatEvents}},
	} {
		h, u := newOpenAIHarness(t, opts{firstKeyFallback: true})
		u.script(keyA, c.path, c.reply)
		pl := h.pools["api"]
		scope := pool.Scope{Model: "gpt-test", QuotaBucket: pl.BucketFor("gpt-test")}
		for _, name := range []string{"team-a", "team-b"} {
			pl.Record(name, pool.Observation{Scope: scope, Status: 429, RetryAfter: 600, HasRetryAfter: true})
		}
		r := h.do(context.Background(), c.path, c.body)
		wantStatus(t, r, 200, "")
		if got := r.header.Get("X-Rotor-Credential"); got != "team-a" {
			t.Fatalf("%s: served by %q, want the first key team-a", c.name, got)
		}
		if d, resting := pl.NextRelease(scope, []string{"team-a"}); resting {
			t.Errorf("%s: team-a still rests %v after its provider answered", c.name, d)
		}
	}
}

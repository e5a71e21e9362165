package decisions

import (
	"context"
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/ledger"
)

// spec/decisions-api.md: a credential rejected with a permanent quota 429
// "is not sent again for that request", also when its quota answer
// carries a short Retry-After and the request goes on to wait for another
// credential's cooldown (the pool's rest of it ends first).
func TestPermanentQuotaNotSentAgainAfterAWait(t *testing.T) {
	h := newHarness(t, opts{})
	quota := fp.Status(429, `{"error":{"message":"You exceeded your current quota","type":"insufficient_quota","code":"insufficient_quota","param":null}}`,
		http.Header{"Content-Type": {"application/json"}, "Retry-After": {"1"}})
	h.fp.SetDefault(h.keys["team-a"], "", quota)
	h.fp.Script(h.keys["team-b"], "", fp.RateLimited("5"))
	done := make(chan reply, 1)
	go func() { done <- h.post(decision("api/decide-mini")) }()
	var r reply
	for deadline := time.Now().Add(30 * time.Second); ; {
		select {
		case r = <-done:
		case <-time.After(10 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("no answer in 30 s")
			}
			if h.clk.Timers() > 0 { // the route waits on a cooldown
				h.clk.Advance(time.Second)
			}
			continue
		}
		break
	}
	wantStatus(t, r, 200, "")
	if n := h.hits("team-a", fp.PathDecisions); n != 1 {
		t.Errorf("team-a (permanent quota) got %d decisions in one request, want 1", n)
	}
}

// spec/decisions-api.md: error bodies are read "until 5 seconds pass
// without data": an idle limit, reset by each chunk, not a bound on the
// whole read. A rate_limit_exceeded body dripped in 40 chunks 50 ms
// apart (2 s in all, twice the idle limit of 1 s here, each gap a
// twentieth of it) is read whole, classified as a rate limit, and fails
// over.
func TestErrorBodyIdleLimitResetsOnData(t *testing.T) {
	h := newHarness(t, opts{errorIdle: time.Second})
	h.fp.Script(h.keys["team-a"], "", fp.Drip(429, 1000, 25, 50*time.Millisecond))
	r := h.post(decision("api/decide-mini"))
	wantStatus(t, r, 200, "")
	if got := r.header.Get("X-Rotor-Credential"); got != "team-b" {
		t.Errorf("served by %s, want team-b (the dripped 429 read whole, then failover)", got)
	}
}

// spec/decisions-api.md: a credential is eligible when "its discovered
// catalog includes the model": one profiled for decide-mini whose catalog
// does not list it is not (the profile alone does not make it so).
func TestCatalogMustListTheModel(t *testing.T) {
	c := cred{name: "only", pool: "api", key: "sk-test-only-000000000000000000",
		models: []string{"decide-large"}, profiled: []string{"decide-mini", "decide-large"}}
	h := newHarness(t, opts{creds: []cred{c}})
	wantStatus(t, h.post(decision("api/decide-mini")), 404, "model_not_available")
	if n := h.fp.Hits(fp.PathDecisions); n != 0 {
		t.Errorf("a credential whose catalog lacks the model got %d decisions", n)
	}
}

// A request stays in its region also when another region's catalog is
// warm: after an eu request warmed eu-1, a default-region (us) request
// whose us credential is rejected never reaches eu-1.
func TestRegionHoldsWithAWarmForeignCatalog(t *testing.T) {
	creds := []cred{
		{name: "us-1", pool: "api", region: "us", key: "sk-test-us-00000000000000000001", models: []string{"decide-mini"}},
		{name: "eu-1", pool: "api", region: "eu", key: "sk-test-eu-00000000000000000002", models: []string{"decide-mini"}},
	}
	h := newHarness(t, opts{creds: creds})
	wantStatus(t, h.post(decision("api/decide-mini"), RegionHeader, "eu"), 200, "")
	h.fp.SetDefault("sk-test-us-00000000000000000001", "", fp.Unauthorized())
	before := h.hits("eu-1", fp.PathDecisions)
	r := h.post(decision("api/decide-mini"))
	if got := r.header.Get("X-Rotor-Credential"); got == "eu-1" || h.hits("eu-1", fp.PathDecisions) != before {
		t.Errorf("a us request was served by %q (eu-1 decisions %d -> %d)", got, before, h.hits("eu-1", fp.PathDecisions))
	}
}

// spec/decisions-api.md: unsupported answers are cached "per credential,
// model, and endpoint": a 405 for team-a's chat completions of gpt-test
// leaves its Responses for the same model alone.
func TestUnsupportedCachedPerEndpoint(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	u.script(keyA, KindChat.Path, upReply{status: 405, body: `{"error":{"message":"not allowed","type":"invalid_request_error","param":null,"code":null}}`})
	u.script(keyB, KindChat.Path, upReply{status: 200, body: chatAnswer})
	u.script(keyA, KindResponses.Path, upReply{status: 200, body: responsesAnswer})
	if r := h.do(context.Background(), KindChat.Path, `{"model":"api/gpt-test","messages":[]}`); r.header.Get("X-Rotor-Credential") != "team-b" {
		t.Fatalf("chat after team-a's 405: %d by %q, want team-b", r.status, r.header.Get("X-Rotor-Credential"))
	}
	r := h.do(context.Background(), KindResponses.Path, `{"model":"api/gpt-test","input":"hi"}`)
	if r.status != 200 || r.header.Get("X-Rotor-Credential") != "team-a" {
		t.Errorf("Responses after team-a's chat 405: %d by %q, want 200 by team-a (unsupported is cached per endpoint)", r.status, r.header.Get("X-Rotor-Credential"))
	}
}

// countingTokens counts the uncached token lookups the route makes.
type countingTokens struct {
	*ledger.Store
	lookups atomic.Int64
}

func (c *countingTokens) LookupToken(ctx context.Context, hash [32]byte) (string, bool, error) {
	c.lookups.Add(1)
	return c.Store.LookupToken(ctx, hash)
}

// A refusal after admission (here every credential cooling: 429) makes no
// uncached token lookup: admission checked the token in its transaction,
// and a burst of 429s, when SDKs retry hardest, must not queue on the
// ledger's token lock. (A refusal before admission does look it up:
// TestRevokedTokenStopsOnRunningBridgeAndReportByClient in e2e.)
func TestRefusalAfterAdmissionDoesNotLookTheTokenUpAgain(t *testing.T) {
	var ct *countingTokens
	h := newHarness(t, opts{wrapLedger: func(l Ledger) Ledger {
		ct = &countingTokens{Store: l.(*ledger.Store)}
		return ct
	}})
	hash := sha256.Sum256([]byte("rtr_rules_token"))
	if err := h.store.AddClientToken(context.Background(), "ci", hash, false); err != nil {
		t.Fatal(err)
	}
	for _, k := range h.keys {
		h.fp.SetDefault(k, "", fp.RateLimited("3600"))
	}
	req := httptest.NewRequest(http.MethodPost, Endpoint, strings.NewReader(decision("api/decide-mini")))
	ctx, _ := httpx.WithAccessInfo(httpx.WithCaller(req.Context(), httpx.Caller{Label: "ci", TokenHash: hash, CheckToken: true}))
	rec := httptest.NewRecorder()
	h.router.ServeHTTP(rec, req.WithContext(ctx))
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("status %d %s, want 429", rec.Code, rec.Body)
	}
	if n := ct.lookups.Load(); n != 0 {
		t.Errorf("a 429 refused after admission made %d uncached token lookups, want 0", n)
	}
}

// A token the bridge let in from a list loaded a moment ago, revoked since,
// is refused at admission (which checks it in the reservation's
// transaction): 401 invalid_token, no provider call, no row.
func TestTokenRevokedAfterTheBridgeLetItInStopsAtAdmission(t *testing.T) {
	h := newHarness(t, opts{})
	hash := sha256.Sum256([]byte("rtr_revoked_token"))
	if err := h.store.AddClientToken(context.Background(), "ci", hash, false); err != nil {
		t.Fatal(err)
	}
	if err := h.store.RevokeClientToken(context.Background(), "ci"); err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, Endpoint, strings.NewReader(decision("api/decide-mini")))
	ctx, _ := httpx.WithAccessInfo(httpx.WithCaller(req.Context(), httpx.Caller{Label: "ci", TokenHash: hash, CheckToken: true}))
	rec := httptest.NewRecorder()
	h.router.ServeHTTP(rec, req.WithContext(ctx))
	if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), `"invalid_token"`) {
		t.Errorf("answer %d %s, want 401 invalid_token", rec.Code, rec.Body)
	}
	h.wantUntouched()
}

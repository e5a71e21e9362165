package decisions

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/internal/secret"
)

// serveRecorded serves one Decisions request straight to the route and
// returns the answer and what the route put in the request's access line.
func (h *harness) serveRecorded(ctx context.Context, body string) (*httptest.ResponseRecorder, *httpx.AccessInfo) {
	h.t.Helper()
	req := httptest.NewRequest(http.MethodPost, Endpoint, strings.NewReader(body))
	ctx, info := httpx.WithAccessInfo(httpx.WithCaller(ctx, httpx.Caller{Label: "test-client"}))
	rec := httptest.NewRecorder()
	h.router.ServeHTTP(rec, req.WithContext(ctx))
	return rec, info
}

// The access line (README, "Access log") names the credential that
// answered and its digest, the provider calls, and the tokens as the
// usage row recorded them; the answer names the credential and the calls
// (X-Rotor-Credential, X-Rotor-Attempts).
func TestAccessLineNamesTheAnsweringCredentialAndItsTokens(t *testing.T) {
	h := newHarness(t, opts{})
	h.fp.Script(h.keys["team-a"], "", fp.Unauthorized())
	rec, info := h.serveRecorded(context.Background(), decision("api/decide-mini"))
	if rec.Code != 200 {
		t.Fatalf("answer %d %s", rec.Code, rec.Body)
	}
	if got, n := rec.Header().Get("X-Rotor-Credential"), rec.Header().Get("X-Rotor-Attempts"); got != "team-b" || n != "2" {
		t.Errorf("X-Rotor-Credential %q, X-Rotor-Attempts %q; want team-b and 2", got, n)
	}
	sent := h.fp.RequestsFor(h.keys["team-b"], fp.PathDecisions)
	if len(sent) != 1 {
		t.Fatalf("%d calls with team-b, want 1", len(sent))
	}
	in, out, total := fp.ExpectedUsage(sent[0].Body)
	if info.Operation != "decisions" || info.Pool != "api" || info.Model != "decide-mini" || info.Region != "us" ||
		info.Credential != "team-b" || info.CredentialDigest != secret.New(h.keys["team-b"]).Fingerprint() || info.CredentialDigest == "" ||
		info.Attempts != 2 || !info.Ran || !info.Recorded || info.Code != "" {
		t.Errorf("access line: operation %q pool %q model %q region %q credential %q digest %q attempts %d ran %v recorded %v code %q",
			info.Operation, info.Pool, info.Model, info.Region, info.Credential, info.CredentialDigest, info.Attempts, info.Ran, info.Recorded, info.Code)
	}
	for name, c := range map[string]struct {
		got  *int64
		want int64
	}{"input": {info.InputTokens, in}, "output": {info.OutputTokens, out}, "total": {info.TotalTokens, total}} {
		if c.got == nil || *c.got != c.want {
			t.Errorf("%s tokens in the access line = %s, want %d", name, tokens(c.got), c.want)
		}
	}
	if strings.Contains(info.CredentialDigest, h.keys["team-b"]) {
		t.Errorf("the access line's digest holds the key")
	}
}

func tokens(n *int64) string {
	if n == nil {
		return "unknown"
	}
	return strconv.FormatInt(*n, 10)
}

// GET /v1/models in a region no credential serves is refused, and its
// access line carries the refusal's code.
func TestModelsInAnUnknownRegionNamesItsCodeInTheAccessLine(t *testing.T) {
	h := newHarness(t, opts{openAI: true})
	req := httptest.NewRequest(http.MethodGet, "/v1/models", nil)
	req.Header.Set(RegionHeader, "mars")
	ctx, info := httpx.WithAccessInfo(req.Context())
	rec := httptest.NewRecorder()
	h.router.OpenAI().ServeHTTP(rec, req.WithContext(ctx))
	if rec.Code != 400 || info.Code != "unknown_region" {
		t.Errorf("answer %d, access line code %q; want 400 and unknown_region", rec.Code, info.Code)
	}
}

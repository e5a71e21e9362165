package decisions

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"

	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/pool"
)

// Spec: "Provider rejection status and safe error code/type/parameter
// fields are preserved; error messages are sanitized." The provider's
// 404 file_not_found names param input_file_id: the caller gets all three.
func TestProviderRejectionKeepsParam(t *testing.T) {
	h := newHarness(t, opts{})
	h.fp.Script(h.keys["team-a"], "decide-mini", fp.NotFoundContent())
	r := h.post(decision("api/decide-mini"))
	wantStatus(t, r, 404, "file_not_found")
	if r.err.Type != "invalid_request_error" {
		t.Errorf("type = %q, want the provider's invalid_request_error", r.err.Type)
	}
	if r.err.Param == nil || *r.err.Param != "input_file_id" {
		t.Errorf("param = %v, want the provider's input_file_id: %s", r.err.Param, r.body)
	}
	if bytes.Contains(r.body, []byte("file-abc")) {
		t.Errorf("provider message passed through: %s", r.body)
	}
}

// Spec: "A credential rejected with 401, 403, or a permanent quota 429
// (insufficient_quota and similar) is rejected before inference, so the
// next eligible credential ... is tried." Each "similar" code rotor
// treats as permanent quota fails over; none is passed through as an
// unclassified 429.
func TestPermanentQuotaSimilarCodesFailOver(t *testing.T) {
	for _, code := range []string{"insufficient_quota", "quota_exceeded", "billing_hard_limit_reached", "billing_not_active", "account_quota_exceeded"} {
		t.Run(code, func(t *testing.T) {
			h := newHarness(t, opts{})
			body := fmt.Sprintf(`{"error":{"message":"quota gone","type":"requests","code":%q,"param":null}}`, code)
			h.fp.SetDefault(h.keys["team-a"], "", fp.Status(http.StatusTooManyRequests, body, http.Header{"Content-Type": {"application/json"}}))
			r := h.post(decision("api/decide-mini"))
			wantStatus(t, r, 200, "")
			if got := r.header.Get("X-Rotor-Credential"); got != "team-b" {
				t.Errorf("served by %q, want team-b after failover", got)
			}
			if n := h.hits("team-a", fp.PathDecisions); n != 1 {
				t.Errorf("team-a decisions = %d, want 1", n)
			}
		})
	}
}

// Spec: "safe error code/type/parameter fields are preserved": a field
// that carries the credential's key is not safe, even when it looks like
// an identifier (the key matches the identifier pattern).
func TestProviderErrorFieldsNeverCarryTheKey(t *testing.T) {
	h := newHarness(t, opts{creds: defaultCreds()[:1]})
	key := h.keys["team-a"]
	body := fmt.Sprintf(`{"error":{"message":"bad","type":%q,"code":%q,"param":%q}}`, key, key, key)
	h.fp.Script(h.keys["team-a"], "", fp.Status(http.StatusBadRequest, body, http.Header{"Content-Type": {"application/json"}}))
	r := h.post(decision("api/decide-mini"))
	if r.status != 400 {
		t.Fatalf("status %d, want the provider's 400: %s", r.status, r.body)
	}
	if bytes.Contains(r.body, []byte(key)) || bytes.Contains(r.body, []byte("sk-test")) {
		t.Errorf("answer carries the key: %s", r.body)
	}
}

// Spec (model-cooldown): "During scoped selection, catalog probes carry no
// model quota evidence: only genuine auth rejection can cool every model
// from that probe", with the validation TTL as its fallback; "Forward ...
// genuine credential-wide auth evidence ... to recording." A 401 at
// catalog discovery reaches the pool: the credential rests for every model
// (both paths), so a catalog that answers again within the rest does not
// put it back into service.
func TestCatalogAuthRejectionIsRecordedInThePool(t *testing.T) {
	for _, scoped := range []bool{false, true} {
		t.Run(fmt.Sprintf("scoped=%v", scoped), func(t *testing.T) {
			h := newHarness(t, opts{modelCooldown: scoped})
			h.fp.ScriptCatalog(h.keys["team-b"], fp.Unauthorized())
			wantStatus(t, h.post(decision("api/decide-mini")), 200, "")
			pl := h.pools["api"]
			for _, model := range []string{"decide-mini", "decide-large", ""} {
				s := pool.Scope{Model: model, QuotaBucket: pl.BucketFor(model)}
				if got := pl.Available(s, []string{"team-b"}); len(got) != 0 {
					t.Errorf("after a catalog 401, team-b is available for %q: %v", model, got)
				}
			}
			// team-a is throttled: discovery fetches team-b's catalog
			// again, which now answers, but team-b still rests.
			h.fp.Script(h.keys["team-a"], "decide-mini", fp.RateLimited("600"))
			r := h.post(decision("api/decide-mini"))
			if got := r.header.Get("X-Rotor-Credential"); got == "team-b" {
				t.Errorf("team-b served within its auth rest after a catalog 401")
			}
		})
	}
}

package decisions

import (
	"strconv"
	"strings"
	"testing"
	"time"

	fp "github.com/rotorhq/rotor/internal/fakeprovider"
)

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

// Spec (decisions-api.md): "Confirmed temporary rate_limit_exceeded 429
// responses use Retry-After and shared backoff"; DESIGN: the route "waits
// for the earliest release when it falls inside the remaining deadline".
// A credential whose catalog listed the model stays eligible after the
// wait even if its catalog went stale meanwhile: the request must not end
// in 404 model_not_available while that credential can serve it.
func TestCatalogGoingStaleDuringACooldownWaitKeepsTheCredential(t *testing.T) {
	h := newHarness(t, opts{creds: []cred{
		{name: "team-a", pool: "api", key: "sk-test-a-0000000000000000000001", models: []string{"decide-mini"}},
		{name: "team-b", pool: "api", key: "sk-test-b-0000000000000000000002", models: []string{"decide-large"}},
	}})
	// Request 0: the whole pool is discovered; team-b's catalog fails, so
	// only team-a's catalog is fresh afterwards.
	h.fp.ScriptCatalog(h.keys["team-b"], fp.ServerError())
	wantStatus(t, h.post(decision("api/decide-mini")), 200, "")

	// Two seconds before team-a's catalog (catalog_ttl 10m) goes stale,
	// team-a is rate limited for 5 s.
	h.clk.Advance(10*time.Minute - 2*time.Second)
	h.fp.Script(h.keys["team-a"], "decide-mini", fp.RateLimited("5"))
	wantStatus(t, h.postAcrossWait(decision("api/decide-mini"), 5*time.Second), 200, "")
}

// catalog_timeout bounds each catalog fetch: a cold pool whose one catalog
// stalls is served by the other credential once that timeout has passed,
// not when the stalled provider at last answers.
func TestStalledCatalogIsGivenUpAtTheCatalogTimeout(t *testing.T) {
	h := newHarness(t, opts{catalogTimeout: 200 * time.Millisecond})
	h.fp.SetCatalogDefault(h.keys["team-a"], fp.SlowCatalog(time.Minute))
	start := time.Now()
	r := h.post(decision("api/decide-mini"))
	wantStatus(t, r, 200, "")
	if got := r.header.Get("X-Rotor-Credential"); got != "team-b" {
		t.Errorf("served by %q, want team-b", got)
	}
	if el := time.Since(start); el >= 10*time.Second {
		t.Errorf("answered after %v, want about the 200ms catalog timeout", el)
	}
}

// The request deadline bounds the wait for a catalog fetch too (the fetch
// itself runs on, bounded by catalog_timeout, for the requests that share
// it): a deadline shorter than catalog_timeout ends the request at the
// deadline.
func TestCatalogWaitEndsAtTheRequestDeadline(t *testing.T) {
	h := newHarness(t, opts{deadline: 300 * time.Millisecond, catalogTimeout: time.Minute})
	h.fp.SetCatalogDefault("", fp.SlowCatalog(time.Minute))
	start := time.Now()
	wantStatus(t, h.post(decision("api/decide-mini")), 504, "deadline_exceeded")
	if el := time.Since(start); el >= 10*time.Second {
		t.Errorf("answered after %v, want about the 300ms deadline", el)
	}
	if n, rows := h.fp.Hits(fp.PathDecisions), len(h.rows()); n != 0 || rows != 0 {
		t.Errorf("%d decisions sent, %d rows; want none: nothing was sent", n, rows)
	}
}

// A provider's catalog may list thousands of models (several hundred KiB):
// the model at its end is found.
func TestLargeCatalogIsRead(t *testing.T) {
	models := make([]string, 0, 5001)
	for i := range 5000 {
		models = append(models, "fine-tuned-model-"+strconv.Itoa(i)+"-with-a-long-suffix")
	}
	models = append(models, "decide-mini")
	h := newHarness(t, opts{creds: []cred{{name: "team-a", pool: "api", key: "sk-test-a-0000000000000000000001", models: models, profiled: []string{"decide-mini"}}}})
	wantStatus(t, h.post(decision("api/decide-mini")), 200, "")
}

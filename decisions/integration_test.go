package decisions

import (
	"testing"
	"time"

	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/pool"
)

// Spec (model-cooldown, request integration): "Pass the resolved upstream
// model and configured quota bucket to both selection and recording.
// Forward classified outcomes, genuine credential-wide auth evidence and
// normalized trusted reset advice to recording." and "Use the actual
// upstream model, without changing an explicit model selection." The route
// records under the model it sent upstream (api/ removed) and selects
// under the same scope; the provider's Retry-After reaches the pool as the
// cooldown; a 401 cools the credential for every model; a configured quota
// bucket is shared by its member models.
func TestRouteScopesCooldownsByUpstreamModelAndBucket(t *testing.T) {
	release := func(h *harness, model string) time.Duration {
		d, _ := h.pools["api"].NextRelease(pool.Scope{Model: model, QuotaBucket: h.pools["api"].BucketFor(model)}, []string{"team-a"})
		return d
	}
	t.Run("model scope and advice", func(t *testing.T) {
		h := newHarness(t, opts{modelCooldown: true})
		h.fp.Script(h.keys["team-a"], "decide-mini", fp.RateLimited("40"))
		if r := h.post(decision("api/decide-mini")); r.header.Get("X-Rotor-Credential") != "team-b" {
			t.Fatalf("served by %s, want team-b", r.header.Get("X-Rotor-Credential"))
		}
		if d := release(h, "decide-mini"); d != 40*time.Second {
			t.Errorf("team-a cools %v for decide-mini, want the provider's 40 s", d)
		}
		if d := release(h, "api/decide-mini"); d != 0 {
			t.Errorf("a cooldown was recorded under the prefixed model (%v)", d)
		}
		if r := h.post(decision("api/decide-mini")); r.header.Get("X-Rotor-Credential") != "team-b" {
			t.Errorf("decide-mini served by %s, want team-b while team-a cools", r.header.Get("X-Rotor-Credential"))
		}
		if r := h.post(decision("api/decide-large")); r.header.Get("X-Rotor-Credential") != "team-a" {
			t.Errorf("decide-large served by %s, want team-a (another model)", r.header.Get("X-Rotor-Credential"))
		}
		if recs := h.fp.RequestsFor(h.keys["team-a"], fp.PathDecisions); len(recs) != 2 || recs[1].Model != "decide-large" {
			t.Errorf("team-a requests %v, want decide-mini then decide-large", recs)
		}
	})
	t.Run("credential-wide auth", func(t *testing.T) {
		h := newHarness(t, opts{modelCooldown: true})
		h.fp.Script(h.keys["team-a"], "decide-mini", fp.Unauthorized())
		h.post(decision("api/decide-mini"))
		if d := release(h, "decide-large"); d != pool.DefaultAuthRest {
			t.Errorf("team-a cools %v for decide-large after a 401, want the auth rest %v", d, pool.DefaultAuthRest)
		}
	})
	t.Run("quota bucket", func(t *testing.T) {
		h := newHarness(t, opts{modelCooldown: true, quotaBuckets: map[string][]string{"shared": {"decide-mini", "decide-large"}}})
		h.fp.Script(h.keys["team-a"], "decide-mini", fp.RateLimited("40"))
		h.post(decision("api/decide-mini"))
		if r := h.post(decision("api/decide-large")); r.header.Get("X-Rotor-Credential") != "team-b" {
			t.Errorf("decide-large served by %s, want team-b (its bucket cools on team-a)", r.header.Get("X-Rotor-Credential"))
		}
	})
}

// Spec (model-cooldown): "Filtering several configured keys down to one
// does not skip validation." Visibility leaves one eligible credential of
// two; its catalog is still fetched before the first send, and again once
// it is stale.
func TestFilteringToOneKeyDoesNotSkipValidation(t *testing.T) {
	creds := defaultCreds()
	creds[1].deny = []string{"decide-*"}
	h := newHarness(t, opts{creds: creds})
	for i := range 2 {
		before := len(h.fp.Requests())
		wantStatus(t, h.post(decision("api/decide-mini")), 200, "")
		recs := h.fp.Requests()[before:]
		var order []string
		for _, rec := range recs {
			if rec.Key == h.keys["team-a"] {
				order = append(order, rec.Path)
			}
		}
		if len(order) != 2 || order[0] != fp.PathModels || order[1] != fp.PathDecisions {
			t.Errorf("request %d: team-a saw %v, want its catalog validated before the decision", i, order)
		}
		h.clk.Advance(h.router.cfg.CatalogTTL)
	}
}

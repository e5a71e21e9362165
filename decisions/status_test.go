package decisions

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/rotorhq/rotor/budgets"
)

// The status document names each pool with its credentials' cooldowns and
// catalog freshness, and each budget with its state; it encodes to the
// JSON that 'rotor status' reads back.
func TestStatusDocument(t *testing.T) {
	h := newHarness(t, opts{})
	if r := h.post(`{"model":"api/decide-mini","input":"x","question":{"type":"predicate"}}`); r.status != 200 {
		t.Fatalf("decision = %d %s", r.status, r.body)
	}
	b := budgets.Budget{Name: "reqs", Kind: budgets.KindRequests, Limit: 10, Window: budgets.Window{Rolling: time.Hour}, CreatedAt: t0}
	if err := h.store.PutBudget(context.Background(), b.Record(), true); err != nil {
		t.Fatal(err)
	}
	st := h.router.StatusDocument(context.Background(), "test", BudgetLister(h.store))
	raw, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var back Status
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if back.Version != "test" || len(back.Pools) != 1 || back.Pools[0].Pool != "api" || len(back.Pools[0].Credentials) != 2 ||
		len(back.Pools[0].Catalogs) != 2 || !back.Pools[0].Catalogs[0].Fresh {
		t.Errorf("status pools = %s", raw)
	}
	if len(back.Budgets) != 1 || back.Budgets[0].Name != "reqs" || back.Budgets[0].Used == nil || *back.Budgets[0].Used != 1 ||
		back.Budgets[0].Remaining == nil || *back.Budgets[0].Remaining != 9 || back.Budgets[0].State != string(budgets.StateOK) || back.BudgetError != "" {
		t.Errorf("status budgets = %s", raw)
	}
}

// A budget failing closed has used and remaining null in the document, as
// budget list --format json has them: the window holds usage of unknown
// cost (the decision's), so the sum of the known rows is not what was
// spent. The other budgets keep their numbers.
func TestStatusDocumentFailClosedUsedIsNull(t *testing.T) {
	h := newHarness(t, opts{})
	if r := h.post(`{"model":"api/decide-mini","input":"x","question":{"type":"predicate"}}`); r.status != 200 {
		t.Fatalf("decision = %d %s", r.status, r.body)
	}
	for _, b := range []budgets.Budget{
		{Name: "spend", Kind: budgets.KindCost, Limit: 5_000_000, Window: budgets.Window{Rolling: time.Hour}, CreatedAt: t0},
		{Name: "reqs", Kind: budgets.KindRequests, Limit: 10, Window: budgets.Window{Rolling: time.Hour}, CreatedAt: t0},
	} {
		if err := h.store.PutBudget(context.Background(), b.Record(), true); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := json.Marshal(h.router.StatusDocument(context.Background(), "test", BudgetLister(h.store)))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Budgets []map[string]any `json:"budgets"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	got := map[string]map[string]any{}
	for _, b := range doc.Budgets {
		got[b["name"].(string)] = b
	}
	spend, reqs := got["spend"], got["reqs"]
	if spend == nil || spend["state"] != string(budgets.StateFailClosed) {
		t.Fatalf("spend = %v, want fail-closed (status %s)", spend, raw)
	}
	for _, k := range []string{"used", "remaining"} {
		if v, ok := spend[k]; !ok || v != nil {
			t.Errorf("fail-closed spend: %s = %v (present %v), want null", k, v, ok)
		}
	}
	if spend["unknown_rows"] != float64(1) || spend["limit"] != float64(5_000_000) {
		t.Errorf("fail-closed spend = %v, want its limit and 1 unknown row", spend)
	}
	if reqs == nil || reqs["used"] != float64(1) || reqs["remaining"] != float64(9) {
		t.Errorf("reqs = %v, want used 1, remaining 9", reqs)
	}
}

// A catalog is fresh in the status document exactly as long as requests
// take it for fresh: until catalog_ttl has passed since its fetch.
func TestStatusCatalogFreshUntilTheTTLEnds(t *testing.T) {
	h := newHarness(t, opts{})
	if r := h.post(decision("api/decide-mini")); r.status != 200 {
		t.Fatalf("decision = %d %s", r.status, r.body)
	}
	ttl := h.router.cfg.CatalogTTL
	h.clk.Advance(ttl - time.Millisecond)
	for _, c := range h.router.StatusDocument(context.Background(), "test", nil).Pools[0].Catalogs {
		if !c.Fresh || !c.Fetched.Equal(t0) {
			t.Errorf("%s a millisecond before the TTL: fresh %v fetched %v, want fresh, fetched %v", c.Credential, c.Fresh, c.Fetched, t0)
		}
	}
	h.clk.Advance(time.Millisecond)
	for _, c := range h.router.StatusDocument(context.Background(), "test", nil).Pools[0].Catalogs {
		if _, fresh := h.router.catalogs.fresh(c.Credential); c.Fresh || fresh {
			t.Errorf("%s at the TTL: status fresh %v, route fresh %v; want neither", c.Credential, c.Fresh, fresh)
		}
	}
}

// Each pool in the status document lists its own credentials' catalogs
// and no other pool's.
func TestStatusListsEachPoolsOwnCatalogs(t *testing.T) {
	h := newHarness(t, opts{creds: []cred{
		{name: "team-a", pool: "api", key: "sk-test-a-0000000000000000000001", models: []string{"decide-mini"}},
		{name: "zdr-a", pool: "zdr", region: "eu", key: "sk-test-z-0000000000000000000003", models: []string{"decide-mini"}},
	}})
	st := h.router.StatusDocument(context.Background(), "test", nil)
	want := map[string]string{"api": "team-a/us", "zdr": "zdr-a/eu"}
	if len(st.Pools) != 2 {
		t.Fatalf("%d pools, want 2", len(st.Pools))
	}
	for _, p := range st.Pools {
		if len(p.Catalogs) != 1 || p.Catalogs[0].Credential+"/"+p.Catalogs[0].Region != want[p.Pool] {
			t.Errorf("pool %s catalogs %+v, want only %s", p.Pool, p.Catalogs, want[p.Pool])
		}
	}
}

// A budget used up says when it frees; budgets that cannot be listed say
// so instead of listing none as if there were none.
func TestStatusDocumentBudgetFreesAtAndListFailure(t *testing.T) {
	h := newHarness(t, opts{})
	if r := h.post(decision("api/decide-mini")); r.status != 200 {
		t.Fatalf("decision = %d %s", r.status, r.body)
	}
	b := budgets.Budget{Name: "one", Kind: budgets.KindRequests, Limit: 1, Window: budgets.Window{Rolling: time.Hour}, CreatedAt: t0}
	if err := h.store.PutBudget(context.Background(), b.Record(), true); err != nil {
		t.Fatal(err)
	}
	st := h.router.StatusDocument(context.Background(), "test", BudgetLister(h.store))
	if len(st.Budgets) != 1 || st.Budgets[0].State != string(budgets.StateExhausted) || !st.Budgets[0].FreesAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("budgets %+v, want one exhausted, freeing at %v", st.Budgets, t0.Add(time.Hour))
	}
	failing := func(context.Context) ([]budgets.Status, error) { return nil, errors.New("database is locked") }
	st = h.router.StatusDocument(context.Background(), "test", failing)
	if st.BudgetError != "budgets unavailable" || len(st.Budgets) != 0 {
		t.Errorf("budget error %q, budgets %+v; want budgets unavailable", st.BudgetError, st.Budgets)
	}
}

package decisions

import (
	"context"
	"encoding/json"
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
	if len(back.Budgets) != 1 || back.Budgets[0].Name != "reqs" || back.Budgets[0].Used != 1 || back.Budgets[0].State != string(budgets.StateOK) || back.BudgetError != "" {
		t.Errorf("status budgets = %s", raw)
	}
}

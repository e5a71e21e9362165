package decisions

import (
	"context"
	"time"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/ledger"
	"github.com/rotorhq/rotor/pool"
)

// Status is GET /v1/status.
type Status struct {
	Version     string         `json:"version"`
	Pools       []PoolStatus   `json:"pools"`
	Budgets     []BudgetStatus `json:"budgets"`
	BudgetError string         `json:"budget_error,omitempty"`
	Time        time.Time      `json:"time"`
}

// PoolStatus is one pool's credentials and cooldowns.
type PoolStatus struct {
	pool.Snapshot
	Catalogs []CatalogStatus `json:"catalogs"`
}

// CatalogStatus is a credential's catalog freshness.
type CatalogStatus struct {
	Credential string    `json:"credential"`
	Region     string    `json:"region"`
	Fetched    time.Time `json:"fetched,omitzero"`
	Fresh      bool      `json:"fresh"`
}

// BudgetStatus is a budget's state.
type BudgetStatus struct {
	Name   string `json:"name"`
	Kind   string `json:"kind"`
	Window string `json:"window"`
	Limit  int64  `json:"limit"`
	// Used and Remaining are null while the budget fails closed: its
	// window holds usage of unknown cost, so the sum of the known rows is
	// not what was spent (as budget list --format json says).
	Used      *int64    `json:"used"`
	Remaining *int64    `json:"remaining"`
	Unknown   int64     `json:"unknown_rows"`
	State     string    `json:"state"`
	FreesAt   time.Time `json:"frees_at,omitzero"`
}

// Budgets lists budget states for status and metrics.
type Budgets func(ctx context.Context) ([]budgets.Status, error)

// StatusDocument assembles the GET /v1/status document: the route's pools
// with their cooldowns and catalogs, and the budgets (list may be nil).
func (rt *Route) StatusDocument(ctx context.Context, version string, list Budgets) Status {
	st := Status{Version: version, Time: rt.cfg.Clock.Now().UTC(), Pools: []PoolStatus{}, Budgets: []BudgetStatus{}}
	cats := rt.Status()
	for _, name := range PoolNames {
		ps, ok := rt.pools[name]
		if !ok {
			continue
		}
		p := PoolStatus{Snapshot: ps.pool.Snapshot(), Catalogs: []CatalogStatus{}}
		for _, c := range cats {
			if c.Pool == name {
				p.Catalogs = append(p.Catalogs, CatalogStatus{Credential: c.Name, Region: c.Region, Fetched: c.CatalogFetched, Fresh: c.CatalogFresh})
			}
		}
		st.Pools = append(st.Pools, p)
	}
	if list != nil {
		bs, err := list(ctx)
		if err != nil {
			st.BudgetError = "budgets unavailable"
		}
		for _, b := range bs {
			bst := BudgetStatus{Name: b.Name, Kind: string(b.Kind), Window: b.Window.String(), Limit: b.Limit,
				Unknown: b.UnknownRows, State: string(b.State), FreesAt: b.FreesAt}
			if b.State != budgets.StateFailClosed {
				used, remaining := b.Used, b.Remaining()
				bst.Used, bst.Remaining = &used, &remaining
			}
			st.Budgets = append(st.Budgets, bst)
		}
	}
	return st
}

// BudgetLister returns a Budgets function over the ledger.
func BudgetLister(store ledger.Ledger) Budgets {
	return func(ctx context.Context) ([]budgets.Status, error) {
		out, _, err := budgets.List(ctx, store)
		return out, err
	}
}

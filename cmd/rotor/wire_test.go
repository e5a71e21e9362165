package main

import (
	"context"
	"testing"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/gateway"
)

// A cost budget counts micro-USD on /metrics; the others count their kind.
func TestBudgetGaugesNameTheirUnit(t *testing.T) {
	list := func(context.Context) ([]budgets.Status, error) {
		return []budgets.Status{
			{Budget: budgets.Budget{Name: "cost-month", Kind: budgets.KindCost, Limit: 9}, Used: 5, State: budgets.StateOK},
			{Budget: budgets.Budget{Name: "reqs", Kind: budgets.KindRequests, Limit: 2}, Used: 1, State: budgets.StateExhausted},
		}, nil
	}
	got, err := budgetGauges(list)(context.Background())
	want := []gateway.BudgetGauge{
		{Name: "cost-month", Kind: "cost", Unit: "micro_usd", Used: 5, Limit: 9, State: "ok"},
		{Name: "reqs", Kind: "requests", Unit: "requests", Used: 1, Limit: 2, State: "exhausted"},
	}
	if err != nil || len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("budgetGauges = %+v, %v; want %+v", got, err, want)
	}
}

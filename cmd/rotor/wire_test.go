package main

import (
	"context"
	"slices"
	"testing"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/gateway"
)

// /metrics gets each budget's kind (its unit) and, while a cost budget
// fails closed, no used amount: it is unknown.
func TestBudgetGaugesNameTheirUnit(t *testing.T) {
	list := func(context.Context) ([]budgets.Status, error) {
		return []budgets.Status{
			{Budget: budgets.Budget{Name: "cost-month", Kind: budgets.KindCost, Limit: 9}, Used: 5, State: budgets.StateOK},
			{Budget: budgets.Budget{Name: "reqs", Kind: budgets.KindRequests, Limit: 2}, Used: 1, State: budgets.StateExhausted},
			{Budget: budgets.Budget{Name: "cost-day", Kind: budgets.KindCost, Limit: 9}, Used: 1, UnknownRows: 2, State: budgets.StateFailClosed},
		}, nil
	}
	got, err := budgetGauges(list)(context.Background())
	want := []gateway.BudgetGauge{
		{Name: "cost-month", Kind: "cost", Used: 5, Limit: 9, State: "ok"},
		{Name: "reqs", Kind: "requests", Used: 1, Limit: 2, State: "exhausted"},
		{Name: "cost-day", Kind: "cost", Used: 1, Limit: 9, UsedUnknown: true, UnknownRows: 2, State: "fail-closed"},
	}
	if err != nil || !slices.Equal(got, want) {
		t.Errorf("budgetGauges = %+v, %v; want %+v", got, err, want)
	}
}

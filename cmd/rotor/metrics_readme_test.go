package main

import (
	"context"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/gateway"
)

// Every rotor_* metric /metrics can export is in the README's Metrics
// table.
func TestREADMEListsEveryMetric(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	m := gateway.NewMetrics()
	m.SetBuildInfo("v0", "abc")
	m.Request("bridge", "/v1/decisions", 200, "", time.Millisecond)
	m.Refused("budget_exceeded")
	m.Failover("api", "auth")
	m.Cooldown("api", "auth")
	m.Upstream("api", "team-a", "ok")
	one := int64(1)
	m.Settled(gateway.Usage{Operation: "decisions", Input: &one})
	m.Settled(gateway.Usage{Operation: "chat.completions", Input: &one, CostMicros: &one})
	m.ObserveCommit(1, time.Millisecond)
	m.WatchBudgets(func(context.Context) ([]gateway.BudgetGauge, error) {
		return []gateway.BudgetGauge{{Name: "r", Kind: "requests"}, {Name: "t", Kind: "tokens"}, {Name: "c", Kind: "cost"}}, nil
	}, budgetStates)
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	names := regexp.MustCompile(`(?m)^# TYPE (rotor_\w+) `).FindAllStringSubmatch(rec.Body.String(), -1)
	if len(names) < 20 {
		t.Fatalf("only %d rotor metrics in the scrape:\n%s", len(names), rec.Body)
	}
	for _, n := range names {
		if !strings.Contains(readme, "`"+n[1]+"`") {
			t.Errorf("README's Metrics section lacks %s", n[1])
		}
	}
}

package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/testutil/ledgertest"
)

// TestDemoShowsPricedStreamedChatBeforeDecisions: the demo streams a chat
// through its bridge under a price and a cost budget, shows the row's known
// cost, removes the cost budget before the Decisions burst (a Decisions row
// has unknown cost, so the budget would refuse the burst), and its report
// holds the chat's known cost beside the Decisions rows' unknown one.
func TestDemoShowsPricedStreamedChatBeforeDecisions(t *testing.T) {
	f, out, _ := fakeFactory(t, nil, nil)
	kept := filepath.Join(t.TempDir(), "demo")
	if err := demoRun(context.Background(), &demoOptions{IO: f.IO, Clock: f.Clock, Version: "test", Requests: 4, Keep: kept}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	costPart, burst, ok := strings.Cut(s, "Decisions burst")
	if !ok {
		t.Fatalf("demo output has no Decisions burst:\n%s", s)
	}
	for _, want := range []string{"pricing set    gpt-4o-mini", "budget         demo-cost", "Streamed chat", "Hello from the", "cost $0.00", "now removed"} {
		if !strings.Contains(costPart, want) {
			t.Errorf("the part before the Decisions burst lacks %q:\n%s", want, costPart)
		}
	}
	if strings.Contains(burst, "policy_blocked") {
		t.Errorf("the cost budget was still there for the Decisions burst:\n%s", burst)
	}
	_, report, _ := strings.Cut(burst, "ledger report --by operation,credential,status")
	var chatLine string
	for _, l := range strings.Split(report, "\n") {
		if strings.Contains(l, "chat.completions") {
			chatLine = l
		}
	}
	if chatLine == "" || strings.Contains(chatLine, "unknown") || !strings.Contains(chatLine, "0.00") {
		t.Errorf("report has no chat row of known cost:\n%s", report)
	}
	if !strings.Contains(report, "decisions") || !strings.Contains(report, "unknown") {
		t.Errorf("report lacks the Decisions rows of unknown cost:\n%s", report)
	}

	store := ledgertest.OpenAt(t, filepath.Join(kept, "rotor.db"))
	bs, err := store.Budgets(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.Name == "demo-cost" {
			t.Errorf("the demo left its cost budget: %+v", bs)
		}
	}
	rows, err := store.Rows(context.Background(), f.Clock.Now().Add(-2*time.Hour), f.Clock.Now().Add(time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	chats := 0
	for _, r := range rows {
		if r.Operation == "chat.completions" {
			chats++
			if !r.CostMicros.Known || r.CostMicros.V <= 0 || r.Status != 200 {
				t.Errorf("chat row %+v: want status 200 and a known cost", r)
			}
		} else if r.Operation == "decisions" && r.CostMicros.Known {
			t.Errorf("decisions row with a cost: %+v", r)
		}
	}
	if chats != 1 {
		t.Errorf("%d chat rows, want 1", chats)
	}
}

// The demo tells the whole story: requests refused by the budget leave no
// usage row (none under their request ids in the ledger); a credential
// that cooled down answers again once the demo's clock is past its
// cooldown (read from the bridge's status); the last line is the command
// to run next.
func TestDemoShowsRefusalNotARowCooldownEndAndNextCommand(t *testing.T) {
	f, out, _ := fakeFactory(t, nil, nil)
	kept := filepath.Join(t.TempDir(), "demo")
	if err := demoRun(context.Background(), &demoOptions{IO: f.IO, Clock: f.Clock, Version: "test", Requests: 12, Keep: kept}); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	_, refusal, ok := strings.Cut(s, "Requests 11, 12 were refused at admission (budget_exceeded)")
	if !ok {
		t.Fatalf("demo does not explain the refused requests:\n%s", s)
	}
	m := regexp.MustCompile(`A refusal is not a usage row: .* holds no row\s+under their request ids \(the first: ([0-9a-f]+)\)`).FindStringSubmatch(refusal)
	if m == nil {
		t.Fatalf("no refusal explanation with a request id:\n%s", refusal)
	}
	store := ledgertest.OpenAt(t, filepath.Join(kept, "rotor.db"))
	rows, err := store.Rows(context.Background(), f.Clock.Now().Add(-2*time.Hour), f.Clock.Now().Add(2*time.Hour), 0)
	if err != nil {
		t.Fatal(err)
	}
	backBy := regexp.MustCompile(`request 13 +200 via (team-[ab]), 1 attempt\(s\): (team-[ab]) is back after its cooldown`).FindStringSubmatch(s)
	if backBy == nil || backBy[1] != backBy[2] {
		t.Fatalf("no cooled credential came back:\n%s", s)
	}
	// The time left, never a time of day: the demo's clock runs behind
	// the wall clock, and its times read as already past.
	if !regexp.MustCompile(`cooling down: .*` + backBy[1] + ` for \d+[ms0-9]* more`).MatchString(s) {
		t.Errorf("the demo does not say %s was cooling down before:\n%s", backBy[1], s)
	}
	var back int
	for _, r := range rows {
		if r.RequestID == m[1] {
			t.Errorf("the refused request %s has a ledger row: %+v", m[1], r)
		}
		// The row of request 13: after the skip (the demo's clock starts
		// demoLead behind), by the credential that came back.
		if r.Operation == "decisions" && r.Time.After(f.Clock.Now().Add(-demoLead+time.Minute)) && r.Credential == backBy[1] && r.Status == 200 {
			back++
		}
	}
	if back != 1 || len(rows) != 12 { // the chat, 10 decisions, request 13
		t.Errorf("%d rows (want 12) and %d rows of %s after its cooldown (want 1)", len(rows), back, backBy[1])
	}
	lines := strings.Split(strings.TrimSpace(s), "\n")
	// The next step works from a go run: it says how to put rotor on
	// the PATH, and leaves rotor init to the Quick start (run before it,
	// the Quick start's own init would refuse to overwrite).
	if next := strings.Join(lines[len(lines)-3:], "\n"); !strings.Contains(next, "go install ./cmd/rotor") ||
		!strings.Contains(next, "rotor fake-provider --keys 2") || strings.Contains(next, "rotor init &&") {
		t.Errorf("the demo ends with %q, not the steps to run next", next)
	}
}

package ledger

import (
	"context"
	"strings"
	"testing"
)

// InFlight runs inside every admission of a cost budget whose window holds
// a reservation this process did not open (another bridge's request in
// flight, or one a crash or a failed settlement left). It must not scan
// every usage row of the window: PostgreSQL has usage_open (ts_ms) WHERE
// state = 0 for it; SQLite dropped its own in migration 0003 and got it
// back in 0009. (A plan, not a timing: speed is the benchmarks'.)
func TestInFlightCountUsesAnIndex(t *testing.T) {
	s, _ := openTest(t, nil)
	q := `EXPLAIN QUERY PLAN SELECT COUNT(*) FROM (SELECT 1 FROM usage WHERE ts_ms >= ? AND ts_ms < ? AND ` + inFlightSQL + ` LIMIT ?)`
	rows, err := s.db.QueryContext(context.Background(), q, 0, 1, 1, 0, 5)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	p := strings.Join(plan, "; ")
	if !strings.Contains(p, "USING INDEX") {
		t.Fatalf("InFlight's query walks every row of the window (no index on open reservations): %s", p)
	}
}

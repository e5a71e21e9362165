package ledger

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
)

// TestMigrationKeepsRowsAndReports builds a database at schema version 3
// (rows with rowids, the report rollup counting open reservations), then
// opens it with this binary: every row survives the move to the
// time-clustered table, reports and windows read the same as before, and
// the hour rows written so far stay in use.
func TestMigrationKeepsRowsAndReports(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rotor.db")
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	names, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names[:3] {
		body, _ := migrationFS.ReadFile(n)
		if _, err := db.Exec(string(body)); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
	}
	base := t0.UnixMilli()
	// Two settled rows and one open reservation in one hour, with the
	// version-3 rollups the writer kept for them.
	for i, r := range []struct {
		state, status int
		tokens        any
	}{{1, 200, 10}, {1, 429, nil}, {0, 0, nil}} {
		ts := base + int64(i)*1000
		if _, err := db.Exec(`INSERT INTO usage (request_id, ts_ms, state, expires_ms, operation, model, client, status, total_tokens, input_tokens, output_tokens) VALUES (?, ?, ?, ?, 'decisions', 'm', 'ci', ?, ?, ?, ?)`,
			fmt.Sprint("r", i), ts, r.state, ts+60000, r.status, r.tokens, r.tokens, r.tokens); err != nil {
			t.Fatal(err)
		}
	}
	h, m := base/hourMS, base/minuteMS
	for _, q := range []string{
		fmt.Sprintf(`INSERT INTO usage_minute VALUES (%d, 3, 10, 2, 0, 3)`, m),
		fmt.Sprintf(`INSERT INTO usage_hour VALUES (%d, 3, 10, 2, 0, 3)`, h),
		fmt.Sprintf(`INSERT INTO usage_hour_dims VALUES (%d, 'decisions', 'm', '', 'ci', 200, 1, 10, 0, 10, 0, 0, 1, 0)`, h),
		fmt.Sprintf(`INSERT INTO usage_hour_dims VALUES (%d, 'decisions', 'm', '', 'ci', 429, 1, 0, 0, 0, 1, 0, 1, 1)`, h),
		fmt.Sprintf(`INSERT INTO usage_hour_dims VALUES (%d, 'decisions', 'm', '', 'ci', 0, 1, 0, 0, 0, 1, 0, 1, 0)`, h),
		`PRAGMA user_version = 3`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s := openWith(t, path, Options{})
	rows, err := s.Rows(ctx, t0.Add(-time.Hour), t0.Add(time.Hour), 0)
	if err != nil || len(rows) != 3 {
		t.Fatalf("rows after migration = %d, %v; want 3", len(rows), err)
	}
	rep, err := s.Report(ctx, ReportQuery{From: t0.Add(-24 * time.Hour), To: t0.Add(24 * time.Hour), By: []string{KeyStatus}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range rep {
		got[r.Keys[0]] = r.Requests
	}
	if got["200"] != 1 || got["429"] != 1 || got["unsettled"] != 1 || len(got) != 3 {
		t.Errorf("report by status after migration = %v, want 200, 429 and unsettled once each", got)
	}
	var n int
	if err := s.DB().QueryRow(`SELECT COUNT(*) FROM usage_hour_dims WHERE status = 0`).Scan(&n); err != nil || n != 0 {
		t.Errorf("report rollup still holds %d open rows", n)
	}
	// 0005: every hour row written so far counts as written.
	var until int64
	if err := s.DB().QueryRow(`SELECT value FROM meta WHERE key = 'hour_rollup_until'`).Scan(&until); err != nil || until != h+1 {
		t.Errorf("hour_rollup_until after migration = %d (%v), want %d: the hour after the last hour row", until, err, h+1)
	}
	// 0006: every row so far is in the rollups.
	if err := s.DB().QueryRow(`SELECT value FROM meta WHERE key = 'fold_until'`).Scan(&until); err != nil || until != base+2001 {
		t.Errorf("fold_until after migration = %d (%v), want %d: the millisecond after the last row", until, err, base+2001)
	}
}

// Migration 0007 counts, in the report rollup, the rows of unknown input
// and output tokens that a ledger folded before it (issue 14, item 9).
func TestMigrationCountsUnknownInputAndOutput(t *testing.T) {
	clk := clock.NewFake(t0)
	s, path := openTest(t, clk)
	reserve(t, s, "total-only")
	reserve(t, s, "no-output")
	for _, st := range []Settlement{
		{RequestID: "total-only", Model: "m", Status: 200, TotalTokens: Known(5)},
		{RequestID: "no-output", Model: "m", Status: 200, InputTokens: Known(3), TotalTokens: Known(4)},
	} {
		if err := s.Settle(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Minute)
	if err := s.PutBudget(ctx, BudgetRecord{Name: "fold", Kind: "requests", Limit: 9, Window: "day"}, false); err != nil {
		t.Fatal(err) // a write whose batch folds the two rows
	}
	s.Close()
	db := openRaw(t, path)
	var f int64
	if err := db.QueryRow(qFoldUntil).Scan(&f); err != nil || f <= t0.UnixMilli() {
		t.Fatalf("fold_until = %d, %v: the rows were not folded", f, err)
	}
	// The ledger as rotor left it before migration 0007.
	for _, q := range []string{
		`ALTER TABLE usage DROP COLUMN cached_input_tokens`,
		`ALTER TABLE usage DROP COLUMN reasoning_tokens`,
		`ALTER TABLE usage_hour_dims DROP COLUMN cached_input_tokens`,
		`ALTER TABLE usage_hour_dims DROP COLUMN cached_null`,
		`ALTER TABLE usage_hour_dims DROP COLUMN reasoning_tokens`,
		`ALTER TABLE usage_hour_dims DROP COLUMN reasoning_null`,
		`DROP TABLE prices`,
		`ALTER TABLE usage_hour_dims DROP COLUMN input_null`,
		`ALTER TABLE usage_hour_dims DROP COLUMN output_null`,
		`DELETE FROM meta WHERE key = 'set_aside'`,
		`PRAGMA user_version = 6`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	s2 := openAt(t, path, clk)
	got, err := s2.Report(ctx, ReportQuery{From: t0.Add(-2 * time.Hour), To: t0.Add(3 * time.Hour), By: []string{KeyOperation}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].InputUnknown != 1 || got[0].OutputUnknown != 2 || got[0].TokensUnknown != 0 || got[0].TotalTokens != 9 {
		t.Errorf("report after migration = %+v, want input unknown in 1 row, output in 2, total 9 known", got)
	}
	if n, err := s2.SetAside(ctx); err != nil || n != 0 {
		t.Errorf("SetAside = %d, %v", n, err)
	}
}

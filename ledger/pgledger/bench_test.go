package pgledger_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/rotorhq/rotor/internal/testutil/ledgerbench"
	"github.com/rotorhq/rotor/internal/testutil/pgtest"
	"github.com/rotorhq/rotor/ledger/pgledger"
)

// Benchmarks of the PostgreSQL ledger as it grows: ledger/bench_test.go's,
// the same harness (internal/testutil/ledgerbench) and names, so that
// scripts/bench-ledger.sh runs both engines side by side. Each size is a fresh schema filled with bulk SQL
// (rows over the last 90 days, with their rollups); -short skips every
// size above 10k. Times come from the database's clock, as in production;
// the server commits as it is configured (synchronous_commit is never
// turned off here).

var benchSizes = []ledgerbench.Size{{Name: "10k", Rows: 10_000}, {Name: "1M", Rows: 1_000_000}}

// fixture fills a migrated schema with rows settled rows spread evenly
// over the 90 days before the database's now, and their rollups.
func fixture(b *testing.B, u string, rows int) {
	b.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `INSERT INTO usage (request_id, ts_ms, state, expires_ms, operation, pool, model, credential, client, attempts, status,
  input_tokens, output_tokens, total_tokens, cost_micros, latency_ms)
SELECT 'fx-' || i, now_ms - 7776000000 + (i * 7776000000 / $1), 1, now_ms, 'decisions', 'api', 'model-' || (i % 4), 'team-' || (i % 3), 'default', 1, 200,
  100 + i % 900, 20 + i % 300, 120 + i % 900 + i % 300, NULL, 300
FROM generate_series(0, $1 - 1) AS i, (SELECT (floor(extract(epoch from clock_timestamp()) * 1000))::bigint - 1000 AS now_ms) n`, rows); err != nil {
		b.Fatalf("fixture: %v", err)
	}
	for _, q := range []string{
		`INSERT INTO usage_minute SELECT ts_ms / 60000, COUNT(*), SUM(total_tokens), 0, 0, COUNT(*) FROM usage GROUP BY 1`,
		`INSERT INTO usage_hour SELECT ts_ms / 3600000, COUNT(*), SUM(total_tokens), 0, 0, COUNT(*) FROM usage GROUP BY 1`,
		`INSERT INTO usage_day SELECT ts_ms / 86400000, COUNT(*), SUM(total_tokens), 0, 0, COUNT(*) FROM usage GROUP BY 1`,
		`INSERT INTO usage_hour_dims SELECT ts_ms / 3600000, operation, model, credential, client, status, COUNT(*), SUM(input_tokens), SUM(output_tokens),
  SUM(total_tokens), 0, 0, COUNT(*), 0, 0, 0, 0, COUNT(*), 0, COUNT(*) FROM usage GROUP BY 1, 2, 3, 4, 5, 6`,
		`VACUUM ANALYZE usage`,
		`VACUUM ANALYZE usage_minute`,
		`VACUUM ANALYZE usage_hour`,
		`VACUUM ANALYZE usage_day`,
		`VACUUM ANALYZE usage_hour_dims`,
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			b.Fatalf("fixture: %v", err)
		}
	}
}

// openBench migrates a fresh schema, fills it with rows rows and opens
// it; withBudgets adds ledgerbench.Budgets.
func openBench(b *testing.B, rows int, withBudgets bool) ledgerbench.Writer {
	b.Helper()
	u, _ := pgtest.Schema(b)
	if _, _, err := pgledger.Migrate(context.Background(), u, pgledger.Options{}); err != nil {
		b.Fatal(err)
	}
	fixture(b, u, rows)
	s, err := pgledger.Open(context.Background(), u, pgledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	if withBudgets {
		for _, bg := range ledgerbench.Budgets {
			if err := s.PutBudget(context.Background(), bg.Record(), true); err != nil {
				b.Fatal(err)
			}
		}
	}
	return s
}

// BenchmarkAdmission: one request's reserve (admitted by a budgets.Admitter
// evaluating ledgerbench.Budgets inside the batch transaction) and settle.
func BenchmarkAdmission(b *testing.B) { ledgerbench.Sequential(b, benchSizes, openBench, true) }

// BenchmarkAppend: reserve and settle without budgets.
func BenchmarkAppend(b *testing.B) { ledgerbench.Sequential(b, benchSizes, openBench, false) }

// BenchmarkAdmissionParallel is BenchmarkAdmission with 16 callers; ns/op
// is the inverse of the throughput.
func BenchmarkAdmissionParallel(b *testing.B) { ledgerbench.Parallel(b, benchSizes, openBench, true) }

// BenchmarkAppendParallel is BenchmarkAppend with 16 callers.
func BenchmarkAppendParallel(b *testing.B) { ledgerbench.Parallel(b, benchSizes, openBench, false) }

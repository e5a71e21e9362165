package pgledger_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/internal/testutil/pgtest"
	"github.com/rotorhq/rotor/ledger"
	"github.com/rotorhq/rotor/ledger/pgledger"
)

// Benchmarks of the PostgreSQL ledger as it grows, of the same shape and
// names as ledger/bench_test.go's (scripts/bench-ledger.sh runs both
// engines side by side). Each size is a fresh schema filled with bulk SQL
// (rows over the last 90 days, with their rollups); -short skips every
// size above 10k. Times come from the database's clock, as in production;
// the server commits as it is configured (synchronous_commit is never
// turned off here).

var benchSizes = []struct {
	name string
	rows int
}{
	{"10k", 10_000},
	{"1M", 1_000_000},
}

// benchBudgets are ledger/bench_test.go's: two rolling 30d windows, a
// rolling 24h and a calendar month, never reached.
var benchBudgets = []budgets.Budget{
	{Name: "requests-30d", Kind: budgets.KindRequests, Limit: 1 << 50, Window: budgets.Window{Rolling: 30 * 24 * time.Hour}},
	{Name: "tokens-30d", Kind: budgets.KindTokens, Limit: 1 << 60, Window: budgets.Window{Rolling: 30 * 24 * time.Hour}},
	{Name: "requests-24h", Kind: budgets.KindRequests, Limit: 1 << 50, Window: budgets.Window{Rolling: 24 * time.Hour}},
	{Name: "tokens-month", Kind: budgets.KindTokens, Limit: 1 << 60, Window: budgets.Window{Calendar: budgets.CalendarMonth}},
}

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

func cpuTime() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}

type cpuMeter struct {
	start time.Duration
	ok    bool
}

func startCPU() cpuMeter {
	t, ok := cpuTime()
	return cpuMeter{t, ok}
}

// report gives this process's CPU time per op (the server's is not in
// it).
func (m cpuMeter) report(b *testing.B) {
	b.StopTimer()
	if t, ok := cpuTime(); ok && m.ok && b.N > 0 {
		b.ReportMetric(float64(t-m.start)/float64(b.N), "cpu-ns/op")
	}
}

func requestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

var benchSeq atomic.Int64

func reserveSettle(s *pgledger.Store, adm ledger.Admitter) error {
	ctx := context.Background()
	id := requestID()
	n := benchSeq.Add(1)
	err := s.Reserve(ctx, ledger.Reservation{RequestID: id, Expires: time.Now().Add(time.Hour), Operation: budgets.OperationDecisions,
		Pool: "api", Model: "gpt-4o-mini", Client: "default"}, adm)
	if err != nil {
		return fmt.Errorf("reserve: %w", err)
	}
	in, out := 100+n%900, 20+n%300
	err = s.Settle(ctx, ledger.Settlement{RequestID: id, Model: "gpt-4o-mini", Credential: "team-1", Attempts: 1, Status: 200,
		InputTokens: ledger.Known(in), OutputTokens: ledger.Known(out), TotalTokens: ledger.Known(in + out), Latency: 300 * time.Millisecond})
	if err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	return nil
}

func warmBench(b *testing.B, rows int, withBudgets bool) (*pgledger.Store, ledger.Admitter) {
	b.Helper()
	if testing.Short() && rows > 10_000 {
		b.Skip("-short")
	}
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
	var adm ledger.Admitter
	if withBudgets {
		for _, bg := range benchBudgets {
			if err := s.PutBudget(context.Background(), bg.Record(), true); err != nil {
				b.Fatal(err)
			}
		}
		adm = budgets.NewAdmitter()
	}
	for range 20 {
		if err := reserveSettle(s, adm); err != nil {
			b.Fatal(err)
		}
	}
	return s, adm
}

func benchSequential(b *testing.B, withBudgets bool) {
	for _, size := range benchSizes {
		b.Run("rows="+size.name, func(b *testing.B) {
			s, adm := warmBench(b, size.rows, withBudgets)
			cpu := startCPU()
			for b.Loop() {
				if err := reserveSettle(s, adm); err != nil {
					b.Fatal(err)
				}
			}
			cpu.report(b)
		})
	}
}

func benchParallel(b *testing.B, withBudgets bool) {
	for _, size := range benchSizes {
		b.Run("rows="+size.name, func(b *testing.B) {
			s, adm := warmBench(b, size.rows, withBudgets)
			b.SetParallelism(8) // 16 callers on 2 cores
			b.ResetTimer()
			cpu := startCPU()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := reserveSettle(s, adm); err != nil {
						b.Error(err)
						return
					}
				}
			})
			cpu.report(b)
		})
	}
}

// BenchmarkAdmission: one request's reserve (admitted by a budgets.Admitter
// evaluating benchBudgets inside the batch transaction) and settle.
func BenchmarkAdmission(b *testing.B) { benchSequential(b, true) }

// BenchmarkAppend: reserve and settle without budgets.
func BenchmarkAppend(b *testing.B) { benchSequential(b, false) }

// BenchmarkAdmissionParallel is BenchmarkAdmission with 16 callers; ns/op
// is the inverse of the throughput.
func BenchmarkAdmissionParallel(b *testing.B) { benchParallel(b, true) }

// BenchmarkAppendParallel is BenchmarkAppend with 16 callers.
func BenchmarkAppendParallel(b *testing.B) { benchParallel(b, false) }

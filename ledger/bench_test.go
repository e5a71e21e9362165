package ledger_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/testutil/ledgertest"
	"github.com/rotorhq/rotor/ledger"
)

// Benchmarks of the ledger as the ledger grows (issue 2, "Performance").
// scripts/bench-ledger.sh runs them and prints the figures of the README.
//
// Each size uses a fixture built once with bulk SQL and cached under
// os.TempDir() (see cachedFixture); the 10M fixture takes a few minutes
// and about 2 GiB the first time. -short skips every size above 10k. A
// benchmark appends rows after the fixture's last one; they are deleted
// (and the rollups they touched rebuilt) before the next run, so every run
// starts from the same ledger.
//
// The ledger runs as in production: synchronous=FULL, one commit per
// batch, callers waiting for their commit. The sequential benchmarks
// therefore measure one request's latency (two commits: reserve, settle);
// the Parallel ones measure throughput with 16 callers sharing group
// commits.

var benchSizes = []struct {
	name string
	rows int
}{
	{"10k", 10_000},
	{"1M", 1_000_000},
	{"10M", 10_000_000},
}

// shiftedClock is the wall clock moved back to fixtureAnchor at the start of
// a run: rows are appended right after the fixture's at the rate the
// benchmark reaches, and windows slide as they do in production.
type shiftedClock struct{ d time.Duration }

func (c shiftedClock) Now() time.Time                       { return time.Now().Add(c.d) }
func (c shiftedClock) NewTimer(d time.Duration) clock.Timer { return clock.Real().NewTimer(d) }

// benchBudgets span rollups and raw edges: two rolling 30d windows (one
// computation, shared), a rolling 24h and a calendar month. Their limits
// are never reached, so every reservation is admitted and written.
var benchBudgets = []budgets.Budget{
	{Name: "requests-30d", Kind: budgets.KindRequests, Limit: 1 << 50, Window: budgets.Window{Rolling: 30 * 24 * time.Hour}},
	{Name: "tokens-30d", Kind: budgets.KindTokens, Limit: 1 << 60, Window: budgets.Window{Rolling: 30 * 24 * time.Hour}},
	{Name: "requests-24h", Kind: budgets.KindRequests, Limit: 1 << 50, Window: budgets.Window{Rolling: 24 * time.Hour}},
	{Name: "tokens-month", Kind: budgets.KindTokens, Limit: 1 << 60, Window: budgets.Window{Calendar: budgets.CalendarMonth}},
}

// openBench opens a reset fixture of rows rows with the clock at
// fixtureAnchor; withBudgets adds benchBudgets.
func openBench(b *testing.B, rows int, withBudgets bool) *ledger.Store {
	b.Helper()
	path := cachedFixture(b, rows)
	clk := shiftedClock{d: fixtureAnchor.Sub(time.Now())}
	s := ledgertest.OpenAt(b, path, ledger.Options{Clock: clk, Synchronous: os.Getenv("ROTOR_BENCH_SYNC")})
	if withBudgets {
		for _, bg := range benchBudgets {
			if err := s.PutBudget(context.Background(), bg.Record(), true); err != nil {
				b.Fatal(err)
			}
		}
	}
	return s
}

// cpuMeter reports the process's CPU time per op as cpu-ns/op: on a shared
// machine it varies far less than ns/op, which also counts waiting for
// fsync and for the CPU.
type cpuMeter struct {
	start time.Duration
	ok    bool
}

func startCPU() cpuMeter {
	t, ok := cpuTime()
	return cpuMeter{t, ok}
}

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

// reserveSettle is one request's ledger work: admission and reservation,
// then the settled row.
func reserveSettle(s *ledger.Store, adm ledger.Admitter) error {
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

// warmBench opens a ledger of rows rows (skipped beyond 10k under -short),
// with the budgets' admitter when asked, and warms the statement and page
// caches with a few reservations.
func warmBench(b *testing.B, rows int, withBudgets bool) (*ledger.Store, ledger.Admitter) {
	b.Helper()
	if testing.Short() && rows > 10_000 {
		b.Skip("-short")
	}
	s := openBench(b, rows, withBudgets)
	var adm ledger.Admitter
	if withBudgets {
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
// evaluating benchBudgets inside the writer's transaction) and settle.
func BenchmarkAdmission(b *testing.B) { benchSequential(b, true) }

// BenchmarkAppend: reserve and settle without budgets.
func BenchmarkAppend(b *testing.B) { benchSequential(b, false) }

// BenchmarkAdmissionParallel is BenchmarkAdmission with 16 callers; ns/op
// is the inverse of the throughput.
func BenchmarkAdmissionParallel(b *testing.B) { benchParallel(b, true) }

// BenchmarkAppendParallel is BenchmarkAppend with 16 callers.
func BenchmarkAppendParallel(b *testing.B) { benchParallel(b, false) }

// BenchmarkReportModelDay: Store.Report by model and day over the whole
// 90 days (as `rotor ledger report --by model,day --since 400d`) and over
// the last 24 hours, on 1M rows.
func BenchmarkReportModelDay(b *testing.B) {
	for _, r := range []struct {
		name string
		back time.Duration
	}{{"all", 400 * 24 * time.Hour}, {"24h", 24 * time.Hour}} {
		b.Run("rows=1M/range="+r.name, func(b *testing.B) {
			if testing.Short() {
				b.Skip("-short")
			}
			path := cachedFixture(b, 1_000_000)
			s := ledgertest.OpenAt(b, path, ledger.Options{Clock: clock.NewFake(fixtureAnchor)})
			// As the CLI asks: --since DUR is [now-DUR, now+1ms).
			q := ledger.ReportQuery{From: fixtureAnchor.Add(-r.back), To: fixtureAnchor.Add(time.Millisecond), By: []string{ledger.KeyModel, ledger.KeyDay}}
			for b.Loop() {
				rows, err := s.Report(context.Background(), q)
				if err != nil {
					b.Fatal(err)
				}
				if len(rows) == 0 {
					b.Fatal("empty report")
				}
			}
		})
	}
}

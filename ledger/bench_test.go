package ledger_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/testutil/ledgerbench"
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

var benchSizes = []ledgerbench.Size{{Name: "10k", Rows: 10_000}, {Name: "1M", Rows: 1_000_000}, {Name: "10M", Rows: 10_000_000}}

// shiftedClock is the wall clock moved back to fixtureAnchor at the start of
// a run: rows are appended right after the fixture's at the rate the
// benchmark reaches, and windows slide as they do in production.
type shiftedClock struct{ d time.Duration }

func (c shiftedClock) Now() time.Time                       { return time.Now().Add(c.d) }
func (c shiftedClock) NewTimer(d time.Duration) clock.Timer { return clock.Real().NewTimer(d) }

// openBench opens a reset fixture of rows rows with the clock at
// fixtureAnchor; withBudgets adds ledgerbench.Budgets.
func openBench(b *testing.B, rows int, withBudgets bool) ledgerbench.Writer {
	b.Helper()
	path := cachedFixture(b, rows)
	clk := shiftedClock{d: fixtureAnchor.Sub(time.Now())}
	s := ledgertest.OpenAt(b, path, ledger.Options{Clock: clk, Synchronous: os.Getenv("ROTOR_BENCH_SYNC")})
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
// evaluating ledgerbench.Budgets inside the writer's transaction) and
// settle.
func BenchmarkAdmission(b *testing.B) { ledgerbench.Sequential(b, benchSizes, openBench, true) }

// BenchmarkAppend: reserve and settle without budgets.
func BenchmarkAppend(b *testing.B) { ledgerbench.Sequential(b, benchSizes, openBench, false) }

// BenchmarkAdmissionParallel is BenchmarkAdmission with 16 callers; ns/op
// is the inverse of the throughput.
func BenchmarkAdmissionParallel(b *testing.B) { ledgerbench.Parallel(b, benchSizes, openBench, true) }

// BenchmarkAppendParallel is BenchmarkAppend with 16 callers.
func BenchmarkAppendParallel(b *testing.B) { ledgerbench.Parallel(b, benchSizes, openBench, false) }

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

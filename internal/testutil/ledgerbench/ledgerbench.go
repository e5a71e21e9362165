// Package ledgerbench is the harness of the ledger benchmarks that both
// engines run (ledger and ledger/pgledger; scripts/bench-ledger.sh prints
// them side by side): the same budgets, the same request, the same
// sequential and 16-caller loops and the same CPU meter, so that the two
// engines' figures differ only by the engine.
package ledgerbench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/ledger"
)

// Size is a ledger size a benchmark runs at, named as in its sub-benchmark
// (rows=10k).
type Size struct {
	Name string
	Rows int
}

// Budgets span rollups and raw edges: two rolling 30d windows (one
// computation, shared), a rolling 24h and a calendar month. Their limits
// are never reached, so every reservation is admitted and written.
var Budgets = []budgets.Budget{
	{Name: "requests-30d", Kind: budgets.KindRequests, Limit: 1 << 50, Window: budgets.Window{Rolling: 30 * 24 * time.Hour}},
	{Name: "tokens-30d", Kind: budgets.KindTokens, Limit: 1 << 60, Window: budgets.Window{Rolling: 30 * 24 * time.Hour}},
	{Name: "requests-24h", Kind: budgets.KindRequests, Limit: 1 << 50, Window: budgets.Window{Rolling: 24 * time.Hour}},
	{Name: "tokens-month", Kind: budgets.KindTokens, Limit: 1 << 60, Window: budgets.Window{Calendar: budgets.CalendarMonth}},
}

// Writer is the part of a ledger a benchmark request uses.
type Writer interface {
	Reserve(ctx context.Context, r ledger.Reservation, admit ledger.Admitter) error
	Settle(ctx context.Context, st ledger.Settlement) error
}

// Open opens a ledger of rows rows for a benchmark, with Budgets in it
// when withBudgets is set; the harness warms it.
type Open func(b *testing.B, rows int, withBudgets bool) Writer

var seq atomic.Int64

// ReserveSettle is one request's ledger work: admission and reservation,
// then the settled row.
func ReserveSettle(w Writer, adm ledger.Admitter) error {
	ctx := context.Background()
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	id := hex.EncodeToString(raw[:])
	n := seq.Add(1)
	err := w.Reserve(ctx, ledger.Reservation{RequestID: id, Expires: time.Now().Add(time.Hour), Operation: budgets.OperationDecisions,
		Pool: "api", Model: "gpt-4o-mini", Client: "default"}, adm)
	if err != nil {
		return fmt.Errorf("reserve: %w", err)
	}
	in, out := 100+n%900, 20+n%300
	err = w.Settle(ctx, ledger.Settlement{RequestID: id, Model: "gpt-4o-mini", Credential: "team-1", Attempts: 1, Status: 200,
		InputTokens: ledger.Known(in), OutputTokens: ledger.Known(out), TotalTokens: ledger.Known(in + out), Latency: 300 * time.Millisecond})
	if err != nil {
		return fmt.Errorf("settle: %w", err)
	}
	return nil
}

// warm opens a ledger of rows rows (skipped beyond 10k under -short), with
// the budgets' admitter when asked, and warms the statement and page
// caches with a few requests.
func warm(b *testing.B, open Open, rows int, withBudgets bool) (Writer, ledger.Admitter) {
	b.Helper()
	if testing.Short() && rows > 10_000 {
		b.Skip("-short")
	}
	w := open(b, rows, withBudgets)
	var adm ledger.Admitter
	if withBudgets {
		adm = budgets.NewAdmitter()
	}
	for range 20 {
		if err := ReserveSettle(w, adm); err != nil {
			b.Fatal(err)
		}
	}
	return w, adm
}

// Sequential runs one request after another at each size: one request's
// latency, its two commits (reserve, settle) included.
func Sequential(b *testing.B, sizes []Size, open Open, withBudgets bool) {
	for _, size := range sizes {
		b.Run("rows="+size.Name, func(b *testing.B) {
			w, adm := warm(b, open, size.Rows, withBudgets)
			cpu := startCPU()
			for b.Loop() {
				if err := ReserveSettle(w, adm); err != nil {
					b.Fatal(err)
				}
			}
			cpu.report(b)
		})
	}
}

// Parallel runs 16 callers at each size (on two cores); ns/op is the
// inverse of the throughput.
func Parallel(b *testing.B, sizes []Size, open Open, withBudgets bool) {
	for _, size := range sizes {
		b.Run("rows="+size.Name, func(b *testing.B) {
			w, adm := warm(b, open, size.Rows, withBudgets)
			b.SetParallelism(8) // 16 callers on 2 cores
			b.ResetTimer()
			cpu := startCPU()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := ReserveSettle(w, adm); err != nil {
						b.Error(err)
						return
					}
				}
			})
			cpu.report(b)
		})
	}
}

// cpuMeter reports the process's CPU time per op as cpu-ns/op: on a shared
// machine it varies far less than ns/op, which also counts waiting for
// fsync, for the server and for the CPU. A server's own CPU (PostgreSQL's)
// is not in it.
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

// The added-latency benchmark measures the whole runtime stack on purpose
// (route, pool, ledger behind the gateway), so it is an external test
// package: the gateway itself imports no route package.
package gateway_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/decisions"
	"github.com/rotorhq/rotor/gateway"
	"github.com/rotorhq/rotor/internal/clock"
	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/internal/secret"
	"github.com/rotorhq/rotor/internal/testutil/ledgertest"
	"github.com/rotorhq/rotor/ledger"
	"github.com/rotorhq/rotor/pool"
)

const benchToken = "rtr_bench-0123456789abcdefghijklmnopqrstuvwx"

// latencyClients is issue 4's concurrency.
const latencyClients = 16

// latencyBlock is how many requests each mode sends before the other
// takes its turn, so that drift during the run hits both alike.
const latencyBlock = 2000

// latencyTarget is one way to reach the provider.
type latencyTarget struct {
	url, auth string
	body      []byte
	client    *http.Client
}

// newLatencyTargets starts the fake provider (default ~1 KB answers with
// usage, recording off) and the runtime in front of it, as `rotor runtime
// start` builds it: three credentials, model cooldown on, a requests and a
// tokens budget that never refuse, the ledger in tb.TempDir(), logging at
// warn (the per-request access log is an info line).
func newLatencyTargets(tb testing.TB) (direct, through *latencyTarget) {
	tb.Helper()
	p, err := fp.Start(fp.Options{DisableRecording: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { p.Close() })
	store := ledgertest.Open(tb)
	for _, bd := range []ledger.BudgetRecord{
		{Name: "requests-30d", Kind: "requests", Limit: 1_000_000_000, Window: "30d"},
		{Name: "tokens-month", Kind: "tokens", Limit: 1_000_000_000_000_000, Window: "month"},
	} {
		if err := store.PutBudget(context.Background(), bd, false); err != nil {
			tb.Fatal(err)
		}
	}

	clk := clock.Real()
	log := slog.New(slog.NewJSONHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
	metrics := gateway.NewMetrics()
	var keys []string
	var pcreds []pool.Credential
	var dcreds []decisions.CredentialConfig
	for _, name := range []string{"bench-a", "bench-b", "bench-c"} {
		key := "sk-latency-" + name + "-0123456789abcdef"
		keys = append(keys, key)
		p.AddKey(key, "decide-mini")
		pcreds = append(pcreds, pool.Credential{Name: name, Key: secret.New(key)})
		dcreds = append(dcreds, decisions.CredentialConfig{Name: name, Region: "us", BaseURL: p.URL(), Key: secret.New(key),
			Allow: []string{"decide-*"}, Profiles: map[string][]string{"decide-mini": {decisions.Endpoint}}})
	}
	pl := pool.New(pool.Config{
		Options:     pool.Options{Name: "api", CatalogTTL: 10 * time.Minute},
		Credentials: pcreds,
		Settings:    pool.Settings{ModelCooldownEnabled: true, MaxSeconds: 3600},
		Store:       pool.NewStore(clk, 0), Clock: clk, Logger: log,
	})
	router := decisions.New(decisions.Config{
		Pools:  []decisions.PoolConfig{{Name: "api", Credentials: dcreds, Pool: pl}},
		Ledger: store, Admitter: budgets.NewAdmitter(), Clock: clk, Logger: log,
		Deadline: 60 * time.Second, CatalogTTL: 10 * time.Minute, CatalogTimeout: 10 * time.Second,
		Metrics: metrics, UserAgent: "rotor/bench",
	})
	var h http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { h.ServeHTTP(w, r) }))
	tb.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	status := func(ctx context.Context) any {
		return router.StatusDocument(ctx, "bench", decisions.BudgetLister(store))
	}
	h = gateway.New(gateway.Config{Decisions: router, Status: status, Token: secret.New(benchToken), Metrics: metrics,
		Logger: log, Clock: clk, Port: port}).Handler()

	newClient := func() *http.Client {
		tr := &http.Transport{MaxIdleConns: 4 * latencyClients, MaxIdleConnsPerHost: 4 * latencyClients, DisableCompression: true}
		tb.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr, Timeout: time.Minute}
	}
	const question = `"input":"Is the sky blue?","question":{"type":"predicate"}}`
	direct = &latencyTarget{url: p.URL() + fp.PathDecisions, auth: "Bearer " + keys[0],
		body: []byte(`{"model":"decide-mini",` + question), client: newClient()}
	through = &latencyTarget{url: srv.URL + "/v1/decisions", auth: "Bearer " + benchToken,
		body: []byte(`{"model":"api/decide-mini",` + question), client: newClient()}
	return direct, through
}

// run sends n requests from latencyClients goroutines and returns each
// one's latency, answer read included.
func (t *latencyTarget) run(tb testing.TB, n int) []time.Duration {
	tb.Helper()
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range latencyClients {
		wg.Go(func() {
			buf := make([]byte, 8<<10)
			for !failed.Load() {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				req, _ := http.NewRequest(http.MethodPost, t.url, bytes.NewReader(t.body))
				req.Header.Set("Authorization", t.auth)
				req.Header.Set("Content-Type", "application/json")
				start := time.Now()
				resp, err := t.client.Do(req)
				if err != nil {
					tb.Error(err)
					failed.Store(true)
					return
				}
				_, err = io.CopyBuffer(struct{ io.Writer }{io.Discard}, resp.Body, buf)
				resp.Body.Close()
				lat[i] = time.Since(start)
				if err != nil || resp.StatusCode != http.StatusOK {
					tb.Errorf("POST %s: status %d, %v", t.url, resp.StatusCode, err)
					failed.Store(true)
					return
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() {
		tb.FailNow()
	}
	return lat
}

// BenchmarkAddedLatency measures issue 4's performance figure: through the
// runtime to the fake provider on loopback, 16 concurrent clients, the
// median added latency per request over a direct call (target: under
// 1 ms), ledger write included (the answer waits for its row's commit).
//
// Each op is one request through the runtime and one direct request, sent
// in alternating blocks of latencyBlock; the metrics that matter are
// added-p50-µs (runtime p50 minus direct p50) and the percentiles beside
// it. Provider, runtime and clients share one process here; scripts/bench.sh
// measures the real binary in its own process. Run with, e.g.:
//
//	go test ./gateway -run '^$' -bench AddedLatency -benchtime 20000x
func BenchmarkAddedLatency(b *testing.B) {
	direct, through := newLatencyTargets(b)
	// Warm-up: open the connections, fetch the catalogs.
	direct.run(b, 500)
	through.run(b, 500)

	var dl, rl []time.Duration
	b.ResetTimer()
	for left := b.N; left > 0; {
		n := min(left, latencyBlock)
		dl = append(dl, direct.run(b, n)...)
		rl = append(rl, through.run(b, n)...)
		left -= n
	}
	b.StopTimer()

	slices.Sort(dl)
	slices.Sort(rl)
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(latencyPercentile(rl, 50)-latencyPercentile(dl, 50)), "added-p50-µs")
	b.ReportMetric(us(latencyPercentile(dl, 50)), "direct-p50-µs")
	b.ReportMetric(us(latencyPercentile(rl, 50)), "runtime-p50-µs")
	b.ReportMetric(us(latencyPercentile(dl, 99)), "direct-p99-µs")
	b.ReportMetric(us(latencyPercentile(rl, 99)), "runtime-p99-µs")
}

// latencyPercentile is the nearest-rank percentile of sorted latencies.
func latencyPercentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[max(1, (len(sorted)*p+99)/100)-1]
}

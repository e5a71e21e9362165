package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Modes.
const (
	modeDirect = "direct"
	modeBare   = "bare"
	modeRotor  = "rotor"
)

// modeTitle is how the table names a mode.
var modeTitle = map[string]string{
	modeDirect: "direct to provider",
	modeBare:   "bare httputil.ReverseProxy",
	modeRotor:  "rotor bridge start",
}

// target is one mode's endpoint and its keep-alive client.
type target struct {
	mode   string
	url    string
	auth   string
	body   []byte
	client *http.Client
	ok     atomic.Int64 // answers with status 200, warm-ups included
	// metrics, when set, reads the server's unlabelled Prometheus samples
	// (rotor's GET /metrics) around each measured cell.
	metrics func(context.Context) (map[string]float64, error)
}

// newTarget returns a target with its own transport, idle connections
// enough for maxConc clients.
func newTarget(mode, baseURL, token, model string, maxConc int) *target {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        2 * maxConc,
		MaxIdleConnsPerHost: 2 * maxConc,
		IdleConnTimeout:     5 * time.Minute,
		DisableCompression:  true,
	}
	return &target{
		mode:   mode,
		url:    baseURL + "/v1/decisions",
		auth:   "Bearer " + token,
		body:   fmt.Appendf(nil, `{"model":%q,"input":"Is the sky blue? Answer from the picture's description.","question":{"type":"predicate"}}`, model),
		client: &http.Client{Transport: tr, Timeout: 2 * time.Minute},
	}
}

func (t *target) close() { t.client.CloseIdleConnections() }

// do sends one request and reads the whole answer into buf's space.
func (t *target) do(ctx context.Context, buf []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(t.body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", t.auth)
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.client.Do(req)
	if err != nil {
		return err
	}
	n := 0
	for {
		m, err := resp.Body.Read(buf)
		n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			resp.Body.Close()
			return err
		}
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d: %.300s", resp.StatusCode, buf[:min(n, len(buf))])
	}
	t.ok.Add(1)
	return nil
}

// cellResult is one measured cell: n requests at one concurrency.
type cellResult struct {
	n        int
	elapsed  time.Duration
	p50, p99 time.Duration
	// ledger is rotor's group-commit activity during the cell, when known.
	ledger *ledgerDelta
}

// ledgerDelta is what rotor's ledger metrics moved by during a cell.
type ledgerDelta struct {
	commits, writes, commitSeconds float64
	// commitP50 is the median commit time, interpolated within the
	// histogram's buckets (NaN when they did not move).
	commitP50 float64
}

func ledgerMetrics(m0, m1 map[string]float64) *ledgerDelta {
	const c, w = "rotor_ledger_commit_seconds", "rotor_ledger_batch_writes"
	for _, k := range []string{c + "_count", c + "_sum", w + "_sum"} {
		if _, ok := m0[k]; !ok {
			return nil
		}
		if _, ok := m1[k]; !ok {
			return nil
		}
	}
	return &ledgerDelta{
		commits:       m1[c+"_count"] - m0[c+"_count"],
		writes:        m1[w+"_sum"] - m0[w+"_sum"],
		commitSeconds: m1[c+"_sum"] - m0[c+"_sum"],
		commitP50:     histogramQuantile(0.5, bucketDeltas(c, m0, m1)),
	}
}

// bucket is one cumulative histogram bucket: count observations <= le.
type bucket struct{ le, count float64 }

// bucketDeltas returns how much each bucket of histogram name moved from
// m0 to m1, in order of le.
func bucketDeltas(name string, m0, m1 map[string]float64) []bucket {
	prefix := name + `_bucket{le="`
	var bs []bucket
	for k, v := range m1 {
		le, ok := strings.CutPrefix(k, prefix)
		if !ok {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSuffix(le, `"}`), 64)
		if err != nil {
			continue
		}
		bs = append(bs, bucket{le: f, count: v - m0[k]})
	}
	slices.SortFunc(bs, func(a, b bucket) int { return cmp.Compare(a.le, b.le) })
	return bs
}

// histogramQuantile estimates quantile q of cumulative buckets as
// Prometheus does: linearly within the bucket that holds it, from the
// previous bound (0 for the first). It returns NaN without observations,
// and the highest finite bound when q falls in the +Inf bucket.
func histogramQuantile(q float64, bs []bucket) float64 {
	if len(bs) == 0 || bs[len(bs)-1].count <= 0 {
		return math.NaN()
	}
	rank := q * bs[len(bs)-1].count
	lower, below := 0.0, 0.0
	for _, b := range bs {
		if b.count >= rank {
			if math.IsInf(b.le, 1) {
				return lower
			}
			if b.count == below {
				return b.le
			}
			return lower + (b.le-lower)*(rank-below)/(b.count-below)
		}
		lower, below = b.le, b.count
	}
	return lower
}

func (c cellResult) rps() float64 { return float64(c.n) / c.elapsed.Seconds() }

// load sends n requests from conc clients and returns each request's
// latency (in request order) and the wall time. progress, when set,
// counts finished requests. It stops at the first failed request.
func load(ctx context.Context, t *target, conc, n int, progress *atomic.Int64) ([]time.Duration, time.Duration, error) {
	lat := make([]time.Duration, n)
	var next atomic.Int64
	var firstErr error
	var errOnce sync.Once
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	start := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, 8<<10)
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				err := t.do(ctx, buf)
				lat[i] = time.Since(t0)
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("%s: request %d: %w", t.mode, i, err); cancel() })
					return
				}
				if progress != nil {
					progress.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return lat, elapsed, firstErr
}

// measure runs warmup unmeasured requests, then n measured ones.
func measure(ctx context.Context, t *target, conc, warmup, n int) (cellResult, error) {
	if warmup > 0 {
		if _, _, err := load(ctx, t, conc, warmup, nil); err != nil {
			return cellResult{}, fmt.Errorf("warm-up: %w", err)
		}
	}
	// Start each cell with the load generator's own garbage collected, so
	// that one cell's debt is not paid in the next.
	goruntime.GC()
	var m0 map[string]float64
	if t.metrics != nil {
		m0, _ = t.metrics(ctx)
	}
	lat, elapsed, err := load(ctx, t, conc, n, nil)
	if err != nil {
		return cellResult{}, err
	}
	res := cellResult{n: n, elapsed: elapsed}
	if m0 != nil {
		if m1, err := t.metrics(ctx); err == nil {
			res.ledger = ledgerMetrics(m0, m1)
		}
	}
	slices.Sort(lat)
	res.p50, res.p99 = percentile(lat, 50), percentile(lat, 99)
	return res, nil
}

// percentile is the nearest-rank percentile of sorted latencies.
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := (len(sorted)*p + 99) / 100 // ceil(n*p/100)
	if rank < 1 {
		rank = 1
	}
	return sorted[rank-1]
}

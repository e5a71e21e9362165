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

// The request paths: Decisions, and chat completions for the stream cells.
const (
	decisionsPath = "/v1/decisions"
	chatPath      = "/v1/chat/completions"
)

// streamDone ends a complete chat stream.
var streamDone = []byte("data: [DONE]\n\n")

// target is one mode's endpoint and its keep-alive client.
type target struct {
	mode   string
	url    string
	auth   string
	body   []byte
	stream bool // a chat stream: the answer must end with data: [DONE]
	client *http.Client
	ok     atomic.Int64 // answers with status 200, warm-ups included
	// lastBytes is the length of the last answer.
	lastBytes atomic.Int64
	// metrics, when set, reads the server's unlabelled Prometheus samples
	// (rotor's GET /metrics) around each measured cell.
	metrics func(context.Context) (map[string]float64, error)
}

// newTarget returns a Decisions target with its own transport, idle
// connections enough for maxConc clients.
func newTarget(mode, baseURL, token, model string, maxConc int) *target {
	return newPathTarget(mode, baseURL+decisionsPath, token, maxConc,
		fmt.Appendf(nil, `{"model":%q,"input":"Is the sky blue? Answer from the picture's description.","question":{"type":"predicate"}}`, model))
}

// newStreamTarget returns a chat-stream target ("stream": true, no
// stream_options: rotor adds include_usage and removes the usage chunk,
// its usual work on a stream).
func newStreamTarget(mode, baseURL, token, model string, maxConc int) *target {
	t := newPathTarget(mode, baseURL+chatPath, token, maxConc,
		fmt.Appendf(nil, `{"model":%q,"stream":true,"messages":[{"role":"user","content":"Describe the sky in two hundred words."}]}`, model))
	t.stream = true
	return t
}

func newPathTarget(mode, url, token string, maxConc int, body []byte) *target {
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        2 * maxConc,
		MaxIdleConnsPerHost: 2 * maxConc,
		IdleConnTimeout:     5 * time.Minute,
		DisableCompression:  true,
	}
	return &target{
		mode:   mode,
		url:    url,
		auth:   "Bearer " + token,
		body:   body,
		client: &http.Client{Transport: tr, Timeout: 2 * time.Minute},
	}
}

func (t *target) close() { t.client.CloseIdleConnections() }

// do sends one request, reads the whole answer into buf's space and
// returns the time to its first body byte. A stream must end with
// data: [DONE].
func (t *target) do(ctx context.Context, buf []byte) (ttfb time.Duration, err error) {
	resp, t0, err := t.send(ctx)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n := 0
	var tail [16]byte // the answer's last bytes
	for {
		m, err := resp.Body.Read(buf)
		if m > 0 {
			if n == 0 {
				ttfb = time.Since(t0)
			}
			n += m
			keepTail(tail[:], buf[:m])
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return ttfb, err
		}
	}
	if resp.StatusCode != http.StatusOK {
		return ttfb, fmt.Errorf("status %d: %.300s", resp.StatusCode, buf[:min(n, len(buf))])
	}
	if t.stream && !bytes.HasSuffix(tail[:], streamDone) {
		return ttfb, fmt.Errorf("stream cut: %d bytes without a closing data: [DONE]", n)
	}
	t.ok.Add(1)
	t.lastBytes.Store(int64(n))
	return ttfb, nil
}

// send posts the target's body and returns the response and when the
// request started.
func (t *target) send(ctx context.Context) (*http.Response, time.Time, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(t.body))
	if err != nil {
		return nil, time.Time{}, err
	}
	req.Header.Set("Authorization", t.auth)
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := t.client.Do(req)
	return resp, t0, err
}

// keepTail shifts p's last bytes into tail.
func keepTail(tail, p []byte) {
	if len(p) >= len(tail) {
		copy(tail, p[len(p)-len(tail):])
		return
	}
	copy(tail, tail[len(p):])
	copy(tail[len(tail)-len(p):], p)
}

// cellResult is one measured cell: n requests at one concurrency.
type cellResult struct {
	n        int
	elapsed  time.Duration
	p50, p99 time.Duration
	// ttfbP50 is the median time to the first body byte.
	ttfbP50 time.Duration
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
// latency and time to first byte (in request order) and the wall time.
// progress, when set, counts finished requests. It stops at the first
// failed request.
func load(ctx context.Context, t *target, conc, n int, progress *atomic.Int64) (lat, ttfb []time.Duration, _ time.Duration, _ error) {
	lat, ttfb = make([]time.Duration, n), make([]time.Duration, n)
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
				first, err := t.do(ctx, buf)
				lat[i], ttfb[i] = time.Since(t0), first
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
	return lat, ttfb, elapsed, firstErr
}

// measure runs warmup unmeasured requests, then n measured ones.
func measure(ctx context.Context, t *target, conc, warmup, n int) (cellResult, error) {
	if warmup > 0 {
		if _, _, _, err := load(ctx, t, conc, warmup, nil); err != nil {
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
	lat, ttfb, elapsed, err := load(ctx, t, conc, n, nil)
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
	slices.Sort(ttfb)
	res.ttfbP50 = percentile(ttfb, 50)
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

package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// rssTargetMiB is issue 7's bound on the bridge's RSS after 200,000
// requests.
const rssTargetMiB = 80

// sample is one look at the bridge's memory.
type sample struct {
	at         time.Duration
	requests   int64
	rss, hwm   int64 // bytes, /proc/PID/status VmRSS and VmHWM
	heapInuse  float64
	nextGC     float64 // the heap goal: about twice the heap live after the last GC
	goroutines float64
	err        error
}

// runSoak sends o.soakRequests through the bridge and samples its memory.
func runSoak(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	r, err := startRig(ctx, o, false, true)
	if err != nil {
		return err
	}
	defer r.release()
	t := newTarget(modeRotor, r.bridge.url, r.token, "api/"+benchModel, o.soakConcurrency)
	defer t.close()
	pid := r.bridge.pid()
	mc := &http.Client{Timeout: 5 * time.Second}
	take := func(start time.Time, done int64) sample {
		s := sample{at: time.Since(start), requests: done}
		s.rss, s.hwm, s.err = readRSS(pid)
		if s.err == nil {
			var m map[string]float64
			m, s.err = scrapeMetrics(ctx, mc, r.bridge.url, r.token)
			s.heapInuse, s.nextGC, s.goroutines = m["go_memstats_heap_inuse_bytes"], m["go_memstats_next_gc_bytes"], m["go_goroutines"]
		}
		return s
	}

	fmt.Fprintf(stderr, "rotor-bench: soak, %d requests through the bridge at %d clients, sampling every %s\n", o.soakRequests, o.soakConcurrency, o.sampleEvery)
	cpu0, cpuOK := takeCPU(r.pids())
	start := time.Now()
	var done atomic.Int64
	var mu sync.Mutex
	samples := []sample{take(start, 0)}
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(o.sampleEvery)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				s := take(start, done.Load())
				mu.Lock()
				samples = append(samples, s)
				n := len(samples)
				mu.Unlock()
				if n%20 == 0 {
					fmt.Fprintf(stderr, "soak: %d requests, rss %.1f MiB, heap in use %.1f MiB\n", s.requests, mib(s.rss), mib(s.heapInuse))
				}
			}
		}
	}()
	lat, _, elapsed, lerr := load(ctx, t, o.soakConcurrency, o.soakRequests, &done)
	close(stop)
	<-sampled
	if lerr != nil {
		return lerr
	}
	end := take(start, done.Load())
	samples = append(samples, end)
	cpuLine := "unknown (no /proc)"
	if cpu1, ok := takeCPU(r.pids()); ok && cpuOK {
		cpuLine = foreignCPU(cpu0, cpu1)
	}
	for _, s := range samples {
		if s.err != nil {
			return fmt.Errorf("memory sample at %s: %w", s.at.Round(time.Millisecond), s.err)
		}
	}
	slices.Sort(lat)

	t.close()
	ledgerLine, err := r.stopAndCheckLedger(ctx, t.ok.Load())
	if err != nil {
		return err
	}

	var maxRSS int64
	for _, s := range samples {
		maxRSS = max(maxRSS, s.rss)
	}
	half := int64(o.soakRequests / 2)
	var second []sample
	for _, s := range samples {
		if s.requests >= half {
			second = append(second, s)
		}
	}
	heapSlope, heapFitGrowth := fitGrowth(second, func(s sample) float64 { return s.heapInuse }, float64(int64(o.soakRequests)-half))
	goalSlope, goalFitGrowth := fitGrowth(second, func(s sample) float64 { return s.nextGC }, float64(int64(o.soakRequests)-half))
	_, rssFitGrowth := fitGrowth(second, func(s sample) float64 { return float64(s.rss) }, float64(int64(o.soakRequests)-half))
	q := max(1, len(second)/4)
	heapMid := median(values(second[:q], func(s sample) float64 { return s.heapInuse }))
	heapEnd := median(values(second[len(second)-q:], func(s sample) float64 { return s.heapInuse }))
	goalMid := median(values(second[:q], func(s sample) float64 { return s.nextGC }))
	goalEnd := median(values(second[len(second)-q:], func(s sample) float64 { return s.nextGC }))
	meanHeap := mean(values(second, func(s sample) float64 { return s.heapInuse }))
	meanGoal := mean(values(second, func(s sample) float64 { return s.nextGC }))
	// Growth that matters: more than 2 MiB and more than 10% of the level,
	// in the fitted line of either series.
	grew := (heapFitGrowth > 2<<20 && heapFitGrowth > 0.1*meanHeap) || (goalFitGrowth > 2<<20 && goalFitGrowth > 0.1*meanGoal)

	fmt.Fprintf(stdout, "rotor-bench soak, %s", time.Now().UTC().Format(time.RFC3339))
	if o.label != "" {
		fmt.Fprintf(stdout, ", %s", o.label)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintf(stdout, "machine: %s\n", machine())
	fmt.Fprintf(stdout, "CPU during the run: %s\n", cpuLine)
	fmt.Fprintf(stdout, "load: %d requests through `rotor bridge start` at %d clients in %s (%.0f req/s, p50 %d µs, p99 %d µs); rotor log.level=%s\n",
		o.soakRequests, o.soakConcurrency, elapsed.Round(time.Millisecond), float64(o.soakRequests)/elapsed.Seconds(),
		percentile(lat, 50).Microseconds(), percentile(lat, 99).Microseconds(), o.logLevel)
	fmt.Fprintln(stdout, ledgerLine)
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, "| t s | requests | RSS MiB | heap in use MiB | GC goal MiB | goroutines |")
	fmt.Fprintln(stdout, "| ---: | ---: | ---: | ---: | ---: | ---: |")
	step := max(1, len(samples)/20)
	for i, s := range samples {
		if i%step != 0 && i != len(samples)-1 {
			continue
		}
		fmt.Fprintf(stdout, "| %.1f | %d | %.1f | %.1f | %.1f | %.0f |\n", s.at.Seconds(), s.requests, mib(s.rss), mib(s.heapInuse), mib(s.nextGC), s.goroutines)
	}
	fmt.Fprintln(stdout)
	verdict := "PASS"
	if mib(maxRSS) >= rssTargetMiB || mib(end.hwm) >= rssTargetMiB {
		verdict = "FAIL"
	}
	fmt.Fprintf(stdout, "max RSS: %.1f MiB sampled, %.1f MiB peak (VmHWM); target < %d MiB: %s\n", mib(maxRSS), mib(end.hwm), rssTargetMiB, verdict)
	fmt.Fprintf(stdout, "second half (%d samples from request %d): heap in use %.1f -> %.1f MiB (first vs last quarter medians), fitted slope %+.1f bytes per 1k requests = %+.2f MiB over the half\n",
		len(second), half, mib(heapMid), mib(heapEnd), heapSlope*1000, mib(heapFitGrowth))
	fmt.Fprintf(stdout, "second half: GC goal (next_gc, ~2x live heap after GC) %.1f -> %.1f MiB, fitted %+.2f MiB over the half (slope %+.1f bytes per 1k requests)\n",
		mib(goalMid), mib(goalEnd), mib(goalFitGrowth), goalSlope*1000)
	fmt.Fprintf(stdout, "second half: RSS %.1f -> %.1f MiB (first vs last quarter medians), fitted %+.2f MiB over the half (RSS includes SQLite's page cache and allocator, outside the Go heap)\n",
		mib(median(values(second[:q], func(s sample) float64 { return float64(s.rss) }))),
		mib(median(values(second[len(second)-q:], func(s sample) float64 { return float64(s.rss) }))), mib(rssFitGrowth))
	fmt.Fprintf(stdout, "goroutines: %.0f at the midpoint, %.0f at the end\n", second[0].goroutines, end.goroutines)
	grewWord := "no"
	if grew {
		grewWord = "yes"
	}
	fmt.Fprintf(stdout, "soak_max_rss_mib=%.1f soak_peak_rss_mib=%.1f rss_growth_second_half_mib=%.2f heap_growth_second_half_mib=%.2f gc_goal_growth_second_half_mib=%.2f heap_grew=%s\n",
		mib(maxRSS), mib(end.hwm), mib(rssFitGrowth), mib(heapFitGrowth), mib(goalFitGrowth), grewWord)
	return nil
}

func mib[T int64 | float64](b T) float64 { return float64(b) / (1 << 20) }

func values(ss []sample, f func(sample) float64) []float64 {
	out := make([]float64, len(ss))
	for i, s := range ss {
		out[i] = f(s)
	}
	return out
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// fitGrowth fits y = a + b*requests by least squares and returns the slope
// b (bytes per request) and b*span.
func fitGrowth(ss []sample, y func(sample) float64, span float64) (slope, growth float64) {
	if len(ss) < 2 {
		return math.NaN(), math.NaN()
	}
	var mx, my float64
	for _, s := range ss {
		mx += float64(s.requests)
		my += y(s)
	}
	n := float64(len(ss))
	mx, my = mx/n, my/n
	var sxy, sxx float64
	for _, s := range ss {
		dx := float64(s.requests) - mx
		sxy += dx * (y(s) - my)
		sxx += dx * dx
	}
	if sxx == 0 {
		return math.NaN(), math.NaN()
	}
	slope = sxy / sxx
	return slope, slope * span
}

// readRSS reads VmRSS and VmHWM from /proc/PID/status.
func readRSS(pid int) (rss, hwm int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		fs := strings.Fields(v)
		if len(fs) != 2 || fs[1] != "kB" {
			return 0, 0, fmt.Errorf("/proc/%d/status: unexpected %s line %q", pid, k, v)
		}
		n, err := strconv.ParseInt(fs[0], 10, 64)
		if err != nil {
			return 0, 0, err
		}
		if k == "VmRSS" {
			rss = n << 10
		} else {
			hwm = n << 10
		}
	}
	if rss == 0 {
		return 0, 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
	}
	return rss, hwm, sc.Err()
}

// scrapeMetrics reads the unlabelled samples of GET /metrics.
func scrapeMetrics(ctx context.Context, c *http.Client, baseURL, token string) (map[string]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, baseURL+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: status %d", resp.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		// "series value": a labelled series is keyed by its whole
		// name{labels} (client_golang writes no timestamps).
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if f, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = f
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if _, ok := out["go_memstats_heap_inuse_bytes"]; !ok {
		return nil, fmt.Errorf("GET /metrics: no go_memstats_heap_inuse_bytes")
	}
	return out, nil
}

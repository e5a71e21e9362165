package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"math"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rotorhq/rotor/internal/dburl"
)

// cellKey names a table row.
type cellKey struct {
	mode string
	conc int
}

// row is a table row: medians across rounds.
type row struct {
	rps, rpsMin, rpsMax float64
	p50, p99, ttfbP50   time.Duration
}

// runBench measures every mode at every concurrency, round by round: the
// Decisions cells, then the chat-stream cells, then rotor's memory with
// stalled streams held open.
func runBench(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	maxConc := slices.Max(o.concurrency)
	withRotor := contains(o.modes, modeRotor)
	r, err := startRig(ctx, o, contains(o.modes, modeBare), withRotor)
	if err != nil {
		return err
	}
	defer r.release() // idempotent; the normal path closes it earlier
	targets := r.targets(newTarget, benchModel, maxConc)
	var streamTargets map[string]*target
	if o.streamRequests > 0 {
		streamTargets = r.targets(newStreamTarget, streamModel, slices.Max(o.streamConcurrency))
	}
	if t := targets[modeRotor]; t != nil {
		mc := &http.Client{Timeout: 5 * time.Second}
		t.metrics = func(ctx context.Context) (map[string]float64, error) {
			return scrapeMetrics(ctx, mc, r.bridge.url, r.token)
		}
	}
	defer closeTargets(targets, streamTargets)

	start := time.Now()
	fmt.Fprintf(stderr, "rotor-bench: %d rounds x %d concurrencies x %d modes, %d requests per cell (+%d warm-up)\n",
		o.rounds, len(o.concurrency), len(o.modes), o.requests, o.warmup)
	if err := warmUp(ctx, o, targets, "decisions", o.concurrency, o.warmup); err != nil {
		return err
	}
	cpu0, cpuOK := takeCPU(r.pids())
	per0 := takePerRequest(r, targets)
	results, err := rounds(ctx, o, targets, "decisions", o.concurrency, o.warmup, o.requests, stderr)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	cpuLine := "unknown (no /proc)"
	if cpu1, ok := takeCPU(r.pids()); ok && cpuOK {
		cpuLine = foreignCPU(cpu0, cpu1)
	}
	perLine := perRequestLine(per0, takePerRequest(r, targets), false)

	var streamResults map[cellKey][]cellResult
	var streamElapsed time.Duration
	var streamCPU, streamWrites string
	if streamTargets != nil {
		sper0 := takePerRequest(r, streamTargets)
		fmt.Fprintf(stderr, "rotor-bench: streams of %d events, %d rounds x %d concurrencies x %d modes, %d streams per cell (+%d warm-up)\n",
			o.streamEvents, o.rounds, len(o.streamConcurrency), len(o.modes), o.streamRequests, o.streamWarmup)
		if err := warmUp(ctx, o, streamTargets, "stream", o.streamConcurrency, o.streamWarmup); err != nil {
			return err
		}
		t0 := time.Now()
		if streamResults, err = rounds(ctx, o, streamTargets, "stream", o.streamConcurrency, o.streamWarmup, o.streamRequests, stderr); err != nil {
			return err
		}
		streamElapsed = time.Since(t0)
		sper1 := takePerRequest(r, streamTargets)
		streamCPU, streamWrites = perRequestLine(sper0, sper1, false), perRequestLine(sper0, sper1, true)
	}
	var held *heldStreams
	if withRotor && o.streamInflight > 0 {
		if held, err = holdStreams(ctx, r, o.streamInflight); err != nil {
			return fmt.Errorf("%d stalled streams through rotor: %w%s", o.streamInflight, err, logTail(filepath.Join(o.work, "bridge.log")))
		}
		fmt.Fprintf(stderr, "rotor-bench: %d streams in flight through rotor: RSS %.1f MiB\n", held.n, mib(held.rss))
	}

	var ledgerLine string
	if withRotor {
		rotorOK := targets[modeRotor].ok.Load()
		if t := streamTargets[modeRotor]; t != nil {
			rotorOK += t.ok.Load()
		}
		if held != nil {
			rotorOK += int64(held.n) // status 200, then closed by the caller
		}
		closeTargets(targets, streamTargets)
		var err error
		if ledgerLine, err = r.stopAndCheckLedger(ctx, rotorOK); err != nil {
			return err
		}
	}

	rows, streamRows := summarizeAll(results), summarizeAll(streamResults)
	printHeader(stdout, o, elapsed, cpuLine, perLine)
	printTable(stdout, o.concurrency, o.modes, rows, "req/s", false)
	if ledgerLine != "" {
		fmt.Fprintln(stdout)
		printCommits(stdout, o, results)
	}
	if streamResults != nil {
		fmt.Fprintln(stdout)
		fmt.Fprintf(stdout, "chat streams (POST %s, \"stream\": true, %d events each, %d bytes %s; measured rounds took %s; the bare proxy reads the request body first and flushes every write; TTFB is the time to the first body byte):\n",
			chatPath, o.streamEvents, streamTargets[o.modes[0]].lastBytes.Load(), streamSource[o.modes[0]], streamElapsed.Round(time.Millisecond))
		fmt.Fprintln(stdout)
		printTable(stdout, o.streamConcurrency, o.modes, streamRows, "streams/s", true)
		fmt.Fprintln(stdout)
		fmt.Fprintf(stdout, "per stream (all stream cells, warm-ups included): CPU (user+system) %s; write system calls (/proc/PID/io syscw) %s\n", streamCPU, streamWrites)
	}
	if held != nil {
		fmt.Fprintln(stdout)
		fmt.Fprintf(stdout, "rotor with %d stalled streams in flight (each past its first event): RSS %.1f MiB (VmRSS), %d goroutines; peak over the whole run %.1f MiB (VmHWM); target < %d MiB\n",
			held.n, mib(held.rss), held.goroutines, mib(held.hwm), streamRSSTargetMiB)
		fmt.Fprintf(stdout, "of which Go's heap in use %.1f MiB, goroutine stacks %.1f MiB, freed heap not yet returned to the OS %.1f MiB\n",
			mib(held.heapInuse), mib(held.stackInuse), mib(held.heapHeld))
	}
	if ledgerLine != "" {
		fmt.Fprintln(stdout)
		fmt.Fprintln(stdout, ledgerLine)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, ratioLine(rows, streamRows, o.streamInflight, held))
	return nil
}

func closeTargets(sets ...map[string]*target) {
	for _, ts := range sets {
		for _, t := range ts {
			t.close()
		}
	}
}

// streamSource says where a mode's stream bytes were counted.
var streamSource = map[string]string{
	modeDirect: "from the provider",
	modeBare:   "through the bare proxy",
	modeRotor:  "through rotor",
}

// streamRSSTargetMiB is issue 16's bound on rotor's RSS with 256 streams in
// flight.
const streamRSSTargetMiB = 64

// targets returns a target per mode, built by newT for model.
func (r *rig) targets(newT func(mode, baseURL, token, model string, maxConc int) *target, model string, maxConc int) map[string]*target {
	ts := map[string]*target{}
	for _, m := range r.o.modes {
		switch m {
		case modeDirect:
			ts[m] = newT(m, r.provider.url, r.keys[0], model, maxConc)
		case modeBare:
			// The bare proxy replaces the caller's token with the key; send
			// one as long as the bridge's.
			ts[m] = newT(m, r.bare.url, "rtr_"+rand.Text()+rand.Text(), model, maxConc)
		case modeRotor:
			ts[m] = newT(m, r.bridge.url, r.token, "api/"+model, maxConc)
		}
	}
	return ts
}

// warmUp opens every connection the largest of concs needs and lets rotor
// fetch its catalogs before anything is measured.
func warmUp(ctx context.Context, o *options, targets map[string]*target, what string, concs []int, warmup int) error {
	maxConc := slices.Max(concs)
	for _, m := range o.modes {
		if _, _, _, err := load(ctx, targets[m], maxConc, max(2*warmup, 4*maxConc), nil); err != nil {
			return fmt.Errorf("initial %s warm-up: %w", what, err)
		}
	}
	return nil
}

// rounds measures every mode at every concurrency of concs, o.rounds
// times, the modes interleaved round by round.
func rounds(ctx context.Context, o *options, targets map[string]*target, what string, concs []int, warmup, n int, stderr io.Writer) (map[cellKey][]cellResult, error) {
	results := map[cellKey][]cellResult{}
	for round := 1; round <= o.rounds; round++ {
		for _, c := range concs {
			for _, m := range o.modes {
				res, err := measure(ctx, targets[m], c, warmup, n)
				if err != nil {
					tail := ""
					if m == modeRotor {
						tail = logTail(filepath.Join(o.work, "bridge.log"))
					}
					return nil, fmt.Errorf("%s round %d, %s at %d clients: %w%s", what, round, m, c, err, tail)
				}
				k := cellKey{m, c}
				results[k] = append(results[k], res)
				fmt.Fprintf(stderr, "%s round %d/%d  %-6s c=%-3d %9.0f /s  p50 %6d us  p99 %6d us  ttfb p50 %6d us\n",
					what, round, o.rounds, m, c, res.rps(), res.p50.Microseconds(), res.p99.Microseconds(), res.ttfbP50.Microseconds())
			}
		}
	}
	return results, nil
}

func summarizeAll(results map[cellKey][]cellResult) map[cellKey]row {
	rows := map[cellKey]row{}
	for k, rs := range results {
		rows[k] = summarize(rs)
	}
	return rows
}

func summarize(rs []cellResult) row {
	var rps, p50, p99, ttfb []float64
	for _, r := range rs {
		rps = append(rps, r.rps())
		p50 = append(p50, float64(r.p50))
		p99 = append(p99, float64(r.p99))
		ttfb = append(ttfb, float64(r.ttfbP50))
	}
	return row{
		rps: median(rps), rpsMin: slices.Min(rps), rpsMax: slices.Max(rps),
		p50: time.Duration(median(p50)), p99: time.Duration(median(p99)), ttfbP50: time.Duration(median(ttfb)),
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func printHeader(w io.Writer, o *options, elapsed time.Duration, cpuLine, perLine string) {
	sync := o.ledgerSync
	if sync == "" {
		sync = "rotor's default"
	}
	fmt.Fprintf(w, "rotor-bench, %s, measured rounds took %s", time.Now().UTC().Format(time.RFC3339), elapsed.Round(time.Second))
	if o.label != "" {
		fmt.Fprintf(w, ", %s", o.label)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "machine: %s (load generator, proxy and provider share these cores)\n", machine())
	fmt.Fprintf(w, "CPU during the measured rounds: %s\n", cpuLine)
	if perLine != "" {
		fmt.Fprintf(w, "CPU per request (user+system, all concurrencies, warm-ups included): %s\n", perLine)
	}
	fmt.Fprintf(w, "method: %d rounds, modes interleaved round by round; %d measured requests per cell after %d warm-up; keep-alive; ~1 KB answers with usage; medians across rounds\n",
		o.rounds, o.requests, o.warmup)
	if contains(o.modes, modeRotor) {
		where := fmt.Sprintf("ledger on disk (synchronous: %s)", sync)
		if o.db != "" && o.db != "sqlite" {
			where = "ledger on PostgreSQL (" + dburl.Mask(o.db) + ")"
		}
		fmt.Fprintf(w, "rotor: `rotor bridge start`, runtime in-process, 3 credentials, model cooldown on, requests and tokens budgets active, %s\n", where)
		fmt.Fprintf(w, "rotor request logging: log.level=%s", o.logLevel)
		if o.logLevel == "warn" || o.logLevel == "error" {
			fmt.Fprint(w, " (the per-request access log line is info, so it is not written; -log-level info measures it)")
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

// printTable prints rows of concs x modes; unit names the rate, withTTFB
// adds the median time to first byte.
func printTable(w io.Writer, concs []int, modes []string, rows map[cellKey]row, unit string, withTTFB bool) {
	ttfbHead, ttfbAlign := "", ""
	if withTTFB {
		ttfbHead, ttfbAlign = " TTFB p50 µs |", " ---: |"
	}
	fmt.Fprintf(w, "| clients | mode | %s |%s p50 µs | p99 µs | %s vs bare | %s min-max |\n", unit, ttfbHead, unit, unit)
	fmt.Fprintf(w, "| ---: | --- | ---: |%s ---: | ---: | ---: | ---: |\n", ttfbAlign)
	for _, c := range concs {
		bare, haveBare := rows[cellKey{modeBare, c}]
		for _, m := range modes {
			r := rows[cellKey{m, c}]
			vs := "-"
			if haveBare {
				vs = fmt.Sprintf("%.2f", r.rps/bare.rps)
			}
			ttfb := ""
			if withTTFB {
				ttfb = " " + thousands(float64(r.ttfbP50.Microseconds())) + " |"
			}
			fmt.Fprintf(w, "| %d | %s | %s |%s %s | %s | %s | %s-%s |\n", c, modeTitle[m],
				thousands(r.rps), ttfb, thousands(float64(r.p50.Microseconds())), thousands(float64(r.p99.Microseconds())),
				vs, thousands(r.rpsMin), thousands(r.rpsMax))
		}
	}
}

// printCommits shows rotor's ledger group commits per cell (medians
// across rounds), from its rotor_ledger_* metrics.
func printCommits(w io.Writer, o *options, results map[cellKey][]cellResult) {
	type agg struct{ perCommit, perRequest, commitUS, p50US []float64 }
	rows := map[int]*agg{}
	for _, c := range o.concurrency {
		for _, r := range results[cellKey{modeRotor, c}] {
			if r.ledger == nil || r.ledger.commits == 0 {
				fmt.Fprintln(w, "rotor's ledger commits: unknown (rotor_ledger_commit_seconds and rotor_ledger_batch_writes did not move during the measured cells)")
				return
			}
			a := rows[c]
			if a == nil {
				a = &agg{}
				rows[c] = a
			}
			a.perCommit = append(a.perCommit, r.ledger.writes/r.ledger.commits)
			a.perRequest = append(a.perRequest, r.ledger.writes/float64(r.n))
			a.commitUS = append(a.commitUS, 1e6*r.ledger.commitSeconds/r.ledger.commits)
			a.p50US = append(a.p50US, 1e6*r.ledger.commitP50)
		}
	}
	fmt.Fprintln(w, "rotor's ledger during the measured cells (its rotor_ledger_* metrics, medians across rounds):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| clients | writes per request | writes per commit | p50 commit µs | mean commit µs |")
	fmt.Fprintln(w, "| ---: | ---: | ---: | ---: | ---: |")
	for _, c := range o.concurrency {
		if a := rows[c]; a != nil {
			fmt.Fprintf(w, "| %d | %.2f | %.1f | %s | %s |\n", c, median(a.perRequest), median(a.perCommit), thousands(median(a.p50US)), thousands(median(a.commitUS)))
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "(p50 is interpolated within rotor_ledger_commit_seconds' buckets; the mean also carries the commits that ran a WAL checkpoint.)")
}

// ratioLine is the report's last line: issue 7's three Decisions figures,
// then issue 16's stream figures.
func ratioLine(rows, streamRows map[cellKey]row, inflight int, held *heldStreams) string {
	rss := math.NaN()
	if held != nil {
		rss = mib(held.rss)
	}
	return fmt.Sprintf("throughput_ratio_c16=%.2f throughput_ratio_c64=%.2f added_p50_ratio_c1=%.2f stream_throughput_ratio_c16=%.2f stream_ttfb_ratio_c1=%.2f stream_rss_mib_%d=%.1f",
		throughputRatio(rows, 16), throughputRatio(rows, 64), addedRatio(rows, func(r row) time.Duration { return r.p50 }),
		throughputRatio(streamRows, 16), addedRatio(streamRows, func(r row) time.Duration { return r.ttfbP50 }),
		inflight, rss)
}

// throughputRatio is rotor's rate over the bare proxy's at c clients.
func throughputRatio(rows map[cellKey]row, c int) float64 {
	rot, ok1 := rows[cellKey{modeRotor, c}]
	bare, ok2 := rows[cellKey{modeBare, c}]
	if !ok1 || !ok2 {
		return math.NaN()
	}
	return rot.rps / bare.rps
}

// addedRatio is the latency rotor adds over direct calls at 1 client,
// over what the bare proxy adds; latency picks the figure (p50, TTFB p50).
func addedRatio(rows map[cellKey]row, latency func(row) time.Duration) float64 {
	rot, ok1 := rows[cellKey{modeRotor, 1}]
	bare, ok2 := rows[cellKey{modeBare, 1}]
	dir, ok3 := rows[cellKey{modeDirect, 1}]
	if !ok1 || !ok2 || !ok3 {
		return math.NaN()
	}
	return float64(latency(rot)-latency(dir)) / float64(latency(bare)-latency(dir))
}

// thousands formats a number rounded to an integer with comma separators.
func thousands(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "-"
	}
	s := fmt.Sprintf("%d", int64(math.Round(x)))
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, ch := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(ch)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

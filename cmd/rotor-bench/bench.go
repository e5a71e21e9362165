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
)

// cellKey names a table row.
type cellKey struct {
	mode string
	conc int
}

// row is a table row: medians across rounds.
type row struct {
	rps, rpsMin, rpsMax float64
	p50, p99            time.Duration
}

// runBench measures every mode at every concurrency, round by round.
func runBench(ctx context.Context, o *options, stdout, stderr io.Writer) error {
	maxConc := slices.Max(o.concurrency)
	withRotor := contains(o.modes, modeRotor)
	r, err := startRig(ctx, o, contains(o.modes, modeBare), withRotor)
	if err != nil {
		return err
	}
	defer r.close() // idempotent; the normal path closes it earlier
	targets := map[string]*target{}
	for _, m := range o.modes {
		switch m {
		case modeDirect:
			targets[m] = newTarget(m, r.provider.url, r.keys[0], benchModel, maxConc)
		case modeBare:
			// The bare proxy replaces the caller's token with the key; send
			// one as long as the bridge's.
			targets[m] = newTarget(m, r.bare.url, "rtr_"+rand.Text()+rand.Text(), benchModel, maxConc)
		case modeRotor:
			t := newTarget(m, r.bridge.url, r.token, "api/"+benchModel, maxConc)
			mc := &http.Client{Timeout: 5 * time.Second}
			t.metrics = func(ctx context.Context) (map[string]float64, error) {
				return scrapeMetrics(ctx, mc, r.bridge.url, r.token)
			}
			targets[m] = t
		}
	}
	defer func() {
		for _, t := range targets {
			t.close()
		}
	}()

	start := time.Now()
	fmt.Fprintf(stderr, "rotor-bench: %d rounds x %d concurrencies x %d modes, %d requests per cell (+%d warm-up)\n",
		o.rounds, len(o.concurrency), len(o.modes), o.requests, o.warmup)
	// Open every connection the largest cell needs and let rotor fetch its
	// catalogs before anything is measured.
	for _, m := range o.modes {
		if _, _, err := load(ctx, targets[m], maxConc, max(2*o.warmup, 4*maxConc), nil); err != nil {
			return fmt.Errorf("initial warm-up: %w", err)
		}
	}
	cpu0, cpuOK := takeCPU(r.pids())
	per0 := takePerRequest(r, targets)
	results := map[cellKey][]cellResult{}
	for round := 1; round <= o.rounds; round++ {
		for _, c := range o.concurrency {
			for _, m := range o.modes {
				res, err := measure(ctx, targets[m], c, o.warmup, o.requests)
				if err != nil {
					tail := ""
					if m == modeRotor {
						tail = logTail(filepath.Join(o.work, "bridge.log"))
					}
					return fmt.Errorf("round %d, %s at %d clients: %w%s", round, m, c, err, tail)
				}
				k := cellKey{m, c}
				results[k] = append(results[k], res)
				fmt.Fprintf(stderr, "round %d/%d  %-6s c=%-3d %9.0f req/s  p50 %6d us  p99 %6d us\n",
					round, o.rounds, m, c, res.rps(), res.p50.Microseconds(), res.p99.Microseconds())
			}
		}
	}
	elapsed := time.Since(start)
	cpuLine := "unknown (no /proc)"
	if cpu1, ok := takeCPU(r.pids()); ok && cpuOK {
		cpuLine = foreignCPU(cpu0, cpu1)
	}
	perLine := perRequestLine(per0, takePerRequest(r, targets))

	var ledgerLine string
	if withRotor {
		rotorOK := targets[modeRotor].ok.Load()
		for _, t := range targets {
			t.close()
		}
		var err error
		if ledgerLine, err = r.stopAndCheckLedger(ctx, rotorOK); err != nil {
			return err
		}
	}

	rows := map[cellKey]row{}
	for k, rs := range results {
		rows[k] = summarize(rs)
	}
	printHeader(stdout, o, elapsed, cpuLine, perLine)
	printTable(stdout, o, rows)
	if ledgerLine != "" {
		fmt.Fprintln(stdout)
		printCommits(stdout, o, results)
		fmt.Fprintln(stdout)
		fmt.Fprintln(stdout, ledgerLine)
	}
	fmt.Fprintln(stdout)
	fmt.Fprintln(stdout, ratioLine(rows))
	return nil
}

func summarize(rs []cellResult) row {
	var rps, p50, p99 []float64
	for _, r := range rs {
		rps = append(rps, r.rps())
		p50 = append(p50, float64(r.p50))
		p99 = append(p99, float64(r.p99))
	}
	return row{
		rps: median(rps), rpsMin: slices.Min(rps), rpsMax: slices.Max(rps),
		p50: time.Duration(median(p50)), p99: time.Duration(median(p99)),
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
		fmt.Fprintf(w, "rotor: `rotor bridge start`, runtime in-process, 3 credentials, model cooldown on, requests and tokens budgets active, ledger on disk (synchronous: %s)\n", sync)
		fmt.Fprintf(w, "rotor request logging: log.level=%s", o.logLevel)
		if o.logLevel == "warn" || o.logLevel == "error" {
			fmt.Fprint(w, " (the per-request access log line is info, so it is not written; -log-level info measures it)")
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
}

func printTable(w io.Writer, o *options, rows map[cellKey]row) {
	fmt.Fprintln(w, "| clients | mode | req/s | p50 µs | p99 µs | req/s vs bare | req/s min-max |")
	fmt.Fprintln(w, "| ---: | --- | ---: | ---: | ---: | ---: | ---: |")
	for _, c := range o.concurrency {
		bare, haveBare := rows[cellKey{modeBare, c}]
		for _, m := range o.modes {
			r := rows[cellKey{m, c}]
			vs := "-"
			if haveBare {
				vs = fmt.Sprintf("%.2f", r.rps/bare.rps)
			}
			fmt.Fprintf(w, "| %d | %s | %s | %s | %s | %s | %s-%s |\n", c, modeTitle[m],
				thousands(r.rps), thousands(float64(r.p50.Microseconds())), thousands(float64(r.p99.Microseconds())),
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

// ratioLine is the report's last line (issue 7).
func ratioLine(rows map[cellKey]row) string {
	get := func(m string, c int) (row, bool) { r, ok := rows[cellKey{m, c}]; return r, ok }
	nan := math.NaN()
	tr := func(c int) float64 {
		rot, ok1 := get(modeRotor, c)
		bare, ok2 := get(modeBare, c)
		if !ok1 || !ok2 {
			return nan
		}
		return rot.rps / bare.rps
	}
	added := nan
	rot, ok1 := get(modeRotor, 1)
	bare, ok2 := get(modeBare, 1)
	dir, ok3 := get(modeDirect, 1)
	if ok1 && ok2 && ok3 {
		added = float64(rot.p50-dir.p50) / float64(bare.p50-dir.p50)
	}
	return fmt.Sprintf("throughput_ratio_c16=%.2f throughput_ratio_c64=%.2f added_p50_ratio_c1=%.2f", tr(16), tr(64), added)
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

// Command rotor-bench measures rotor's request path against its floor
// (issue 7). scripts/bench.sh builds rotor and this program and runs it;
// see that script for the usual invocations.
//
// Three processes are measured against each other on loopback, each in its
// own Go runtime: the fake provider (this binary, re-executed with
// -serve-provider), a bare httputil.ReverseProxy in front of it (this
// binary with -serve-bare-proxy), and the real `rotor bridge start` with
// the runtime in-process, three credentials, model cooldown on, a requests
// and a tokens budget, and its ledger on disk. This process is the load
// generator: keep-alive clients, a fixed number of requests per cell,
// warm-up before each cell, the modes interleaved round by round so that
// machine drift hits all of them alike, and medians across rounds. After
// the Decisions cells come chat-stream cells measured the same way (200
// events per stream; the bare proxy reads the request body first and
// flushes every write), then rotor's RSS with 256 stalled streams open
// (and, from its metrics, how much of it is Go's heap and goroutine stacks).
//
// The last line of a benchmark run is, exactly:
//
//	throughput_ratio_c16=R throughput_ratio_c64=R added_p50_ratio_c1=R stream_throughput_ratio_c16=R stream_ttfb_ratio_c1=R stream_rss_mib_256=M
//
// With -soak it instead sends many requests through the bridge at one
// concurrency and samples the bridge's RSS (/proc/PID/status) and Go heap
// (GET /metrics) to show whether memory stays bounded.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// options are the load generator's flags.
type options struct {
	rotorBin    string
	work        string
	keep        bool
	quick       bool
	rounds      int
	requests    int
	warmup      int
	concurrency []int
	modes       []string
	logLevel    string
	logFormat   string
	ledgerSync  string
	// db is -db: sqlite (the default), postgres or a postgres:// URL.
	db         string
	cpuProfile string
	memProfile string
	label      string

	// The stream cells: chat streams of streamEvents deltas.
	streamRequests    int
	streamWarmup      int
	streamConcurrency []int
	streamEvents      int
	streamInflight    int

	soak            bool
	soakRequests    int
	soakConcurrency int
	sampleEvery     time.Duration
}

func main() {
	os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
}

func realMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rotor-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	var conc, modes, streamConc string
	serveProvider := fs.Bool("serve-provider", false, "internal: run the fake provider (keys in $"+envProviderKeys+"), print its URL and serve until SIGTERM")
	serveBare := fs.String("serve-bare-proxy", "", "internal: run a bare httputil.ReverseProxy to this URL (key in $"+envBareKey+"), print its URL and serve until SIGTERM")
	fs.StringVar(&o.rotorBin, "rotor", "", "the rotor binary to measure (required for the rotor mode and -soak)")
	fs.StringVar(&o.work, "work", "", "work folder for rotor's home and logs (default: a new temporary folder, removed at the end)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work folder")
	fs.BoolVar(&o.quick, "quick", false, "a smaller run (3 rounds, 2000 requests per cell, 200 warm-up) that finishes in under a minute")
	fs.IntVar(&o.rounds, "rounds", 5, "rounds; the table shows medians across rounds")
	fs.IntVar(&o.requests, "requests", 10000, "measured requests per cell (mode x concurrency x round)")
	fs.IntVar(&o.warmup, "warmup", 1000, "unmeasured requests before each cell")
	fs.StringVar(&conc, "concurrency", "1,16,64", "comma-separated client counts")
	fs.StringVar(&modes, "modes", "direct,bare,rotor", "comma-separated modes: direct, bare, rotor")
	fs.StringVar(&o.logLevel, "log-level", "warn", "rotor's log.level (warn keeps the per-request access log, an info line, out of the measurement)")
	fs.StringVar(&o.logFormat, "log-format", "", "rotor's log.format, text or json (default: rotor's default)")
	fs.StringVar(&o.db, "db", "sqlite", "rotor's ledger: sqlite (a file in its home), postgres (a new schema on $ROTOR_TEST_POSTGRES, default "+defaultPostgres+", dropped at the end) or a postgres:// URL")
	fs.StringVar(&o.ledgerSync, "ledger-synchronous", "", "rotor's ledger.synchronous, full or normal (default: rotor's default)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write the bridge's CPU profile to this file (sets ROTOR_CPUPROFILE for rotor)")
	fs.StringVar(&o.memProfile, "memprofile", "", "write the bridge's allocations profile to this file (sets ROTOR_MEMPROFILE for rotor)")
	fs.IntVar(&o.streamRequests, "stream-requests", 2000, "measured chat streams per stream cell (0: no stream cells)")
	fs.IntVar(&o.streamWarmup, "stream-warmup", 200, "unmeasured streams before each stream cell")
	fs.StringVar(&streamConc, "stream-concurrency", "1,16", "comma-separated client counts of the stream cells")
	fs.IntVar(&o.streamEvents, "stream-events", 200, "text deltas per chat stream")
	fs.IntVar(&o.streamInflight, "stream-inflight", 256, "stalled streams held open through rotor while its RSS is read (0: skip)")
	fs.StringVar(&o.label, "label", "", "a label for the report's header, e.g. the git revision (scripts/bench.sh sets it)")
	fs.BoolVar(&o.soak, "soak", false, "memory mode: many requests through the bridge at one concurrency, sampling RSS and heap")
	fs.IntVar(&o.soakRequests, "soak-requests", 200000, "requests in -soak mode")
	fs.IntVar(&o.soakConcurrency, "soak-concurrency", 16, "clients in -soak mode")
	fs.DurationVar(&o.sampleEvery, "sample-every", 500*time.Millisecond, "memory sampling interval in -soak mode")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "rotor-bench: unexpected argument %q\n", fs.Arg(0))
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	switch {
	case *serveProvider:
		return exitCode(stderr, serveProviderMain(ctx, stdout))
	case *serveBare != "":
		return exitCode(stderr, serveBareProxyMain(ctx, stdout, *serveBare))
	}

	if o.quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["rounds"] {
			o.rounds = 3
		}
		if !set["requests"] {
			o.requests = 2000
		}
		if !set["warmup"] {
			o.warmup = 200
		}
		if !set["stream-requests"] {
			o.streamRequests = 400
		}
		if !set["stream-warmup"] {
			o.streamWarmup = 50
		}
	}
	var err error
	if o.concurrency, err = parseInts(conc); err != nil {
		fmt.Fprintf(stderr, "rotor-bench: -concurrency: %v\n", err)
		return 2
	}
	if o.streamConcurrency, err = parseInts(streamConc); err != nil {
		fmt.Fprintf(stderr, "rotor-bench: -stream-concurrency: %v\n", err)
		return 2
	}
	if o.modes, err = parseModes(modes); err != nil {
		fmt.Fprintf(stderr, "rotor-bench: -modes: %v\n", err)
		return 2
	}
	if o.rounds < 1 || o.requests < 1 || o.warmup < 0 || o.soakRequests < 1 || o.soakConcurrency < 1 {
		fmt.Fprintln(stderr, "rotor-bench: -rounds, -requests, -soak-requests and -soak-concurrency must be positive")
		return 2
	}
	if o.streamRequests < 0 || o.streamWarmup < 0 || o.streamInflight < 0 || o.streamEvents < 1 {
		fmt.Fprintln(stderr, "rotor-bench: -stream-requests, -stream-warmup and -stream-inflight must not be negative, -stream-events must be positive")
		return 2
	}
	needRotor := o.soak || contains(o.modes, modeRotor)
	if needRotor && o.rotorBin == "" {
		fmt.Fprintln(stderr, "rotor-bench: -rotor is required (scripts/bench.sh builds it)")
		return 2
	}
	if o.rotorBin != "" {
		if o.rotorBin, err = filepath.Abs(o.rotorBin); err != nil {
			fmt.Fprintf(stderr, "rotor-bench: %v\n", err)
			return 2
		}
	}
	for _, p := range []*string{&o.cpuProfile, &o.memProfile} {
		if *p == "" {
			continue
		}
		if *p, err = filepath.Abs(*p); err != nil {
			fmt.Fprintf(stderr, "rotor-bench: %v\n", err)
			return 2
		}
	}

	if o.work == "" {
		if o.work, err = os.MkdirTemp("", "rotor-bench-"); err != nil {
			fmt.Fprintf(stderr, "rotor-bench: %v\n", err)
			return 1
		}
		if !o.keep {
			defer os.RemoveAll(o.work)
		}
	} else if err := os.MkdirAll(o.work, 0o700); err != nil {
		fmt.Fprintf(stderr, "rotor-bench: %v\n", err)
		return 1
	}
	if o.keep {
		fmt.Fprintf(stderr, "rotor-bench: work folder %s is kept\n", o.work)
	}

	if o.soak {
		err = runSoak(ctx, &o, stdout, stderr)
	} else {
		err = runBench(ctx, &o, stdout, stderr)
	}
	return exitCode(stderr, err)
}

func exitCode(stderr io.Writer, err error) int {
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "rotor-bench: %v\n", err)
	return 1
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive integer", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func parseModes(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		m := strings.TrimSpace(f)
		switch m {
		case modeDirect, modeBare, modeRotor:
		default:
			return nil, fmt.Errorf("unknown mode %q (direct, bare, rotor)", m)
		}
		if !contains(out, m) {
			out = append(out, m)
		}
	}
	return out, nil
}

func contains[T comparable](xs []T, x T) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// machine describes where the run happened, for the report's header.
func machine() string {
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				if i := strings.IndexByte(l, ':'); i >= 0 {
					model = strings.TrimSpace(l[i+1:])
				}
				break
			}
		}
	}
	s := fmt.Sprintf("%d CPUs, GOMAXPROCS %d, %s/%s, %s", goruntime.NumCPU(), goruntime.GOMAXPROCS(0), goruntime.GOOS, goruntime.GOARCH, goruntime.Version())
	if model != "" {
		s += ", " + model
	}
	return s
}

// Command rotor-sim runs the learned-cooldown simulation of issue 19 (see
// package learned/sim) and prints its table; scripts/sim-cooldown.sh runs
// it. The last line is, exactly:
//
//	learned_min_served_margin_pp=X learned_max_waste_ratio=Y
//
// over every cell, for learned apply with learned_cooldown.adapt on
// against the fixed 60 s cooldown: X is the least served margin in
// percentage points, Y the largest ratio of wasted throttles (over the
// cells where fixed wasted any).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/rotorhq/rotor/learned/sim"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rotor-sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	span := fs.Duration("span", sim.DefaultSpan, "simulated time per cell")
	seed := fs.Uint64("seed", 1, "seed of the arrivals and the scenarios' draws")
	schedule := fs.String("schedule", "", `run this schedule instead of the built-in scenarios: "0:120,3600:40,7200:200" (seconds:reset)`)
	rates := fs.String("rates", "0.2,1,5", "request rates, requests per second, comma-separated")
	random := fs.Int("random", 0, "also run this many random schedules (seeds seed..seed+N-1)")
	failover := fs.Bool("failover", true, "a refused request fails over to an untried available credential, as the route does; false: one call per request, as issue 19 measured")
	workers := fs.Int("workers", runtime.GOMAXPROCS(0), "cells run in parallel")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || *span <= 0 || *span > 30*24*time.Hour {
		fmt.Fprintln(stderr, "rotor-sim: unexpected arguments or a span outside (0, 30 days]")
		return 2
	}
	var rs []float64
	for _, f := range strings.Split(*rates, ",") {
		r, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || r <= 0 || r > 100 {
			fmt.Fprintf(stderr, "rotor-sim: -rates: %q is not a rate in (0, 100]\n", f)
			return 2
		}
		rs = append(rs, r)
	}
	scs := sim.Scenarios()
	if *schedule != "" {
		sc, err := sim.ParseSchedule(*schedule)
		if err != nil {
			fmt.Fprintf(stderr, "rotor-sim: -schedule: %v\n", err)
			return 2
		}
		scs = []sim.Scenario{sc}
	}
	for i := range *random {
		scs = append(scs, sim.RandomSchedule(*seed+uint64(i), *span))
	}
	pols := sim.Policies()
	cells := sim.RunAll(scs, rs, pols, sim.Options{Span: *span, Seed: *seed, Failover: *failover}, *workers)
	fmt.Fprintf(stdout, "Simulated %v per cell on a fake clock, seed %d: %d credentials through the real pool (model cooldown on), "+
		"each with a quota of %d requests refused until a hidden reset R after the first refusal; Poisson traffic; "+
		"failover %v (on: a refused request goes on to an untried available credential). Served: requests the provider answered. "+
		"Wasted 429s: refusals after the first of each exhaustion. Idle: cooldown left after the quota had reset, credential-seconds.\n\n",
		*span, *seed, sim.Credentials, sim.Quota, *failover)
	for _, sc := range scs {
		fmt.Fprintf(stdout, "- %s: %s\n", sc.Name, sc.About)
	}
	fmt.Fprintln(stdout)
	if err := sim.WriteTable(stdout, cells, pols, 0, 1, len(pols)-1); err != nil {
		fmt.Fprintln(stderr, "rotor-sim:", err)
		return 1
	}
	return 0
}

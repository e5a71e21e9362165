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
	"slices"
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
	random := fs.Int("random", 0, "also run this many random schedules (seeds seed..seed+N-1; with -seeds, N more for each further seed)")
	seeds := fs.Int("seeds", 1, "run seeds seed..seed+N-1 and print, instead of the full table, the mean table: per scenario and rate, adapt's mean and worst margin, cells lost, points lost, worst waste ratio")
	failover := fs.Bool("failover", true, "a refused request fails over to an untried available credential, as the route does; false: one call per request, as issue 19 measured")
	only := fs.String("scenarios", "", `run only these built-in scenarios, comma-separated names such as "bursty,noisy" ("none": only the -random schedules); default every one`)
	noisyRange := fs.String("noisy", "", `also run a reset drawn anew for every exhaustion, as noisy's, uniform in this range of seconds, "400-800" (the scenario "noisy 400-800"): noisy at a scale the learner was not tuned on`)
	chance := fs.Duration("chance", 0, "also run learned adapt with every cooldown rounded up to a multiple of this (100ms: a change that means nothing to it) and print, before the table, how far that moves each row's served share: how much of a margin is chance")
	oracle := fs.Bool("oracle", false, "also run an oracle, a cooldown told the exact time left to each hidden reset (no idle, no refusal after the first), and print, before the table, its own mean table against fixed 60 s: the best any cooldown could do")
	retries := fs.String("retries", "", `also run a policy told when to retry, "145,175,195,200": each episode's retries that many seconds after its first throttle, then fixed 60 s's; and print, before the table, its own mean table against fixed 60 s: told a reset's distribution (noisy: 100-200 s), what knowing that is worth`)
	runs := fs.Bool("runs", false, "also print, before the table, fixed 60 s's and adapt's idle time and wasted refusals per episode by run: how many episodes in a row before each had met the same reset (0: the first after it changed), over every cell: what adapt pays while it learns a reset and once it has; then the episodes of run 0 after a change, by how the reset changed")
	lost := fs.Bool("lost", false, "also print, before the table, each policy's requests not served over every cell, those that came while a credential whose quota had reset was still cooling (lost to idle time), and how many requests an idle credential-hour cost: idle costs requests only while no other credential can answer, so idle time alone does not rank the policies")
	creds := fs.Bool("credentials", false, "also print, before the table, each policy's requests served, wasted 429s and idle time per credential over every cell: the pool tries key-0 first, so its idle and key-2's do not cost alike, and a policy's totals can hide a credential it serves worse than fixed 60 s does")
	workers := fs.Int("workers", runtime.GOMAXPROCS(0), "cells run in parallel")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 || *span <= 0 || *span > 30*24*time.Hour {
		fmt.Fprintln(stderr, "rotor-sim: unexpected arguments or a span outside (0, 30 days]")
		return 2
	}
	if *seeds < 1 || *seeds > 1000 || *random < 0 || *random > 1000 {
		fmt.Fprintln(stderr, "rotor-sim: -seeds must be 1-1000 and -random 0-1000")
		return 2
	}
	if *chance < 0 || *chance > time.Minute {
		fmt.Fprintln(stderr, "rotor-sim: -chance must be 0 (off) to 1m, such as 100ms")
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
	if *only != "" {
		if *schedule != "" {
			fmt.Fprintln(stderr, "rotor-sim: -scenarios and -schedule exclude each other: -schedule runs only its own")
			return 2
		}
		var err error
		if scs, err = pick(scs, *only); err != nil {
			fmt.Fprintf(stderr, "rotor-sim: -scenarios: %v\n", err)
			return 2
		}
		if len(scs) == 0 && *random == 0 && *noisyRange == "" {
			fmt.Fprintln(stderr, "rotor-sim: -scenarios none runs nothing without -random N or -noisy")
			return 2
		}
	}
	if *schedule != "" {
		sc, err := sim.ParseSchedule(*schedule)
		if err != nil {
			fmt.Fprintf(stderr, "rotor-sim: -schedule: %v\n", err)
			return 2
		}
		scs = []sim.Scenario{sc}
	}
	if *noisyRange != "" {
		if *schedule != "" {
			fmt.Fprintln(stderr, "rotor-sim: -noisy and -schedule exclude each other: -schedule runs only its own")
			return 2
		}
		sc, err := sim.ParseNoisy(*noisyRange)
		if err != nil {
			fmt.Fprintf(stderr, "rotor-sim: -noisy: %v\n", err)
			return 2
		}
		scs = append(scs, sc)
	}
	var told []time.Duration
	if *retries != "" {
		var err error
		if told, err = sim.ParseRetries(*retries); err != nil {
			fmt.Fprintf(stderr, "rotor-sim: -retries: %v\n", err)
			return 2
		}
	}
	pols := sim.Policies()
	adapt := len(pols) - 1 // the table judges learned adapt, the last of sim.Policies
	rounded, oracleIdx, retriesIdx := -1, -1, -1
	if *chance > 0 {
		rounded = len(pols)
		pols = append(pols, sim.Rounded(sim.LearnedAdapt, *chance))
	}
	if *oracle {
		oracleIdx = len(pols)
		pols = append(pols, sim.Oracle)
	}
	if told != nil {
		retriesIdx = len(pols)
		pols = append(pols, sim.Retries(told))
	}
	var cells []sim.Cell
	var shown []sim.Scenario // the first seed's scenarios, described in the header
	var more []string        // the other seeds' random schedules, named
	for k := range uint64(*seeds) {
		// Each seed runs random schedules of its own; with one seed they
		// are seed..seed+N-1.
		run := append([]sim.Scenario(nil), scs...)
		var names []string
		for i := range uint64(*random) {
			sc := sim.RandomSchedule(*seed+k*uint64(*random)+i, *span)
			run = append(run, sc)
			names = append(names, sc.Name)
		}
		if k == 0 {
			shown = run
		} else if len(names) > 0 {
			more = append(more, fmt.Sprintf("- seed %d: %s", *seed+k, strings.Join(names, ", ")))
		}
		cells = append(cells, sim.RunAll(run, rs, pols, sim.Options{Span: *span, Seed: *seed + k, Failover: *failover}, *workers)...)
	}
	seedText := fmt.Sprintf("seed %d", *seed)
	if *seeds > 1 {
		seedText = fmt.Sprintf("seeds %d-%d", *seed, *seed+uint64(*seeds)-1)
	}
	fmt.Fprintf(stdout, "Simulated %v per cell on a fake clock, %s: %d credentials through the real pool (model cooldown on), "+
		"each with a quota of %d requests refused until a hidden reset R after the first refusal; Poisson traffic; "+
		"failover %v (on: a refused request goes on to an untried available credential). Served: requests the provider answered. "+
		"Wasted 429s: refusals after the first of each exhaustion. Idle: cooldown left after the quota had reset, credential-seconds.\n\n",
		*span, seedText, sim.Credentials, sim.Quota, *failover)
	for _, sc := range shown {
		fmt.Fprintf(stdout, "- %s: %s\n", sc.Name, sc.About)
	}
	for _, m := range more {
		fmt.Fprintln(stdout, m)
	}
	fmt.Fprintln(stdout)
	if rounded >= 0 {
		if err := sim.WriteChance(stdout, cells, pols, adapt, rounded); err != nil {
			fmt.Fprintln(stderr, "rotor-sim:", err)
			return 1
		}
	}
	if *runs {
		if err := sim.WriteRuns(stdout, cells, pols, 0, adapt); err != nil {
			fmt.Fprintln(stderr, "rotor-sim:", err)
			return 1
		}
	}
	if *lost {
		if err := sim.WriteLost(stdout, cells, pols); err != nil {
			fmt.Fprintln(stderr, "rotor-sim:", err)
			return 1
		}
	}
	if *creds {
		if err := sim.WriteCredentials(stdout, cells, pols); err != nil {
			fmt.Fprintln(stderr, "rotor-sim:", err)
			return 1
		}
	}
	// The policies shown beside the table, each with its own mean table.
	for _, i := range []int{oracleIdx, retriesIdx} {
		if i < 0 {
			continue
		}
		if err := sim.WriteMeansTable(stdout, cells, pols, 0, 1, i); err != nil {
			fmt.Fprintln(stderr, "rotor-sim:", err)
			return 1
		}
	}
	write := sim.WriteTable
	if *seeds > 1 {
		write = sim.WriteMeans
	}
	if err := write(stdout, cells, pols, 0, 1, adapt); err != nil {
		fmt.Fprintln(stderr, "rotor-sim:", err)
		return 1
	}
	return 0
}

// pick returns the scenarios of scs that list names, comma-separated, in
// the order of scs; "none" names none of them.
func pick(scs []sim.Scenario, list string) ([]sim.Scenario, error) {
	if strings.TrimSpace(list) == "none" {
		return nil, nil
	}
	want := map[string]bool{}
	for _, n := range strings.Split(list, ",") {
		n = strings.TrimSpace(n)
		if !slices.ContainsFunc(scs, func(sc sim.Scenario) bool { return sc.Name == n }) {
			names := make([]string, len(scs))
			for i, sc := range scs {
				names[i] = strconv.Quote(sc.Name)
			}
			return nil, fmt.Errorf("no scenario %q: the names are %s, or none", n, strings.Join(names, ", "))
		}
		want[n] = true
	}
	return slices.DeleteFunc(slices.Clone(scs), func(sc sim.Scenario) bool { return !want[sc.Name] }), nil
}

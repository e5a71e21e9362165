package sim

import (
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/quotasim"
	"github.com/rotorhq/rotor/pool"
)

var printBounds = flag.Bool("sim.print", false, "print the measured per-cell figures as the bounds table's rows")

// testSpan is the simulated time per cell in the tests: the table's 12 h
// normally, 2 h under -short or the race detector (CI runs go test -race
// on two loaded cores). The runs are deterministic, so each span has its
// own bounds.
func testSpan() time.Duration {
	if testing.Short() || raceEnabled {
		return 2 * time.Hour
	}
	return DefaultSpan
}

// cellBound is what learned adapt must achieve in one cell against fixed
// 60 s (margin, waste ratio) and the ladder (idle).
type cellBound struct {
	// margin is the least served margin in points: 0 where adapt wins
	// (issue 19's target, every cell of the 12 h table); in the cells
	// where it still loses (the steps and bursty at 0.2 req/s in the
	// 2 h runs of -short and -race, mostly the learner's cold start: a
	// spell or a step that comes in the second hour meets evidence of
	// an hour or less), the measured margin less a tenth of a point, so
	// that a change that makes adapt lose by more fails. Bursty and the
	// step from 60 s to 300 s at 0.2 req/s lose since a credential's own
	// refusal stopped hiding a sibling's (-0.14 and -0.35 points: a
	// credential skips to a retry planned past its sibling's refused
	// wait, and the next lands just short of the 600 s spell), which
	// over 96 seeds of 12 h lost fewer points in all. Bursty at 0.2
	// req/s loses 1.10 points since a credential skips past a sibling's
	// climb (the spell of the second hour ends within minutes of the
	// climbs at its start; 16 requests of 1,440), which over 96 seeds
	// of 12 h left 24 fewer cells failing either target. Noisy at 0.2
	// req/s on seed 1's 12 h loses 0.06 points (5 requests of 8,640)
	// since a refusal just past all evidence steps by half the existing
	// cooldown (stepPast), which over seeds 1-96 lost noisy at 0.2 req/s
	// on 5 seeds instead of 11 (docs/learned-cooldown.md).
	margin float64
	// ratio is the largest waste ratio: 0.5, issue 19's target, in every
	// cell of both spans since a sibling's refused retries are skipped
	// (bursty at 0.2 req/s was held to its measured ratio plus 0.02).
	ratio float64
	// idle: learned idles less than the ladder (or neither idles). In
	// steady 60 the ladder never idles, so neither may adapt: a trial
	// below the existing cooldown it holds keeps an eighth clear of it
	// (plan.go, trialGap), and a retry refused in the last second before
	// it rests only until it (TestAdaptNeverIdlesAtAnExactReset).
	idle bool
}

// bounds12h and bounds2h hold learned adapt, cell by cell, for the two
// spans (go test -run TestAdaptCells -sim.print -v prints the measured
// rows; add -short for the 2 h ones).
var bounds12h = map[string]cellBound{
	"steady 30/0.2": {0, 0.5, true}, "steady 30/1": {0, 0.5, true}, "steady 30/5": {0, 0.5, true},
	"steady 60/0.2": {0, 0.5, true}, "steady 60/1": {0, 0.5, true}, "steady 60/5": {0, 0.5, true},
	"steady 150/0.2": {0, 0.5, true}, "steady 150/1": {0, 0.5, true}, "steady 150/5": {0, 0.5, true},
	"steady 600/0.2": {0, 0.5, true}, "steady 600/1": {0, 0.5, true}, "steady 600/5": {0, 0.5, true},
	"drifting/0.2": {0, 0.5, true}, "drifting/1": {0, 0.5, true}, "drifting/5": {0, 0.5, true},
	"bursty/0.2": {0, 0.5, true}, "bursty/1": {0, 0.5, true}, "bursty/5": {0, 0.5, true},
	"noisy/0.2": {-0.16, 0.5, true}, "noisy/1": {0, 0.5, true}, "noisy/5": {0, 0.5, true},
	"step 300->60/0.2": {0, 0.5, true}, "step 300->60/1": {0, 0.5, true}, "step 300->60/5": {0, 0.5, true},
	"step 60->300/0.2": {0, 0.5, true}, "step 60->300/1": {0, 0.5, true}, "step 60->300/5": {0, 0.5, true},
}

var bounds2h = map[string]cellBound{
	"steady 30/0.2": {0, 0.5, true}, "steady 30/1": {0, 0.5, true}, "steady 30/5": {0, 0.5, true},
	"steady 60/0.2": {0, 0.5, true}, "steady 60/1": {0, 0.5, true}, "steady 60/5": {0, 0.5, true},
	"steady 150/0.2": {0, 0.5, true}, "steady 150/1": {0, 0.5, true}, "steady 150/5": {0, 0.5, true},
	"steady 600/0.2": {0, 0.5, true}, "steady 600/1": {0, 0.5, true}, "steady 600/5": {0, 0.5, true},
	"drifting/0.2": {0, 0.5, true}, "drifting/1": {0, 0.5, true}, "drifting/5": {0, 0.5, true},
	"bursty/0.2": {-1.20, 0.5, true}, "bursty/1": {0, 0.5, true}, "bursty/5": {0, 0.5, true},
	"noisy/0.2": {0, 0.5, true}, "noisy/1": {0, 0.5, true}, "noisy/5": {0, 0.5, true},
	"step 300->60/0.2": {0, 0.5, true}, "step 300->60/1": {0, 0.5, true}, "step 300->60/5": {-0.16, 0.5, true},
	"step 60->300/0.2": {-0.45, 0.5, true}, "step 60->300/1": {-0.18, 0.5, true}, "step 60->300/5": {0, 0.5, true},
}

// TestAdaptCells runs every scenario at every rate through the real pool
// and holds learned adapt to its bounds against fixed 60 s and the ladder,
// cell by cell.
func TestAdaptCells(t *testing.T) {
	span := testSpan()
	bounds := bounds12h
	if span != DefaultSpan {
		bounds = bounds2h
	}
	cells := RunAll(Scenarios(), Rates, []Policy{Fixed, Ladder, LearnedAdapt}, Options{Span: span, Seed: 1, Failover: true}, 2)
	if len(cells) != len(bounds) {
		t.Fatalf("%d cells, %d bounds", len(cells), len(bounds))
	}
	for _, c := range cells {
		key := fmt.Sprintf("%s/%g", c.Scenario, c.Rate)
		v := Judge(c, 0, 1, 2)
		if *printBounds {
			fmt.Printf("%q: {%.2f, %.3f, %v},\n", key, v.MarginPP, v.WasteRatio, v.IdleOK)
		}
		b, ok := bounds[key]
		if !ok {
			t.Errorf("%s: no bound", key)
			continue
		}
		if v.MarginPP < b.margin-0.005 {
			t.Errorf("%s: learned adapt served %.2f points against fixed 60 s, want at least %.2f", key, v.MarginPP, b.margin)
		}
		if !math.IsNaN(v.WasteRatio) && v.WasteRatio > b.ratio {
			t.Errorf("%s: learned adapt wasted %.3f of fixed's throttles, want at most %.2f", key, v.WasteRatio, b.ratio)
		}
		if b.idle && !v.IdleOK {
			t.Errorf("%s: learned adapt idled %v, the ladder %v", key, c.Results[2].Idle, c.Results[1].Idle)
		}
	}
}

// untunedLosses holds the random schedules' cells where learned adapt
// still serves less than fixed 60 s (the measured margin less a tenth of
// a point). Random 3 at 0.2 req/s lost 0.56 points, none once the planner
// read a reset drawn anew, 1.13 once the broad base's pieces ended on
// round waits (docs/learned-cooldown.md: over 48 seeds not tuned on, that change
// lost fewer cells in all), 0.13 once an exact hold took the plan's
// deeper trial (its reset falls from 717 s to 39 s), 0.56 once a shallow
// trial gave way to the lower-bound check when credit piles up, none
// (+0.14) since a sibling already cooling when the reset falls has its
// cooldown ended at the fall, and 0.33 since a credential skips past a
// sibling's climb (two quotas, lost within half an hour of that fall;
// over 96 seeds of 12 h the change left 24 fewer cells failing either
// target), 0.08 since a moved reset is narrowed once two episodes agree,
// none (+0.06) since a sibling's pending check is split, 0.30 since a late
// recovery earns credit only at the wait that ran out (over 96 seeds of
// 12 h no cell wastes more than half of fixed's refusals any more, 8
// did; 65 cells fail a target instead of 69), 0.22 since a refusal just
// past all evidence steps by half the existing cooldown, and none (+0.23)
// since a round's lead looks for a fall (over seeds 1-96 the random
// schedules at 0.2 req/s lost 33 cells instead of 42). At 0.2 req/s a
// cell moves by half a point or more with any change to the learner:
// rounding adapt's rests up to 100 ms moves the random schedules' cells
// there by 0.27 points (standard deviation over 96).
var untunedLosses = map[string]float64{}

// TestAdaptOnUntunedSchedules: random schedules the learner was not tuned
// on (a reset of 20-900 s that changes every 10-120 min). Learned adapt
// wastes at most half of fixed's throttles, idles less than the ladder,
// and serves at least as many requests as fixed 60 s in every cell but
// those of untunedLosses (the README's Cooldowns section gives the
// figures; before the planner it lost up to 5.4 points here).
//
// It runs the table's 12 h even under -short and the race detector: a
// random schedule changes every 10-120 min, so 2 h show one or two of its
// resets and mostly the learner's cold start.
func TestAdaptOnUntunedSchedules(t *testing.T) {
	span := DefaultSpan
	var scs []Scenario
	for seed := uint64(1); seed <= 3; seed++ {
		scs = append(scs, RandomSchedule(seed, span))
	}
	cells := RunAll(scs, Rates, []Policy{Fixed, Ladder, LearnedAdapt}, Options{Span: span, Seed: 1, Failover: true}, 2)
	for _, c := range cells {
		v := Judge(c, 0, 1, 2)
		t.Logf("%s at %g req/s: margin %+.2f pp, waste ratio %.3f, idle below ladder %v", c.Scenario, c.Rate, v.MarginPP, v.WasteRatio, v.IdleOK)
		if !math.IsNaN(v.WasteRatio) && v.WasteRatio > 0.5 {
			t.Errorf("%s at %g req/s: waste ratio %.3f, want at most 0.5", c.Scenario, c.Rate, v.WasteRatio)
		}
		if least := untunedLosses[fmt.Sprintf("%s/%g", c.Scenario, c.Rate)]; v.MarginPP < least-0.005 {
			t.Errorf("%s at %g req/s: learned adapt served %.2f points against fixed 60 s, want at least %.2f", c.Scenario, c.Rate, v.MarginPP, least)
		}
		if !v.IdleOK {
			t.Errorf("%s at %g req/s: learned adapt idled %v, the ladder %v", c.Scenario, c.Rate, c.Results[2].Idle, c.Results[1].Idle)
		}
	}
}

// TestAdaptOnLongResetsDrawnAnew: noisy at 400-800 s (rotor-sim --noisy
// 400-800), a scale the learner was not tuned on, where learned adapt
// still serves less than fixed 60 s in nearly every cell
// (docs/learned-cooldown.md). At 1 req/s on seeds 1-3 it lost 0.23, 0.26
// and 0.32 points while the broad base weighed a fall below every reset
// the ring held by how often the resets moved at all; 0.14, 0.14 and
// 0.19 since it weighs the falls alone there. It holds the loss to 0.2
// points, half of fixed's refusals and less idle time than the ladder.
func TestAdaptOnLongResetsDrawnAnew(t *testing.T) {
	sc, err := ParseNoisy("400-800")
	if err != nil {
		t.Fatal(err)
	}
	for seed := uint64(1); seed <= 3; seed++ {
		cells := RunAll([]Scenario{sc}, []float64{1}, []Policy{Fixed, Ladder, LearnedAdapt}, Options{Span: DefaultSpan, Seed: seed, Failover: true}, 2)
		v := Judge(cells[0], 0, 1, 2)
		t.Logf("seed %d: margin %+.2f pp, waste ratio %.3f, idle below ladder %v", seed, v.MarginPP, v.WasteRatio, v.IdleOK)
		if v.MarginPP < -0.2 {
			t.Errorf("seed %d: learned adapt served %.2f points against fixed 60 s, want at least -0.20", seed, v.MarginPP)
		}
		if v.WasteRatio > 0.5 {
			t.Errorf("seed %d: waste ratio %.3f, want at most 0.5", seed, v.WasteRatio)
		}
		if !v.IdleOK {
			t.Errorf("seed %d: learned adapt idled %v, the ladder %v", seed, cells[0].Results[2].Idle, cells[0].Results[1].Idle)
		}
	}
}

// TestAdaptWastesLittleWhereACredentialIsSeldomNeeded: bursty at 0.2
// req/s on the seeds of 1-48 where learned adapt wasted more than half of
// fixed's refusals (0.504-0.518) while a late recovery earned credit at
// its own time: at 0.2 req/s the pool seldom needs the third credential,
// whose recoveries come long after its 45 s resets, and credit it earned
// as if they were 300 s long bought refusals in the 600 s spells. Each
// seed also keeps its margin: at least 0, but on seed 43 the measured
// -0.07 points less a tenth (6 requests of 8,640 since a refusal just
// past all evidence steps by half the existing cooldown; over seeds 1-48
// bursty at 0.2 req/s still loses one cell, seed 46's 0.03 before).
func TestAdaptWastesLittleWhereACredentialIsSeldomNeeded(t *testing.T) {
	bursty := builtin(t, "bursty")
	for _, c := range []struct {
		seed   uint64
		margin float64
	}{{18, 0}, {20, 0}, {43, -0.17}, {44, 0}} {
		cells := RunAll([]Scenario{bursty}, []float64{0.2}, []Policy{Fixed, Ladder, LearnedAdapt}, Options{Span: DefaultSpan, Seed: c.seed, Failover: true}, 2)
		v := Judge(cells[0], 0, 1, 2)
		if v.WasteRatio > 0.5 || v.MarginPP < c.margin-0.005 {
			t.Errorf("seed %d: learned adapt wasted %.3f of fixed's refusals at a margin of %+.2f points, want at most 0.5 and at least %+.2f", c.seed, v.WasteRatio, v.MarginPP, c.margin)
		}
	}
}

// TestAdaptNeverIdlesAtAnExactReset: at R = 60 s, the existing cooldown,
// neither fixed nor the ladder ever idles, so neither may adapt. These
// cells (seeds of the mean tables) each idled about half a second in 12 h
// while a rest was at least a second long: a late credential in the order
// got its first request after a refused trial in the last second before
// the held 60 s, and rested past the reset.
func TestAdaptNeverIdlesAtAnExactReset(t *testing.T) {
	sc := steady(60 * time.Second)
	for _, c := range []struct {
		seed uint64
		rate float64
	}{{4, 0.2}, {6, 1}, {21, 1}, {27, 1}, {28, 1}, {44, 1}} {
		opt := Options{Span: testSpan(), Seed: c.seed, Failover: true}
		for _, pol := range []Policy{Ladder, LearnedAdapt} {
			if r := Run(sc, c.rate, pol, opt); r.Idle != 0 {
				t.Errorf("seed %d at %g req/s: %s idled %v", c.seed, c.rate, pol.Name, r.Idle)
			}
		}
	}
}

// TestAdaptAddsNoRequests: every policy sends the same natural requests
// (the arrivals depend only on the seed and rate) and no more provider
// calls than arrivals, one per request without failover; a learner only
// changes when they may go.
func TestAdaptAddsNoRequests(t *testing.T) {
	sc := builtin(t, "noisy")
	for _, pol := range Policies() {
		r := Run(sc, 1, pol, Options{Span: 30 * time.Minute, Seed: 3})
		if want := Run(sc, 1, Fixed, Options{Span: 30 * time.Minute, Seed: 3}).Arrivals; r.Arrivals != want {
			t.Errorf("%s saw %d arrivals, fixed %d", pol.Name, r.Arrivals, want)
		}
		if r.Calls > r.Arrivals || r.MaxCalls != 1 {
			t.Errorf("%s: %d provider calls for %d requests, up to %d for one, without failover", pol.Name, r.Calls, r.Arrivals, r.MaxCalls)
		}
		f := Run(sc, 1, pol, Options{Span: 30 * time.Minute, Seed: 3, Failover: true})
		if f.MaxCalls > Credentials {
			t.Errorf("%s with failover: %d calls for one request, more than the %d credentials", pol.Name, f.MaxCalls, Credentials)
		}
	}
}

func TestParseSchedule(t *testing.T) {
	sc, err := ParseSchedule("0:120,3600:40,7200:200")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ at, want time.Duration }{{0, 120 * time.Second}, {3599 * time.Second, 120 * time.Second}, {time.Hour, 40 * time.Second}, {3 * time.Hour, 200 * time.Second}} {
		if got := sc.Reset(c.at, DefaultSpan, nil); got != c.want {
			t.Errorf("Reset(%v) = %v, want %v", c.at, got, c.want)
		}
	}
	for _, bad := range []string{"", "10:120", "0:120,0:30", "0:0", "0:4000", "0:x", "0:120;60:3", "0:120,-5:3"} {
		if _, err := ParseSchedule(bad); err == nil {
			t.Errorf("ParseSchedule(%q) accepted", bad)
		}
	}
}

// builtin returns the built-in scenario named name, or fails the test.
func builtin(t *testing.T, name string) Scenario {
	t.Helper()
	for _, sc := range Scenarios() {
		if sc.Name == name {
			return sc
		}
	}
	t.Fatalf("no built-in scenario %q", name)
	return Scenario{}
}

// The table's last line has the exact format the issue asks for.
func TestWriteTableLastLine(t *testing.T) {
	pols := []Policy{Fixed, Ladder, LearnedAdapt}
	cells := RunAll(Scenarios()[:1], []float64{1}, pols, Options{Span: 20 * time.Minute, Seed: 1, Failover: true}, 1)
	var b strings.Builder
	if err := WriteTable(&b, cells, pols, 0, 1, 2); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	if !regexp.MustCompile(`^learned_min_served_margin_pp=-?\d+\.\d+ learned_max_waste_ratio=\d+\.\d+$`).MatchString(last) {
		t.Errorf("last line %q", last)
	}
}

// Means folds cells into one row per scenario and rate, every random
// schedule into one row, and counts what a tuner compares: lost cells and
// points, the worst waste ratio, wasteful cells and idle above the ladder.
func TestMeans(t *testing.T) {
	res := func(served, wasted int, idle time.Duration) Result {
		return Result{Arrivals: 100, Served: served, Wasted: wasted, Idle: idle}
	}
	cell := func(sc string, rate float64, fixed, ladder, learned Result) Cell {
		return Cell{Scenario: sc, Rate: rate, Results: []Result{fixed, ladder, learned}}
	}
	cells := []Cell{
		cell("noisy", 1, res(50, 10, 0), res(40, 5, time.Minute), res(52, 4, time.Second)),   // +2, 0.4
		cell("noisy", 1, res(50, 10, 0), res(40, 5, time.Minute), res(49, 6, 2*time.Minute)), // -1, 0.6, idles above
		cell("noisy", 5, res(50, 0, 0), res(40, 0, 0), res(50, 3, 0)),                        // 0, fixed wasted none
		cell("random 3", 1, res(30, 10, 0), res(30, 10, time.Minute), res(27, 2, 0)),         // -3, 0.2
		cell("random 9", 1, res(30, 10, 0), res(30, 10, time.Minute), res(31, 1, 0)),         // +1, 0.1
	}
	got := Means(cells, 0, 1, 2)
	want := []Mean{
		{Scenario: "noisy", Rate: 1, Cells: 2, Lost: 1, LostPP: -1, MarginPP: 0.5, WorstPP: -1, WorstRatio: 0.6, Wasteful: 1, IdleAbove: 1},
		{Scenario: "noisy", Rate: 5, Cells: 1, MarginPP: 0, WorstPP: 0},
		{Scenario: "random schedules", Rate: 1, Cells: 2, Lost: 1, LostPP: -3, MarginPP: -1, WorstPP: -3, WorstRatio: 0.2},
	}
	if len(got) != len(want) {
		t.Fatalf("Means: %d rows, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		near := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
		if g.Scenario != w.Scenario || g.Rate != w.Rate || g.Cells != w.Cells || g.Lost != w.Lost || !near(g.LostPP, w.LostPP) ||
			!near(g.MarginPP, w.MarginPP) || !near(g.WorstPP, w.WorstPP) || !near(g.WorstRatio, w.WorstRatio) ||
			g.Wasteful != w.Wasteful || g.IdleAbove != w.IdleAbove {
			t.Errorf("row %d: %+v, want %+v", i, g, w)
		}
	}
	var b strings.Builder
	if err := WriteMeans(&b, cells, []Policy{Fixed, Ladder, LearnedAdapt}, 0, 1, 2); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"| random schedules | 1 req/s | 2 | -1.000 | -3.00 | 1 | -3.00 | 0.200 | 0 | 0 |",
		"all 5 cells: mean margin -0.200 pp, 2 lost (-4.00 pp in all), 1 over half of fixed's waste, 1 idle above the ladder",
		"\nlearned_min_served_margin_pp=-3.00 learned_max_waste_ratio=0.600\n",
	} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("WriteMeans lacks %q:\n%s", s, b.String())
		}
	}
}

// Chances folds cells into the rows Means does and measures how far one
// policy moves the served share from another: mean, standard deviation,
// largest move either way, and the cells moved by half a point or more.
func TestChances(t *testing.T) {
	res := func(served int) Result { return Result{Arrivals: 1000, Served: served} }
	cell := func(sc string, base, other int) Cell {
		return Cell{Scenario: sc, Rate: 0.2, Results: []Result{res(base), res(other)}}
	}
	cells := []Cell{
		cell("noisy", 500, 510),    // +1
		cell("noisy", 500, 497),    // -0.3
		cell("random 4", 500, 500), // 0
		cell("random 7", 500, 494), // -0.6
		cell("random 8", 500, 505), // +0.5
	}
	got := Chances(cells, 0, 1)
	want := []Chance{
		{Scenario: "noisy", Rate: 0.2, Cells: 2, MeanPP: 0.35, SDPP: 0.65, LargestPP: 1, Moved: 1},
		{Scenario: "random schedules", Rate: 0.2, Cells: 3, MeanPP: -0.1 / 3, SDPP: math.Sqrt(0.61/3 - 0.01/9), LargestPP: 0.6, Moved: 2},
	}
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	if len(got) != len(want) {
		t.Fatalf("Chances: %d rows, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Scenario != w.Scenario || g.Rate != w.Rate || g.Cells != w.Cells || !near(g.MeanPP, w.MeanPP) ||
			!near(g.SDPP, w.SDPP) || !near(g.LargestPP, w.LargestPP) || g.Moved != w.Moved {
			t.Errorf("row %d: %+v, want %+v", i, g, w)
		}
	}
	var b strings.Builder
	if err := WriteChance(&b, cells, []Policy{LearnedAdapt, Rounded(LearnedAdapt, 100*time.Millisecond)}, 0, 1); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{
		"Chance: learned adapt, rests rounded up to 100ms against learned adapt,",
		"| noisy | 0.2 req/s | 2 | +0.350 | 0.650 | 1.00 | 1 |",
	} {
		if !strings.Contains(b.String(), s) {
			t.Errorf("WriteChance lacks %q:\n%s", s, b.String())
		}
	}
}

// stubLearner answers d for every throttle and every release.
type stubLearner struct {
	d  time.Duration
	ok bool
}

func (stubLearner) Observe(pool.LearnEvent)                         {}
func (s stubLearner) Suggest(pool.LearnEvent) (time.Duration, bool) { return s.d, s.ok }
func (stubLearner) Fell(pool.LearnEvent) bool                       { return false }
func (s stubLearner) Release(pool.LearnEvent) (time.Duration, bool) { return s.d, s.ok }

// Rounded rounds every cooldown its policy's learner answers up to a
// multiple of q, a release's rest too, and nothing else: a cooldown left
// to the pool stays, a sibling learner stays one, and a policy without a
// learner (fixed) is returned as it is.
func TestRounded(t *testing.T) {
	const q = 100 * time.Millisecond
	for _, tc := range []struct {
		d    time.Duration
		ok   bool
		want time.Duration
	}{
		{1234 * time.Millisecond, true, 1300 * time.Millisecond},
		{1300 * time.Millisecond, true, 1300 * time.Millisecond},
		{time.Millisecond, true, q},
		{1234 * time.Millisecond, false, 1234 * time.Millisecond},
	} {
		pol := Rounded(Policy{Name: "stub", Learner: func(clock.Clock) pool.Learner { return stubLearner{tc.d, tc.ok} }}, q)
		l := pol.Learner(nil)
		if d, ok := l.Suggest(pool.LearnEvent{}); d != tc.want || ok != tc.ok {
			t.Errorf("Suggest of %v (%v) = %v, %v; want %v", tc.d, tc.ok, d, ok, tc.want)
		}
		s, isSibling := l.(pool.SiblingLearner)
		if !isSibling {
			t.Fatalf("%T is no longer a pool.SiblingLearner", l)
		}
		if d, ok := s.Release(pool.LearnEvent{}); d != tc.want || ok != tc.ok {
			t.Errorf("Release of %v (%v) = %v, %v; want %v", tc.d, tc.ok, d, ok, tc.want)
		}
	}
	if pol := Rounded(Fixed, q); pol.Name != Fixed.Name || pol.Learner != nil {
		t.Errorf("Rounded(Fixed) = %+v, want fixed as it is", pol)
	}
	if pol := Rounded(LearnedAdapt, 0); pol.Name != LearnedAdapt.Name {
		t.Errorf("Rounded(adapt, 0) named %q, want it as it is", pol.Name)
	}
	if l := Rounded(Ladder, q).Learner(nil); l == nil {
		t.Error("Rounded(Ladder) has no learner")
	} else if _, isSibling := l.(pool.SiblingLearner); isSibling {
		t.Errorf("Rounded(Ladder) is a %T, a pool.SiblingLearner the ladder is not", l)
	}
}

// The oracle is told each reset: it never idles, never has a retry
// refused, and so serves at least what fixed 60 s serves, where every
// policy meets the same resets.
func TestOracle(t *testing.T) {
	random, err := ParseSchedule("0:150,1800:40,3600:600")
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range []Scenario{builtin(t, "steady 150"), random} {
		opt := Options{Span: 2 * time.Hour, Seed: 1, Failover: true}
		o, f := Run(sc, 1, Oracle, opt), Run(sc, 1, Fixed, opt)
		if o.Idle != 0 || o.Wasted != 0 {
			t.Errorf("%s: the oracle idled %v and wasted %d refusals, want neither", sc.Name, o.Idle, o.Wasted)
		}
		if o.Served < f.Served {
			t.Errorf("%s: the oracle served %d, fixed 60 s %d", sc.Name, o.Served, f.Served)
		}
	}
	if slices.ContainsFunc(Policies(), func(p Policy) bool { return p.Oracle }) {
		t.Error("the oracle is one of the table's policies; it must only be shown beside them")
	}
}

// TestLostToIdle: a request not served counts as lost to idle time only
// while a credential whose quota had reset was held by its cooldown.
func TestLostToIdle(t *testing.T) {
	steady150, steady60 := builtin(t, "steady 150"), builtin(t, "steady 60")
	for _, failover := range []bool{true, false} {
		opt := Options{Span: 2 * time.Hour, Seed: 1, Failover: failover}
		// Fixed 60 s retries a reset of 150 s at 60 s and 120 s, then
		// holds the credential until 180 s: 30 s of idle an episode, in
		// which requests go unserved once the others are spent too.
		f := Run(steady150, 0.2, Fixed, opt)
		if f.Idle == 0 || f.LostToIdle == 0 || f.LostToIdle > f.Arrivals-f.Served {
			t.Errorf("steady 150, fixed 60 s, failover %v: %d of %d requests not served lost to idle (%v idle), want some, no more than were not served",
				failover, f.LostToIdle, f.Arrivals-f.Served, f.Idle)
		}
		// Without idle time, none: the oracle's cooldowns end at the
		// reset, and so do fixed's at a reset of 60 s. Without failover a
		// request refused by one credential is not served even if
		// another's quota has reset and it is available: not idle time.
		for _, c := range []struct {
			sc  Scenario
			pol Policy
		}{{steady150, Oracle}, {steady60, Fixed}} {
			r := Run(c.sc, 1, c.pol, opt)
			if r.Idle != 0 || r.LostToIdle != 0 || r.Served == r.Arrivals {
				t.Errorf("%s, %s, failover %v: %d of %d requests not served lost to idle (%v idle), want none of some",
					c.sc.Name, c.pol.Name, failover, r.LostToIdle, r.Arrivals-r.Served, r.Idle)
			}
		}
	}
}

// TestCredentials: a run's served requests, wasted refusals and idle time
// split by credential add up to its totals, and follow the pool's
// configured order: at 0.2 req/s the pool tries key-0 first, so key-0
// serves and wastes more than key-2, which answers only while both others
// are spent or cooling. WriteCredentials prints each policy's sums, one
// row per credential.
func TestCredentials(t *testing.T) {
	steady150 := builtin(t, "steady 150")
	opt := Options{Span: 2 * time.Hour, Seed: 1, Failover: true}
	pols := []Policy{Fixed, LearnedAdapt}
	var cells []Cell
	for _, rate := range []float64{0.2, 1} {
		c := Cell{Scenario: steady150.Name, Rate: rate}
		for _, pol := range pols {
			r := Run(steady150, rate, pol, opt)
			var sum Usage
			for k, u := range r.Credentials {
				sum.Add(u)
				if u.Served == 0 {
					t.Errorf("%s at %g req/s: key-%d served nothing; every credential's quota is spent in two hours", pol.Name, rate, k)
				}
			}
			if sum != (Usage{r.Served, r.Wasted, r.Idle}) {
				t.Errorf("%s at %g req/s: credentials sum to %+v, the run has served %d, wasted %d, idle %v",
					pol.Name, rate, sum, r.Served, r.Wasted, r.Idle)
			}
			if first, last := r.Credentials[0], r.Credentials[Credentials-1]; rate == 0.2 &&
				(first.Served <= last.Served || first.Wasted <= last.Wasted) {
				t.Errorf("%s at 0.2 req/s: key-0 %+v, key-%d %+v; want key-0, tried first, to serve and waste more",
					pol.Name, first, Credentials-1, last)
			}
			c.Results = append(c.Results, r)
		}
		cells = append(cells, c)
	}
	var b strings.Builder
	if err := WriteCredentials(&b, cells, pols); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if !strings.Contains(out, "| policy | credential | served | wasted 429s | idle credential-s |\n") {
		t.Errorf("no header:\n%s", out)
	}
	for i, pol := range pols {
		for k := range Credentials {
			var want Usage
			for _, c := range cells {
				want.Add(c.Results[i].Credentials[k])
			}
			row := fmt.Sprintf("\n| %s | key-%d | %d | %d | %.0f |\n", pol.Name, k, want.Served, want.Wasted, want.Idle.Seconds())
			if !strings.Contains(out, row) {
				t.Errorf("no row %q:\n%s", strings.TrimSpace(row), out)
			}
		}
	}
}

// TestPoliciesMeetTheSameResets: common random numbers. Each credential
// draws its resets from a stream of its own, so its k-th exhaustion meets
// the same reset under every policy, whatever order the credentials
// exhaust in; a stream shared by the three would hand the k-th draw to
// whichever credential exhausted k-th, and two policies would be compared
// on different luck.
func TestPoliciesMeetTheSameResets(t *testing.T) {
	draws := func(pol Policy) [][]time.Duration {
		byStream := map[*rand.Rand][]time.Duration{}
		var order []*rand.Rand
		sc := Scenario{Name: "recorded", Reset: func(_, _ time.Duration, rng *rand.Rand) time.Duration {
			r := time.Duration(100_000+rng.IntN(100_001)) * time.Millisecond
			if _, ok := byStream[rng]; !ok {
				order = append(order, rng)
			}
			byStream[rng] = append(byStream[rng], r)
			return r
		}}
		Run(sc, 1, pol, Options{Span: 2 * time.Hour, Seed: 5, Failover: true})
		var out [][]time.Duration
		for _, rng := range order {
			out = append(out, byStream[rng])
		}
		return out
	}
	fixed, adapt := draws(Fixed), draws(LearnedAdapt)
	if len(fixed) != Credentials || len(adapt) != Credentials {
		t.Fatalf("%d and %d reset streams, want one per credential (%d)", len(fixed), len(adapt), Credentials)
	}
	for _, f := range fixed {
		i := slices.IndexFunc(adapt, func(a []time.Duration) bool { return a[0] == f[0] })
		if i < 0 {
			t.Fatalf("no stream of learned adapt starts with fixed's reset %v", f[0])
		}
		a := adapt[i]
		n := min(len(f), len(a))
		if n < 10 || !slices.Equal(f[:n], a[:n]) {
			t.Errorf("a credential's resets differ between policies (first %d exhaustions): fixed %v, adapt %v", n, f[:n], a[:n])
		}
	}
}

// TestRuns: every ended episode is filed under its run, which restarts
// when a credential's reset changes: in a steady scenario only each
// credential's first episode has run 0, in noisy (a reset drawn anew each
// time) every one does. Adapt learns a steady reset: once it has met it
// five times in a row it idles less per episode than fixed 60 s, whose
// retry after whole minutes comes about 30 s after a reset of 150 s, the
// two before it refused. WriteRuns prints the same figures.
func TestRuns(t *testing.T) {
	opt := Options{Span: 2 * time.Hour, Seed: 1, Failover: true}
	ended := func(r Result) (n int) {
		for _, e := range r.ByRun {
			n += e.Ended
		}
		return n
	}
	steady, noisy := builtin(t, "steady 150"), builtin(t, "noisy")
	sc, err := ParseSchedule("0:300,2400:100,4800:200")
	if err != nil {
		t.Fatal(err)
	}
	cell := Cell{Scenario: steady.Name, Rate: 1}
	for _, pol := range []Policy{Fixed, LearnedAdapt} {
		r := Run(steady, 1, pol, opt)
		cell.Results = append(cell.Results, r)
		if got := r.ByRun[0].Ended; got < 1 || got > Credentials {
			t.Errorf("%s, %s: %d episodes at run 0, want one per credential that exhausted (1-%d)", steady.Name, pol.Name, got, Credentials)
		}
		if ended(r) < 20 {
			t.Errorf("%s, %s: %d ended episodes, want at least 20 in 2 h", steady.Name, pol.Name, ended(r))
		}
		if r.ByChange != [quotasim.Changes]quotasim.Episodes{} {
			t.Errorf("%s, %s: episodes after a change %+v, want none", steady.Name, pol.Name, r.ByChange)
		}
		n := Run(noisy, 1, pol, opt)
		if n.ByRun[0].Ended != ended(n) || ended(n) < 20 {
			t.Errorf("noisy, %s: %d of %d episodes at run 0, want all of at least 20", pol.Name, n.ByRun[0].Ended, ended(n))
		}
		// Every episode but each credential's first met a reset drawn
		// anew, so each is filed under its change.
		changed := 0
		for _, e := range n.ByChange {
			changed += e.Ended
		}
		if firsts := n.ByRun[0].Ended - changed; firsts < 1 || firsts > Credentials {
			t.Errorf("noisy, %s: %d of %d episodes at run 0 after a change, want all but each credential's first", pol.Name, changed, n.ByRun[0].Ended)
		}
		// A fall from 300 s to 100 s, then a rise to 200 s.
		stepped := Run(sc, 1, pol, opt)
		for c, e := range stepped.ByChange {
			if want := c == quotasim.FellBelowHalf || c == quotasim.RoseByHalf; (e.Ended > 0) != want || e.Ended > Credentials {
				t.Errorf("%s, %s: %d episodes after a change that %s, want %v (1-%d)", sc.About, pol.Name, e.Ended, quotasim.ChangeNames[c], want, Credentials)
			}
		}
	}
	perEpisode := func(r Result) float64 {
		e := r.ByRun[quotasim.Runs-1]
		return e.Idle.Seconds() / float64(e.Ended)
	}
	f, a := cell.Results[0], cell.Results[1]
	// Fixed 60 s retries a reset of 150 s at 60 s and 120 s, refused, at
	// most twice an episode (later when its credential is not the first
	// available one).
	if e := f.ByRun[quotasim.Runs-1]; e.Wasted <= e.Ended || e.Wasted > 2*e.Ended {
		t.Errorf("steady 150 s, run 5 or more: fixed 60 s wasted %d refusals in %d episodes, want 1-2 each", e.Wasted, e.Ended)
	}
	if a.ByRun[quotasim.Runs-1].Ended == 0 || perEpisode(a) >= perEpisode(f) {
		t.Errorf("steady 150 s, run 5 or more: adapt idled %.1f s per episode, fixed %.1f s; want adapt less", perEpisode(a), perEpisode(f))
	}
	var out strings.Builder
	if err := WriteRuns(&out, []Cell{cell}, []Policy{Fixed, LearnedAdapt}, 0, 1); err != nil {
		t.Fatal(err)
	}
	e := a.ByRun[quotasim.Runs-1]
	row := fmt.Sprintf("| 5 or more | %d | %.1f | %.2f | %d | %.1f | %.2f |", f.ByRun[quotasim.Runs-1].Ended, perEpisode(f),
		float64(f.ByRun[quotasim.Runs-1].Wasted)/float64(f.ByRun[quotasim.Runs-1].Ended), e.Ended, perEpisode(a), float64(e.Wasted)/float64(e.Ended))
	if !strings.Contains(out.String(), row+"\n") || !strings.Contains(out.String(), "| run | fixed 60 s: episodes |") {
		t.Errorf("WriteRuns lacks the row %q:\n%s", row, out.String())
	}
	for _, name := range quotasim.ChangeNames {
		if !strings.Contains(out.String(), "| "+name+" | 0 | 0.0 | 0.00 | 0 | 0.0 | 0.00 |\n") {
			t.Errorf("WriteRuns lacks the empty row of the change %q (steady 150 s changes nothing):\n%s", name, out.String())
		}
	}
}

// -noisy 400-800: a reset drawn anew from the range, whole milliseconds,
// both ends reachable in principle and the draws spread over it; a range
// that is not whole seconds with 1 <= LO < HI <= 3600 is refused.
func TestParseNoisy(t *testing.T) {
	sc, err := ParseNoisy("400-800")
	if err != nil || sc.Name != "noisy 400-800" {
		t.Fatalf("ParseNoisy = %q, %v", sc.Name, err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var low, high int
	for range 1000 {
		r := sc.Reset(0, DefaultSpan, rng)
		if r < 400*time.Second || r > 800*time.Second || r%time.Millisecond != 0 {
			t.Fatalf("reset %v outside 400-800 s", r)
		}
		if r < 600*time.Second {
			low++
		} else {
			high++
		}
	}
	if low < 400 || high < 400 {
		t.Errorf("draws below and above 600 s: %d, %d; want about half each", low, high)
	}
	for _, bad := range []string{"800-400", "0-10", "10-3601", "10", "a-b", "1.5-9", "10-10"} {
		if _, err := ParseNoisy(bad); !errors.Is(err, ErrNoisy) {
			t.Errorf("ParseNoisy(%q) = %v, want ErrNoisy", bad, err)
		}
	}
}

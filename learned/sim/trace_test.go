package sim

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/pool"
)

// tracer prints the throttles and the recoveries after them of the first
// identity that throttles (of every identity with all), with the cooldown
// the learner answered, and the cooldowns a sibling's fall ended early;
// identities print as their digests' first six characters. It forwards
// pool.SiblingLearner, so that the traced run is the run the table
// measures (TestTraceMatchesTheRun).
type tracer struct {
	pool.SiblingLearner
	all   bool
	first string
	after map[string]bool // throttled, and no recovery printed since
	out   io.Writer
}

func (t *tracer) traced(id string) bool { return t.all || id == t.first }

func (t *tracer) Observe(ev pool.LearnEvent) {
	if ev.Outcome == pool.OutcomeSuccess && t.after[ev.Identity] {
		t.after[ev.Identity] = false
		fmt.Fprintf(t.out, "%9.1f %.6s ok\n", ev.At.Sub(epoch).Seconds(), ev.Identity)
	}
	t.SiblingLearner.Observe(ev)
}

func (t *tracer) Suggest(ev pool.LearnEvent) (time.Duration, bool) {
	if t.first == "" {
		t.first = ev.Identity
	}
	d, ok := t.SiblingLearner.Suggest(ev)
	if t.traced(ev.Identity) {
		t.after[ev.Identity] = true
		fmt.Fprintf(t.out, "%9.1f %.6s 429 -> %v %v\n", ev.At.Sub(epoch).Seconds(), ev.Identity, d, ok)
	}
	return d, ok
}

func (t *tracer) Release(ev pool.LearnEvent) (time.Duration, bool) {
	d, ok := t.SiblingLearner.Release(ev)
	if ok && t.traced(ev.Identity) {
		fmt.Fprintf(t.out, "%9.1f %.6s released -> %v (a sibling's reset fell)\n", ev.At.Sub(epoch).Seconds(), ev.Identity, d)
	}
	return d, ok
}

// traced returns pol with its learner wrapped in a tracer writing to out.
func traced(pol Policy, all bool, out io.Writer) Policy {
	inner := pol.Learner
	pol.Learner = func(clk clock.Clock) pool.Learner {
		return &tracer{SiblingLearner: inner(clk).(pool.SiblingLearner), all: all, after: map[string]bool{}, out: out}
	}
	return pol
}

// TestTrace prints one credential's cooldowns under learned adapt, for
// whoever tunes the learner: SIM_TRACE="step 300->60" SIM_RATE=1
// SIM_SPAN=2h go test ./learned/sim -run TestTrace -v ("random N", N
// from 1, names the random schedule of seed N, which the trace's first lines
// print; "noisy LO-HI" the scenario of rotor-sim --noisy LO-HI; SIM_SEED=N
// runs seed N, as rotor-sim --seed does; SIM_ALL=1 traces every
// credential).
func TestTrace(t *testing.T) {
	name := os.Getenv("SIM_TRACE")
	if name == "" {
		t.Skip("set SIM_TRACE to a scenario name")
	}
	rate, err := strconv.ParseFloat(os.Getenv("SIM_RATE"), 64)
	if err != nil {
		rate = 1
	}
	span, err := time.ParseDuration(os.Getenv("SIM_SPAN"))
	if err != nil {
		span = DefaultSpan
	}
	seed, err := strconv.ParseUint(os.Getenv("SIM_SEED"), 10, 64)
	if err != nil {
		seed = 1
	}
	scs := Scenarios()
	if n, err := strconv.ParseUint(strings.TrimPrefix(name, "random "), 10, 64); err == nil && n > 0 {
		scs = append(scs, RandomSchedule(n, span))
	}
	if sc, err := ParseNoisy(strings.TrimPrefix(name, "noisy ")); err == nil {
		scs = append(scs, sc)
	}
	for _, sc := range scs {
		if sc.Name == name {
			t.Log(sc.About)
			pol := traced(LearnedAdapt, os.Getenv("SIM_ALL") != "", os.Stdout)
			t.Logf("%+v", Run(sc, rate, pol, Options{Span: span, Seed: seed, Failover: true}))
			return
		}
	}
	t.Fatalf("no scenario %q", name)
}

// TestTraceMatchesTheRun: tracing changes nothing the table measures. A
// wrapper that hid pool.SiblingLearner would trace a run without the
// sibling's release, which changes this cell's figures (noisy at 1 req/s,
// seed 1, 2 h: 2,140 served with the release, 2,191 without).
func TestTraceMatchesTheRun(t *testing.T) {
	sc := builtin(t, "noisy")
	opt := Options{Span: 2 * time.Hour, Seed: 1, Failover: true}
	var out strings.Builder
	got := Run(sc, 1, traced(LearnedAdapt, true, &out), opt)
	if want := Run(sc, 1, LearnedAdapt, opt); got != want {
		t.Errorf("traced run %+v, want the run's %+v", got, want)
	}
	if !strings.Contains(out.String(), "released") {
		t.Errorf("the trace shows no release; want one in %s at 1 req/s", sc.Name)
	}
}

package sim

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/pool"
)

// tracer prints the throttles and the recoveries after them of the first
// identity that throttles (of every identity with all), with the cooldown
// the learner answered; identities print as their digests' first six
// characters.
type tracer struct {
	pool.Learner
	all   bool
	first string
	after map[string]bool // throttled, and no recovery printed since
}

func (t *tracer) traced(id string) bool { return t.all || id == t.first }

func (t *tracer) Observe(ev pool.LearnEvent) {
	if ev.Outcome == pool.OutcomeSuccess && t.after[ev.Identity] {
		t.after[ev.Identity] = false
		fmt.Printf("%9.1f %.6s ok\n", ev.At.Sub(epoch).Seconds(), ev.Identity)
	}
	t.Learner.Observe(ev)
}

func (t *tracer) Suggest(ev pool.LearnEvent) (time.Duration, bool) {
	if t.first == "" {
		t.first = ev.Identity
	}
	d, ok := t.Learner.Suggest(ev)
	if t.traced(ev.Identity) {
		t.after[ev.Identity] = true
		fmt.Printf("%9.1f %.6s 429 -> %v %v\n", ev.At.Sub(epoch).Seconds(), ev.Identity, d, ok)
	}
	return d, ok
}

// TestTrace prints one credential's cooldowns under learned adapt, for
// whoever tunes the learner: SIM_TRACE="step 300->60" SIM_RATE=1
// SIM_SPAN=2h go test ./learned/sim -run TestTrace -v ("random 1" to
// "random 30" name the random schedules, which the trace's first lines
// print; SIM_SEED=N runs seed N, as rotor-sim --seed does; SIM_ALL=1
// traces every credential).
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
	for i := uint64(1); i <= 30; i++ {
		scs = append(scs, RandomSchedule(i, span))
	}
	for _, sc := range scs {
		if sc.Name == name {
			t.Log(sc.About)
			pol := LearnedAdapt
			inner := pol.Learner
			pol.Learner = func(clk clock.Clock) pool.Learner {
				return &tracer{Learner: inner(clk), all: os.Getenv("SIM_ALL") != "", after: map[string]bool{}}
			}
			t.Logf("%+v", Run(sc, rate, pol, Options{Span: span, Seed: seed, Failover: true}))
			return
		}
	}
	t.Fatalf("no scenario %q", name)
}

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
// identity that throttles, with the cooldown the learner answered.
type tracer struct {
	pool.Learner
	first string
	after bool
}

func (t *tracer) Observe(ev pool.LearnEvent) {
	if ev.Identity == t.first && ev.Outcome == pool.OutcomeSuccess && t.after {
		t.after = false
		fmt.Printf("%9.1f ok\n", ev.At.Sub(epoch).Seconds())
	}
	t.Learner.Observe(ev)
}

func (t *tracer) Suggest(ev pool.LearnEvent) (time.Duration, bool) {
	if t.first == "" {
		t.first = ev.Identity
	}
	d, ok := t.Learner.Suggest(ev)
	if ev.Identity == t.first {
		t.after = true
		fmt.Printf("%9.1f 429 -> %v %v\n", ev.At.Sub(epoch).Seconds(), d, ok)
	}
	return d, ok
}

// TestTrace prints one credential's cooldowns under learned adapt, for
// whoever tunes the learner: SIM_TRACE="step 300->60" SIM_RATE=1
// SIM_SPAN=2h go test ./learned/sim -run TestTrace -v ("random 1" to
// "random 9" name the random schedules, which the trace's first lines
// print).
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
	scs := Scenarios()
	for i := uint64(1); i <= 9; i++ {
		scs = append(scs, RandomSchedule(i, span))
	}
	for _, sc := range scs {
		if sc.Name == name {
			t.Log(sc.About)
			pol := LearnedAdapt
			inner := pol.Learner
			pol.Learner = func(clk clock.Clock) pool.Learner { return &tracer{Learner: inner(clk)} }
			t.Logf("%+v", Run(sc, rate, pol, Options{Span: span, Seed: 1, Failover: true}))
			return
		}
	}
	t.Fatalf("no scenario %q", name)
}

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

type traceLearner struct {
	pool.Learner
	clk   clock.Clock
	first string
	n     int
	after bool
	seen  []string
}

func (t *traceLearner) Observe(ev pool.LearnEvent) {
	if t.first == "" && ev.Outcome == pool.OutcomeThrottled {
		t.seen = append(t.seen, ev.Identity)
		want, _ := strconv.Atoi(os.Getenv("SIM_KEY"))
		if len(t.seen) > want && (len(t.seen) == 1 || t.seen[len(t.seen)-1] != t.seen[len(t.seen)-2]) {
			uniq := map[string]bool{}
			for _, s := range t.seen {
				uniq[s] = true
			}
			if len(uniq) == want+1 {
				t.first = ev.Identity
			}
		}
	}
	if ev.Identity == t.first && ev.Outcome == pool.OutcomeSuccess && t.after {
		t.after = false
		fmt.Printf("%8.1f ok\n", ev.At.Sub(epoch).Seconds())
	}
	t.Learner.Observe(ev)
}

func (t *traceLearner) Suggest(ev pool.LearnEvent) (time.Duration, bool) {
	d, ok := t.Learner.Suggest(ev)
	if os.Getenv("SIM_ALL") != "" && ev.Identity != t.first && d != time.Minute {
		fmt.Printf("%8.1f %s 429 -> %v %v\n", ev.At.Sub(epoch).Seconds(), ev.Identity[:4], d, ok)
	}
	if ev.Identity == t.first && t.n < 4000 {
		t.n++
		t.after = true
		fmt.Printf("%8.1f 429 -> %v %v\n", ev.At.Sub(epoch).Seconds(), d, ok)
	}
	return d, ok
}

func TestDebugTrace(t *testing.T) {
	name := os.Getenv("SIM_TRACE")
	if name == "" {
		t.Skip()
	}
	rate, _ := strconv.ParseFloat(os.Getenv("SIM_RATE"), 64)
	for _, sc := range Scenarios() {
		if sc.Name != name {
			continue
		}
		pol := LearnedAdapt
		inner := pol.Learner
		pol.Learner = func(clk clock.Clock) pool.Learner { return &traceLearner{Learner: inner(clk), clk: clk} }
		debugIdle = func(name string, a, b time.Time) {
			if b.Sub(a) > time.Second {
				fmt.Printf("%8.1f IDLE %s %v\n", a.Sub(epoch).Seconds(), name, b.Sub(a))
			}
		}
		r := Run(sc, rate, pol, Options{Seed: 1})
		fmt.Println(r)
	}
}

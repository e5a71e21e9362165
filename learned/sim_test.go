package learned

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/quotasim"
	"github.com/rotorhq/rotor/pool"
)

var simMarkdown = flag.String("sim.markdown", "", "write the TestSimulation table to this file as markdown")

// The simulated pool: credentials tried in configured order, each with a
// quota of simQuota requests that, once spent, is refused until a hidden
// reset R after the first refusal. Requests arrive as a Poisson process;
// a request finding every credential cooling is answered locally (no
// provider call).
const (
	simCredentials = 3
	simQuota       = 20
	simSpan        = 12 * time.Hour
	simFallback    = 60 * time.Second // the pool's existing throttle cooldown
	simCap         = 3600 * time.Second
)

// simCase is a provider whose reset is hidden from the policies. reset
// may draw from rng, which is seeded the same for every policy.
type simCase struct {
	name, about string
	reset       func(elapsed time.Duration, rng *rand.Rand) time.Duration
	// wins: learned apply wastes fewer throttles than fixed, idles less
	// than the ladder, and serves at least as many requests as either, at
	// every rate; TestSimulation asserts it. The other cases are where
	// learned loses today: the table documents them and nothing is
	// asserted.
	wins bool
}

var simCases = []simCase{
	{"fixed", "R = 150 s", func(time.Duration, *rand.Rand) time.Duration { return 150 * time.Second }, true},
	{"drifting", "R drifts 100 s → 300 s → 100 s over the run", func(e time.Duration, _ *rand.Rand) time.Duration {
		x := math.Sin(math.Pi * float64(e) / float64(simSpan))
		return time.Duration(100+200*x) * time.Second
	}, false},
	{"bursty", "R = 45 s, but 600 s for 20 min of every 2 h", func(e time.Duration, _ *rand.Rand) time.Duration {
		if e%(2*time.Hour) >= time.Hour && e%(2*time.Hour) < time.Hour+20*time.Minute {
			return 600 * time.Second
		}
		return 45 * time.Second
	}, false},
	{"noisy", "R uniform in 100-200 s, drawn anew for every exhaustion", func(_ time.Duration, rng *rand.Rand) time.Duration {
		return time.Duration(100_000+rng.IntN(100_001)) * time.Millisecond
	}, false},
	{"step", "R = 300 s for the first 6 h, then 60 s", func(e time.Duration, _ *rand.Rand) time.Duration {
		if e < simSpan/2 {
			return 300 * time.Second
		}
		return 60 * time.Second
	}, false},
}

// simRates are the natural traffic rates, requests per second.
var simRates = []float64{0.2, 1, 5}

// simPolicy decides a throttled credential's cooldown.
type simPolicy interface {
	throttled(cred int, at time.Time) time.Duration
	succeeded(cred int, at time.Time)
}

// fixedPolicy is the existing fallback: 60 s after every throttle.
type fixedPolicy struct{}

func (fixedPolicy) throttled(int, time.Time) time.Duration { return simFallback }
func (fixedPolicy) succeeded(int, time.Time)               {}

// ladderPolicy doubles the cooldown on each consecutive throttle (60 s,
// 120 s, 240 s, …, capped) and starts again after a success: the
// escalation common in other proxies.
type ladderPolicy struct{ level [simCredentials]int }

func (p *ladderPolicy) throttled(cred int, _ time.Time) time.Duration {
	d := min(simFallback<<p.level[cred], simCap)
	p.level[cred] = min(p.level[cred]+1, 16)
	return d
}

func (p *ladderPolicy) succeeded(cred int, _ time.Time) { p.level[cred] = 0 }

// learnedPolicy is the Learner in apply mode, wired as the pool wires it:
// Observe every outcome, Suggest on throttles, the existing cooldown when
// it declines.
type learnedPolicy struct {
	l   *Learner
	ids [simCredentials]string
}

func newLearnedPolicy(clk clock.Clock) *learnedPolicy {
	policy, err := ParsePolicy(`{"buckets":[{"provider":"api","model":"decide-mini","quota_bucket":null}]}`)
	if err != nil {
		panic(err)
	}
	p := &learnedPolicy{l: New(Config{Mode: ModeApply, Policy: policy, MaxSeconds: int64(simCap / time.Second), Clock: clk})}
	for i := range p.ids {
		p.ids[i] = identity(fmt.Sprintf("credential-%d", i), "api", "decide-mini", "")
	}
	return p
}

func (p *learnedPolicy) event(cred int, o pool.Outcome, at time.Time) pool.LearnEvent {
	return pool.LearnEvent{Provider: "api", Model: "decide-mini", Identity: p.ids[cred], Outcome: o, At: at}
}

func (p *learnedPolicy) throttled(cred int, at time.Time) time.Duration {
	ev := p.event(cred, pool.OutcomeThrottled, at)
	p.l.Observe(ev)
	if d, ok := p.l.Suggest(ev); ok {
		return d
	}
	return simFallback
}

func (p *learnedPolicy) succeeded(cred int, at time.Time) {
	p.l.Observe(p.event(cred, pool.OutcomeSuccess, at))
}

// simResult is one policy's run.
type simResult struct {
	arrivals, served, episodes, wasted int
	idle                               time.Duration
}

// simulate runs one policy against one case at one rate. The arrivals
// depend only on the case and rate, so the policies see the same traffic.
func simulate(c simCase, rate float64, seed uint64, newPolicy func(clock.Clock) simPolicy) simResult {
	clk := clock.NewFake(epoch)
	pol := newPolicy(clk)
	rng := rand.New(rand.NewPCG(seed, uint64(rate*1000)))
	noise := rand.New(rand.NewPCG(seed, 1))
	var provs [simCredentials]*quotasim.Provider
	var release [simCredentials]time.Time
	var res simResult
	for i := range provs {
		provs[i] = quotasim.New(simQuota, func(now time.Time) time.Duration { return c.reset(now.Sub(epoch), noise) })
	}
	end := epoch.Add(simSpan)
	for now := epoch; ; {
		now = now.Add(time.Duration(rng.ExpFloat64() / rate * float64(time.Second)))
		if !now.Before(end) {
			break
		}
		clk.Set(now)
		res.arrivals++
		cred := -1
		for i := range release {
			if !release[i].After(now) {
				cred = i
				break
			}
		}
		if cred < 0 {
			continue // every credential is cooling: answered locally
		}
		p := provs[cred]
		if p.Call(now) {
			res.served++
			pol.succeeded(cred, now)
			continue
		}
		release[cred] = now.Add(pol.throttled(cred, now))
		p.Release = release[cred]
	}
	for _, p := range provs {
		p.Finish(end)
		res.wasted += p.Wasted
		res.idle += p.Idle
	}
	return res
}

// TestSimulation shows where learned cooldowns pay: against a provider
// whose reset is hidden and steady, learned apply wastes fewer throttles
// than the fixed fallback, leaves credentials idle for less time after the
// real reset than the doubling ladder, and serves at least as many
// requests as either. The cases where it loses today (a drifting, bursty,
// noisy or stepping reset) are run and tabled, not asserted. Run with -v
// to see the table, or with -sim.markdown=FILE to write it.
func TestSimulation(t *testing.T) {
	policies := []struct {
		name string
		make func(clock.Clock) simPolicy
	}{
		{"fixed 60 s", func(clock.Clock) simPolicy { return fixedPolicy{} }},
		{"ladder 60 s×2ⁿ", func(clock.Clock) simPolicy { return &ladderPolicy{} }},
		{"learned apply", func(clk clock.Clock) simPolicy { return newLearnedPolicy(clk) }},
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Simulated %d hours, fake clock: %d credentials tried in order, each with a quota of %d requests that, once spent, "+
		"is refused until a hidden reset R after the first refusal; Poisson traffic. "+
		"Wasted 429s are refusals after the first of each exhaustion (a credential tried too early); "+
		"idle is cooldown left after the quota had really reset, in credential-seconds.\n\n",
		int(simSpan.Hours()), simCredentials, simQuota)
	for _, c := range simCases {
		verdict := "learned loses here today; documented, not asserted"
		if c.wins {
			verdict = "asserted: learned wins"
		}
		fmt.Fprintf(&b, "- %s: %s (%s)\n", c.name, c.about, verdict)
	}
	b.WriteString("\n| case | traffic | policy | wasted 429s | idle credential-s | requests served |\n")
	b.WriteString("| --- | ---: | --- | ---: | ---: | ---: |\n")
	for ci, c := range simCases {
		for _, rate := range simRates {
			results := make([]simResult, len(policies))
			for pi, p := range policies {
				results[pi] = simulate(c, rate, uint64(ci+1), p.make)
				r := results[pi]
				fmt.Fprintf(&b, "| %s | %g req/s | %s | %d | %.0f | %.1f%% |\n",
					c.name, rate, p.name, r.wasted, r.idle.Seconds(), 100*float64(r.served)/float64(r.arrivals))
			}
			if !c.wins {
				continue
			}
			fixed, ladder, learned := results[0], results[1], results[2]
			if learned.wasted >= fixed.wasted {
				t.Errorf("%s at %g req/s: learned wasted %d throttles, fixed %d", c.name, rate, learned.wasted, fixed.wasted)
			}
			if learned.idle >= ladder.idle {
				t.Errorf("%s at %g req/s: learned idled %v, ladder %v", c.name, rate, learned.idle, ladder.idle)
			}
			if learned.served < fixed.served || learned.served < ladder.served {
				t.Errorf("%s at %g req/s: learned served %d, fixed %d, ladder %d", c.name, rate, learned.served, fixed.served, ladder.served)
			}
		}
	}
	t.Log("\n" + b.String())
	if *simMarkdown != "" {
		if err := os.WriteFile(*simMarkdown, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

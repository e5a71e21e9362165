package sim

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/quotasim"
	"github.com/rotorhq/rotor/internal/secret"
	"github.com/rotorhq/rotor/learned"
	"github.com/rotorhq/rotor/pool"
)

// The simulated pool: Credentials credentials tried in configured order,
// each with a quota of Quota requests that, once spent, is refused until a
// hidden reset R after the first refusal (refusals do not move it).
const (
	Credentials = 3
	Quota       = 20
	// DefaultSpan is the simulated time of one cell.
	DefaultSpan = 12 * time.Hour
	fallback    = pool.ThrottleRest // the existing cooldown of a throttle
	maxSeconds  = 3600              // MODEL_COOLDOWN_MAX_SECONDS
	model       = "decide-mini"
	poolName    = "api"
)

// Rates are the natural traffic rates of the table, requests per second.
var Rates = []float64{0.2, 1, 5}

// epoch is the simulation's start time.
var epoch = time.UnixMilli(1_767_225_600_000) // 2026-01-01T00:00:00Z

// Scenario is a provider whose reset is hidden from the policies. Reset
// returns R for an exhaustion at elapsed (of span); it may draw from rng,
// the exhausted credential's own stream, seeded alike for every policy.
type Scenario struct {
	Name, About string
	Reset       func(elapsed, span time.Duration, rng *rand.Rand) time.Duration
}

func steady(r time.Duration) Scenario {
	return Scenario{
		Name:  fmt.Sprintf("steady %v", r.Seconds()),
		About: fmt.Sprintf("R = %v s", r.Seconds()),
		Reset: func(time.Duration, time.Duration, *rand.Rand) time.Duration { return r },
	}
}

// Scenarios are the table's cases (issue 19).
func Scenarios() []Scenario {
	return []Scenario{
		steady(30 * time.Second), steady(60 * time.Second), steady(150 * time.Second), steady(600 * time.Second),
		{"drifting", "R drifts 100 s -> 300 s -> 100 s over the run", func(e, span time.Duration, _ *rand.Rand) time.Duration {
			x := math.Sin(math.Pi * float64(e) / float64(span))
			return time.Duration((100 + 200*x) * float64(time.Second))
		}},
		{"bursty", "R = 45 s, but 600 s for 20 min of every 2 h", func(e, _ time.Duration, _ *rand.Rand) time.Duration {
			if p := e % (2 * time.Hour); p >= time.Hour && p < time.Hour+20*time.Minute {
				return 600 * time.Second
			}
			return 45 * time.Second
		}},
		noisy("noisy", 100, 200),
		{"step 300->60", "R = 300 s for the first half, then 60 s", func(e, span time.Duration, _ *rand.Rand) time.Duration {
			if e < span/2 {
				return 300 * time.Second
			}
			return 60 * time.Second
		}},
		{"step 60->300", "R = 60 s for the first half, then 300 s", func(e, span time.Duration, _ *rand.Rand) time.Duration {
			if e < span/2 {
				return 60 * time.Second
			}
			return 300 * time.Second
		}},
	}
}

// noisy is a reset uniform in lo-hi seconds, drawn anew for every
// exhaustion.
func noisy(name string, lo, hi int) Scenario {
	return Scenario{name, fmt.Sprintf("R uniform in %d-%d s, drawn anew for every exhaustion", lo, hi), func(_, _ time.Duration, rng *rand.Rand) time.Duration {
		return time.Duration(lo*1000+rng.IntN((hi-lo)*1000+1)) * time.Millisecond
	}}
}

// ErrNoisy is ParseNoisy's error.
var ErrNoisy = errors.New("invalid noisy range")

// ParseNoisy reads "400-800": a scenario named "noisy 400-800" whose reset
// is uniform in 400-800 s, drawn anew for every exhaustion, as noisy's is
// in 100-200 s: a reset drawn anew at a scale the learner was not tuned
// on. Bounds are whole seconds, 1 <= lo < hi <= 3600.
func ParseNoisy(s string) (Scenario, error) {
	a, b, ok := strings.Cut(s, "-")
	lo, err1 := strconv.Atoi(a)
	hi, err2 := strconv.Atoi(b)
	if !ok || err1 != nil || err2 != nil || lo < 1 || hi <= lo || hi > maxSeconds {
		return Scenario{}, fmt.Errorf("%w: %q is not LO-HI, whole seconds with 1 <= LO < HI <= %d", ErrNoisy, s, maxSeconds)
	}
	return noisy(fmt.Sprintf("noisy %d-%d", lo, hi), lo, hi), nil
}

// ErrSchedule is ParseSchedule's error.
var ErrSchedule = errors.New("invalid schedule")

// ParseSchedule reads "0:120,3600:40,7200:200": from each offset in
// seconds on, R is that many seconds. Offsets must start at 0 and
// increase; resets are 1-3600 s.
func ParseSchedule(s string) (Scenario, error) {
	type step struct{ at, r time.Duration }
	var steps []step
	for _, part := range strings.Split(s, ",") {
		a, b, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			return Scenario{}, fmt.Errorf("%w: %q is not seconds:reset", ErrSchedule, part)
		}
		at, err1 := strconv.ParseFloat(a, 64)
		r, err2 := strconv.ParseFloat(b, 64)
		if err1 != nil || err2 != nil || at < 0 || r < 1 || r > maxSeconds || math.IsNaN(at) || math.IsInf(at, 0) {
			return Scenario{}, fmt.Errorf("%w: %q", ErrSchedule, part)
		}
		st := step{time.Duration(at * float64(time.Second)), time.Duration(r * float64(time.Second))}
		if len(steps) == 0 && st.at != 0 || len(steps) > 0 && st.at <= steps[len(steps)-1].at {
			return Scenario{}, fmt.Errorf("%w: offsets must start at 0 and increase", ErrSchedule)
		}
		steps = append(steps, st)
	}
	return Scenario{
		Name:  "schedule",
		About: "R by schedule " + s,
		Reset: func(e, _ time.Duration, _ *rand.Rand) time.Duration {
			i := sort.Search(len(steps), func(i int) bool { return steps[i].at > e }) - 1
			return steps[max(i, 0)].r
		},
	}, nil
}

// RandomSchedule returns a schedule scenario drawn from seed: a reset of
// 20-900 s that changes every 10-120 min, for schedules the learner was
// not tuned on.
func RandomSchedule(seed uint64, span time.Duration) Scenario {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var b strings.Builder
	for at := time.Duration(0); at < span; at += time.Duration(10+rng.IntN(111)) * time.Minute {
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%d:%d", int(at.Seconds()), 20+rng.IntN(881))
	}
	sc, err := ParseSchedule(b.String())
	if err != nil {
		panic(err) // programmer error: the schedule above is well formed
	}
	sc.Name = fmt.Sprintf("random %d", seed)
	return sc
}

// Policy is one way of deciding a throttle's cooldown: a learner wired
// into the pool (nil: the pool's existing cooldown).
type Policy struct {
	Name    string
	Learner func(clk clock.Clock) pool.Learner
	// Oracle tells the pool, with each throttle, the exact time left to
	// the provider's hidden reset as trusted advice: the best a cooldown
	// can do, which no real policy can know.
	Oracle bool
}

// Oracle is the cooldown that knows the reset: no idle time and no
// refusal after an episode's first; not one of the table's policies.
var Oracle = Policy{Name: "oracle (the reset known)", Oracle: true}

// The policies of the table, in its order.
var (
	Fixed  = Policy{Name: "fixed 60 s"}
	Ladder = Policy{Name: "ladder 60 s x 2^n", Learner: func(clock.Clock) pool.Learner { return &ladder{} }}
	// LearnedSpec is the learner with rotor's departures off: the spec's
	// rules to the letter.
	LearnedSpec = learnedPolicy("learned (spec)", learned.Config{SpecLiteral: true})
	// LearnedApply is the learner as rotor applies it today (adapt off).
	LearnedApply = learnedPolicy("learned apply", learned.Config{})
	// LearnedAdapt is learned apply with learned_cooldown.adapt on.
	LearnedAdapt = learnedPolicy("learned adapt", learned.Config{Adapt: true})
)

// Policies lists the table's policies.
func Policies() []Policy { return []Policy{Fixed, Ladder, LearnedSpec, LearnedApply, LearnedAdapt} }

func learnedPolicy(name string, cfg learned.Config) Policy {
	return Policy{Name: name, Learner: func(clk clock.Clock) pool.Learner {
		p, err := learned.ParsePolicy(`{"buckets":[{"provider":"api","model":"decide-mini","quota_bucket":null}]}`)
		if err != nil {
			panic(err)
		}
		c := cfg
		c.Mode, c.Policy, c.MaxSeconds, c.Clock = learned.ModeApply, p, maxSeconds, clk
		return learned.New(c)
	}}
}

// episodes keeps a value for each identity's open throttle episode; a
// success ends the episode (Observe). The simple policies below share it.
type episodes[T any] struct {
	mu   sync.Mutex
	open map[string]T
}

func (e *episodes[T]) Observe(ev pool.LearnEvent) {
	if ev.Outcome == pool.OutcomeSuccess {
		e.mu.Lock()
		delete(e.open, ev.Identity)
		e.mu.Unlock()
	}
}

// update stores f's result as id's value; f gets the value held and
// whether the episode is open (false: its first throttle).
func (e *episodes[T]) update(id string, f func(v T, open bool) T) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.open == nil {
		e.open = map[string]T{}
	}
	v, ok := e.open[id]
	e.open[id] = f(v, ok)
}

// ladder doubles the cooldown on each consecutive throttle of a
// credential (60 s, 120 s, 240 s, ..., capped) and starts again after a
// success: the escalation common in other proxies.
type ladder struct{ episodes[int] }

func (l *ladder) Suggest(ev pool.LearnEvent) (time.Duration, bool) {
	var n int
	l.update(ev.Identity, func(v int, _ bool) int { n = v; return min(v+1, 16) })
	return min(fallback<<n, maxSeconds*time.Second), true
}

// Result is one policy's run of one cell.
type Result struct {
	Arrivals, Served int
	// Calls counts provider calls; MaxCalls is the most one request made.
	Calls, MaxCalls int
	// Wasted counts refusals after the first of each exhaustion: a
	// credential tried before its quota reset.
	Wasted int
	// Idle is cooldown left after a quota had really reset, summed over
	// credentials.
	Idle time.Duration
	// LostToIdle counts requests not served while a credential whose
	// quota had reset was still cooling: had its cooldown ended at the
	// reset, it would have answered them (a first-order count: it would
	// then have been spent sooner). The other requests not served came
	// while no credential idled: every quota was spent, or, without
	// failover, the one call was refused.
	LostToIdle int
	// ByRun splits the episodes by their run: how many episodes in a row
	// before each had met the same reset at its credential
	// (quotasim.Provider.ByRun).
	ByRun [quotasim.Runs]quotasim.Episodes
	// ByChange splits the episodes of run 0 after a change of the reset
	// by how it changed (quotasim.Provider.ByChange).
	ByChange [quotasim.Changes]quotasim.Episodes
	// Credentials splits Served, Wasted and Idle by credential, in
	// configured order (key-0 first).
	Credentials [Credentials]Usage
}

// Usage is one credential's part of a run: the requests it served, its
// refusals after the first of each exhaustion, and its idle time.
type Usage struct {
	Served, Wasted int
	Idle           time.Duration
}

// Add adds v to u.
func (u *Usage) Add(v Usage) {
	u.Served, u.Wasted, u.Idle = u.Served+v.Served, u.Wasted+v.Wasted, u.Idle+v.Idle
}

// ServedPct is the share of requests the provider answered, in percent.
func (r Result) ServedPct() float64 {
	if r.Arrivals == 0 {
		return 0
	}
	return 100 * float64(r.Served) / float64(r.Arrivals)
}

// Options of a run.
type Options struct {
	// Span is the simulated time of a cell; <= 0 is DefaultSpan.
	Span time.Duration
	// Seed seeds the arrivals and the scenarios' draws.
	Seed uint64
	// Failover sends a refused request on to the next available
	// credential it has not tried, as the route does; without it every
	// request makes one call, as the measurements did.
	Failover bool
}

func (o Options) span() time.Duration {
	if o.Span <= 0 {
		return DefaultSpan
	}
	return o.Span
}

// Run runs one policy against one scenario at rate requests per second.
// Requests arrive as a Poisson process that depends only on the seed and
// the rate, so every policy sees the same traffic. Each request goes
// through the real pool as the route sends it: Select, a call to the
// fake provider, Record; a refused call fails over to the next available
// credential this request has not tried (no waiting); a request that
// finds every credential cooling is answered locally, unserved.
func Run(sc Scenario, rate float64, pol Policy, opt Options) Result {
	clk := clock.NewFake(epoch)
	span := opt.span()
	var lr pool.Learner
	if pol.Learner != nil {
		lr = pol.Learner(clk)
	}
	creds := make([]pool.Credential, Credentials)
	names := make([]string, Credentials)
	for i := range creds {
		names[i] = fmt.Sprintf("key-%d", i)
		creds[i] = pool.Credential{Name: names[i], Key: secret.New(fmt.Sprintf("sk-sim-%d-0123456789abcdef", i))}
	}
	p := pool.New(pool.Config{
		Options:     pool.Options{Name: poolName},
		Credentials: creds,
		Settings:    pool.Settings{ModelCooldownEnabled: true, MaxSeconds: maxSeconds},
		Store:       pool.NewStore(clk, 0),
		Clock:       clk,
		Learner:     lr,
	})
	scope := pool.Scope{Model: model}
	arrivals := rand.New(rand.NewPCG(opt.Seed, uint64(rate*1000)))
	provs := make([]*quotasim.Provider, Credentials)
	byName := map[string]int{}
	for i := range provs {
		// Common random numbers: each credential draws from a stream of
		// its own, so its k-th exhaustion meets the same reset under
		// every policy, whatever order the credentials exhaust in.
		noise := rand.New(rand.NewPCG(opt.Seed, 1+uint64(i)))
		provs[i] = quotasim.New(Quota, func(now time.Time) time.Duration {
			return sc.Reset(now.Sub(epoch), span, noise)
		})
		byName[names[i]] = i
	}
	var res Result
	end := epoch.Add(span)
	left := make([]string, 0, Credentials)
	for now := epoch; ; {
		now = now.Add(time.Duration(arrivals.ExpFloat64() / rate * float64(time.Second))).Truncate(time.Millisecond)
		if !now.Before(end) {
			break
		}
		clk.Set(now)
		res.Arrivals++
		left = append(left[:0], names...)
		served := false
		for calls := 0; len(left) > 0; {
			c, err := p.Select(scope, left)
			if err != nil {
				break // every credential left is cooling: answered locally
			}
			i := byName[c.Name]
			pr := provs[i]
			res.Calls++
			calls++
			res.MaxCalls = max(res.MaxCalls, calls)
			if pr.Call(now) {
				p.Record(c.Name, pool.Observation{Scope: scope, Status: 200})
				res.Served++
				res.Credentials[i].Served++
				served = true
				break
			}
			ob := pool.Observation{Scope: scope, Status: 429}
			if pol.Oracle {
				ob.RetryAfter, ob.HasRetryAfter = pr.ResetAt().Sub(now).Seconds(), true
			}
			p.Record(c.Name, ob)
			d, _ := p.NextRelease(scope, []string{c.Name})
			pr.Release = now.Add(d)
			if !opt.Failover {
				break
			}
			left = remove(left, c.Name)
		}
		if !served && idling(p, scope, names, provs, now) {
			res.LostToIdle++
		}
	}
	for i, pr := range provs {
		pr.Finish(end)
		res.Wasted += pr.Wasted
		res.Idle += pr.Idle
		res.Credentials[i].Wasted, res.Credentials[i].Idle = pr.Wasted, pr.Idle
		for b, e := range pr.ByRun {
			res.ByRun[b].Add(e)
		}
		for b, e := range pr.ByChange {
			res.ByChange[b].Add(e)
		}
	}
	return res
}

// idling reports whether a credential whose quota has reset at now is
// still held by its cooldown.
func idling(p *pool.Pool, scope pool.Scope, names []string, provs []*quotasim.Provider, now time.Time) bool {
	for i, pr := range provs {
		if r := pr.ResetAt(); !r.IsZero() && !r.After(now) {
			if _, cooling := p.NextRelease(scope, names[i:i+1]); cooling {
				return true
			}
		}
	}
	return false
}

func remove(names []string, name string) []string {
	for i, n := range names {
		if n == name {
			return append(names[:i], names[i+1:]...)
		}
	}
	return names
}

// Cell is one scenario at one rate, every policy's result in the order of
// the policies run.
type Cell struct {
	Scenario string
	Rate     float64
	Results  []Result
}

// RunAll runs every policy against every scenario at every rate, on up to
// workers goroutines (<= 0: one).
func RunAll(scs []Scenario, rates []float64, pols []Policy, opt Options, workers int) []Cell {
	cells := make([]Cell, 0, len(scs)*len(rates))
	type job struct{ cell, pol int }
	var jobs []job
	for _, sc := range scs {
		for _, r := range rates {
			cells = append(cells, Cell{Scenario: sc.Name, Rate: r, Results: make([]Result, len(pols))})
			for pi := range pols {
				jobs = append(jobs, job{len(cells) - 1, pi})
			}
		}
	}
	ch := make(chan job)
	var wg sync.WaitGroup
	for range max(workers, 1) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				c := &cells[j.cell]
				sc := scs[j.cell/len(rates)]
				c.Results[j.pol] = Run(sc, c.Rate, pols[j.pol], opt)
			}
		}()
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
	return cells
}

// Verdict compares the policy at index learnedIdx with fixed (index
// fixedIdx) and the ladder (ladderIdx) in one cell.
type Verdict struct {
	// MarginPP is learned served minus fixed served, in percentage points.
	MarginPP float64
	// WasteRatio is learned wasted over fixed wasted; NaN when fixed
	// wasted nothing (then LearnedWasted says what learned wasted).
	WasteRatio    float64
	LearnedWasted int
	// IdleOK: learned idled less than the ladder, or neither idled.
	IdleOK bool
}

// Judge returns the verdict of cell c.
func Judge(c Cell, fixedIdx, ladderIdx, learnedIdx int) Verdict {
	f, l, lad := c.Results[fixedIdx], c.Results[learnedIdx], c.Results[ladderIdx]
	v := Verdict{MarginPP: l.ServedPct() - f.ServedPct(), LearnedWasted: l.Wasted, WasteRatio: math.NaN()}
	if f.Wasted > 0 {
		v.WasteRatio = float64(l.Wasted) / float64(f.Wasted)
	}
	v.IdleOK = l.Idle < lad.Idle || l.Idle == 0 && lad.Idle == 0
	return v
}

// Summary is the last line's figures over cells: the least margin and the
// largest waste ratio (over the cells where fixed wasted anything) of the
// policy at learnedIdx.
func Summary(cells []Cell, fixedIdx, ladderIdx, learnedIdx int) (minMargin, maxRatio float64) {
	minMargin, maxRatio = math.Inf(1), 0
	for _, c := range cells {
		v := Judge(c, fixedIdx, ladderIdx, learnedIdx)
		minMargin = min(minMargin, v.MarginPP)
		if !math.IsNaN(v.WasteRatio) {
			maxRatio = max(maxRatio, v.WasteRatio)
		}
	}
	return minMargin, maxRatio
}

// WriteTable writes the cells as a markdown table, then one verdict line
// per cell for the policy at learnedIdx (against fixed at fixedIdx and the
// ladder at ladderIdx), then the summary line last:
//
//	learned_min_served_margin_pp=X learned_max_waste_ratio=Y
func WriteTable(w io.Writer, cells []Cell, pols []Policy, fixedIdx, ladderIdx, learnedIdx int) error {
	var b strings.Builder
	b.WriteString("| scenario | traffic | policy | served | wasted 429s | idle credential-s |\n")
	b.WriteString("| --- | ---: | --- | ---: | ---: | ---: |\n")
	for _, c := range cells {
		for pi, r := range c.Results {
			fmt.Fprintf(&b, "| %s | %g req/s | %s | %.1f%% | %d | %.0f |\n",
				c.Scenario, c.Rate, pols[pi].Name, r.ServedPct(), r.Wasted, r.Idle.Seconds())
		}
	}
	fmt.Fprintf(&b, "\n%s against %s and %s, per cell:\n", pols[learnedIdx].Name, pols[fixedIdx].Name, pols[ladderIdx].Name)
	for _, c := range cells {
		v := Judge(c, fixedIdx, ladderIdx, learnedIdx)
		ratio := "n/a (fixed wasted none; learned " + strconv.Itoa(v.LearnedWasted) + ")"
		if !math.IsNaN(v.WasteRatio) {
			ratio = fmt.Sprintf("%.3f", v.WasteRatio)
		}
		fmt.Fprintf(&b, "%-14s %4g req/s  margin %+.2f pp  waste ratio %s  idle below ladder %v\n",
			c.Scenario, c.Rate, v.MarginPP, ratio, v.IdleOK)
	}
	writeSummary(&b, cells, fixedIdx, ladderIdx, learnedIdx)
	_, err := io.WriteString(w, b.String())
	return err
}

// Mean is one row of the seed-mean table: every cell of one scenario at
// one rate over several seeds (random schedules together as one row),
// the policy at learnedIdx against fixed and the ladder.
type Mean struct {
	Scenario string
	Rate     float64
	// Cells counts the cells of the row; Lost those where learned served
	// less than fixed, and LostPP the points lost there in all (<= 0).
	Cells, Lost int
	LostPP      float64
	// MarginPP is the mean margin in points, WorstPP the least.
	MarginPP, WorstPP float64
	// WorstRatio is the largest waste ratio (over the cells where fixed
	// wasted any); Wasteful counts the cells above 0.5.
	WorstRatio float64
	Wasteful   int
	// IdleAbove counts the cells where learned idled more than the ladder.
	IdleAbove int
}

// row is one row of the mean and chance tables: the cells of one
// scenario at one rate, every schedule named "random N" in one row per
// rate, "random schedules".
type row struct {
	scenario string
	rate     float64
	cells    []int // indices into the cells grouped
}

// group groups cells into rows, in first-seen order.
func group(cells []Cell) []row {
	type key struct {
		sc   string
		rate float64
	}
	var rows []row
	at := map[key]int{}
	for ci, c := range cells {
		name := c.Scenario
		if strings.HasPrefix(name, "random ") {
			name = "random schedules"
		}
		k := key{name, c.Rate}
		i, ok := at[k]
		if !ok {
			i = len(rows)
			at[k] = i
			rows = append(rows, row{scenario: name, rate: c.Rate})
		}
		rows[i].cells = append(rows[i].cells, ci)
	}
	return rows
}

// Means groups cells by scenario and rate, in first-seen order; every
// schedule named "random N" joins one row per rate, "random schedules".
func Means(cells []Cell, fixedIdx, ladderIdx, learnedIdx int) []Mean {
	var means []Mean
	for _, g := range group(cells) {
		m := Mean{Scenario: g.scenario, Rate: g.rate, WorstPP: math.Inf(1)}
		for _, ci := range g.cells {
			v := Judge(cells[ci], fixedIdx, ladderIdx, learnedIdx)
			m.Cells++
			m.MarginPP += v.MarginPP
			m.WorstPP = min(m.WorstPP, v.MarginPP)
			if v.MarginPP < 0 {
				m.Lost++
				m.LostPP += v.MarginPP
			}
			if !math.IsNaN(v.WasteRatio) {
				m.WorstRatio = max(m.WorstRatio, v.WasteRatio)
				if v.WasteRatio > 0.5 {
					m.Wasteful++
				}
			}
			if !v.IdleOK {
				m.IdleAbove++
			}
		}
		m.MarginPP /= float64(m.Cells)
		means = append(means, m)
	}
	return means
}

// Chance is one row of the chance table: how far the policy at otherIdx
// moves the served share from the policy at baseIdx over the cells of
// one scenario at one rate, in percentage points. With other a change
// that means nothing to base (Rounded), it is how far a cell's margin
// moves by chance: which credentials happen to cool together.
type Chance struct {
	Scenario string
	Rate     float64
	Cells    int
	// MeanPP is the mean move, SDPP its standard deviation, LargestPP the
	// largest move either way.
	MeanPP, SDPP, LargestPP float64
	// Moved counts the cells moved by half a point or more.
	Moved int
}

// Chances groups cells as Means does.
func Chances(cells []Cell, baseIdx, otherIdx int) []Chance {
	var out []Chance
	for _, g := range group(cells) {
		c := Chance{Scenario: g.scenario, Rate: g.rate, Cells: len(g.cells)}
		var sum, sq float64
		for _, ci := range g.cells {
			d := cells[ci].Results[otherIdx].ServedPct() - cells[ci].Results[baseIdx].ServedPct()
			sum += d
			sq += d * d
			c.LargestPP = max(c.LargestPP, math.Abs(d))
			if math.Abs(d) >= 0.5 {
				c.Moved++
			}
		}
		n := float64(c.Cells)
		c.MeanPP = sum / n
		c.SDPP = math.Sqrt(max(sq/n-c.MeanPP*c.MeanPP, 0))
		out = append(out, c)
	}
	return out
}

// WriteChance writes the chance table of cells (Chances) for the policy
// at otherIdx against the one at baseIdx.
func WriteChance(w io.Writer, cells []Cell, pols []Policy, baseIdx, otherIdx int) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Chance: %s against %s, per scenario and rate, in points of served share:\n\n", pols[otherIdx].Name, pols[baseIdx].Name)
	b.WriteString("| scenario | traffic | cells | mean move | standard deviation | largest move | cells moved 0.5 or more |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, c := range Chances(cells, baseIdx, otherIdx) {
		fmt.Fprintf(&b, "| %s | %g req/s | %d | %+.3f | %.3f | %.2f | %d |\n", c.Scenario, c.Rate, c.Cells, c.MeanPP, c.SDPP, c.LargestPP, c.Moved)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteRuns writes, for the policies at idxs, what their episodes cost
// by run over every cell: a credential's episodes grouped by how many
// episodes in a row before each had met the same reset (0: its first, or
// the first after the reset changed), with their idle time and wasted
// refusals per ended episode; then the episodes of run 0 after a change
// by how the reset changed. It shows what a policy pays while it learns
// a reset and once it has, and which changes cost it most.
func WriteRuns(w io.Writer, cells []Cell, pols []Policy, idxs ...int) error {
	var b strings.Builder
	b.WriteString("Episodes by run (how many episodes in a row before each met the same reset at its credential; 0: its first, or the first after the reset changed), over every cell:\n\n")
	writeEpisodes(&b, "run", quotasim.Runs, func(run int) string {
		if run == quotasim.Runs-1 {
			return strconv.Itoa(run) + " or more"
		}
		return strconv.Itoa(run)
	}, func(r Result, run int) quotasim.Episodes { return r.ByRun[run] }, cells, pols, idxs)
	b.WriteString("Episodes of run 0 after the reset changed (not a credential's first), by the change from the reset before:\n\n")
	writeEpisodes(&b, "change", quotasim.Changes, func(c int) string { return quotasim.ChangeNames[c] },
		func(r Result, c int) quotasim.Episodes { return r.ByChange[c] }, cells, pols, idxs)
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteLost writes, for each policy, the requests it did not serve over
// every cell, those lost to idle time (Result.LostToIdle), and how many
// requests an idle credential-hour cost: idle time costs requests only
// while no other credential can answer them, so two policies' idle
// times alone do not rank them.
func WriteLost(w io.Writer, cells []Cell, pols []Policy) error {
	var b strings.Builder
	b.WriteString("Requests not served, over every cell: those that came while a credential whose quota had reset was still cooling (lost to idle time), and what an idle credential-hour cost:\n\n")
	b.WriteString("| policy | not served | lost to idle time | idle credential-hours | requests lost per idle credential-hour |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: |\n")
	for i, pol := range pols {
		var arrivals, served, lost int
		var idle time.Duration
		for _, c := range cells {
			r := c.Results[i]
			arrivals, served, lost, idle = arrivals+r.Arrivals, served+r.Served, lost+r.LostToIdle, idle+r.Idle
		}
		pct := func(n int) float64 { return 100 * float64(n) / float64(max(arrivals, 1)) }
		perHour := "-"
		if idle > 0 {
			perHour = fmt.Sprintf("%.1f", float64(lost)/idle.Hours())
		}
		fmt.Fprintf(&b, "| %s | %.2f%% | %.2f%% | %.1f | %s |\n", pol.Name, pct(arrivals-served), pct(lost), idle.Hours(), perHour)
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteCredentials writes, for each policy and credential, over every
// cell, the requests the credential served, its wasted refusals and its
// idle time. The pool tries the credentials in configured order, so
// key-0 serves whenever it is available and key-2 only while both others
// are spent or cooling: a second of key-0's idle and one of key-2's do
// not cost alike, and a policy's totals can hide a credential it serves
// worse than fixed 60 s does.
func WriteCredentials(w io.Writer, cells []Cell, pols []Policy) error {
	var b strings.Builder
	b.WriteString("Per credential, over every cell (tried in configured order: key-0 first): requests served, wasted 429s and idle time:\n\n")
	b.WriteString("| policy | credential | served | wasted 429s | idle credential-s |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: |\n")
	for i, pol := range pols {
		var sum [Credentials]Usage
		for _, c := range cells {
			for k, u := range c.Results[i].Credentials {
				sum[k].Add(u)
			}
		}
		for k, u := range sum {
			fmt.Fprintf(&b, "| %s | key-%d | %d | %d | %.0f |\n", pol.Name, k, u.Served, u.Wasted, u.Idle.Seconds())
		}
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// writeEpisodes writes a table of n rows, named by name, of the episodes
// row picks from each cell's result of the policies at idxs.
func writeEpisodes(b *strings.Builder, head string, n int, name func(int) string, row func(Result, int) quotasim.Episodes, cells []Cell, pols []Policy, idxs []int) {
	fmt.Fprintf(b, "| %s |", head)
	for _, i := range idxs {
		fmt.Fprintf(b, " %s: episodes | idle s per episode | wasted per episode |", pols[i].Name)
	}
	b.WriteString("\n| ---: |" + strings.Repeat(" ---: | ---: | ---: |", len(idxs)) + "\n")
	for k := range n {
		fmt.Fprintf(b, "| %s |", name(k))
		for _, i := range idxs {
			var e quotasim.Episodes
			for _, c := range cells {
				e.Add(row(c.Results[i], k))
			}
			d := float64(max(e.Ended, 1))
			fmt.Fprintf(b, " %d | %.1f | %.2f |", e.Ended, e.Idle.Seconds()/d, float64(e.Wasted)/d)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n")
}

// Rounded returns pol with every cooldown its learner answers rounded up
// to a multiple of q: at most q more per cooldown, a change that means
// nothing to the policy, so the cells it moves show how far a margin
// moves by chance (rotor-sim -chance). A policy without a learner, or q
// <= 0, is returned as it is.
func Rounded(pol Policy, q time.Duration) Policy {
	if pol.Learner == nil || q <= 0 {
		return pol
	}
	inner := pol.Learner
	pol.Name = fmt.Sprintf("%s, rests rounded up to %v", pol.Name, q)
	pol.Learner = func(clk clock.Clock) pool.Learner {
		l := inner(clk)
		if s, ok := l.(pool.SiblingLearner); ok {
			return roundedSiblings{rounded{s, q}, s}
		}
		return rounded{l, q}
	}
	return pol
}

func roundUp(d time.Duration, ok bool, q time.Duration) (time.Duration, bool) {
	if ok && d > 0 {
		d = (d + q - 1) / q * q
	}
	return d, ok
}

type rounded struct {
	pool.Learner
	q time.Duration
}

func (r rounded) Suggest(ev pool.LearnEvent) (time.Duration, bool) {
	d, ok := r.Learner.Suggest(ev)
	return roundUp(d, ok, r.q)
}

// roundedSiblings keeps pool.SiblingLearner, so that the rounded run is
// the run the table measures, a sibling's release included.
type roundedSiblings struct {
	rounded
	sib pool.SiblingLearner
}

func (r roundedSiblings) Fell(ev pool.LearnEvent) bool { return r.sib.Fell(ev) }

func (r roundedSiblings) Release(ev pool.LearnEvent) (time.Duration, bool) {
	d, ok := r.sib.Release(ev)
	return roundUp(d, ok, r.q)
}

// WriteMeans writes the seed-mean table of cells (Means), a totals line,
// then the summary line last, as WriteTable does.
func WriteMeans(w io.Writer, cells []Cell, pols []Policy, fixedIdx, ladderIdx, learnedIdx int) error {
	var b strings.Builder
	writeMeans(&b, cells, pols, fixedIdx, ladderIdx, learnedIdx)
	writeSummary(&b, cells, fixedIdx, ladderIdx, learnedIdx)
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteMeansTable is WriteMeans without the summary line, for a policy
// shown beside the one the table judges (rotor-sim -oracle).
func WriteMeansTable(w io.Writer, cells []Cell, pols []Policy, fixedIdx, ladderIdx, idx int) error {
	var b strings.Builder
	writeMeans(&b, cells, pols, fixedIdx, ladderIdx, idx)
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func writeMeans(b *strings.Builder, cells []Cell, pols []Policy, fixedIdx, ladderIdx, learnedIdx int) {
	fmt.Fprintf(b, "%s against %s and %s, per scenario and rate over every seed:\n\n", pols[learnedIdx].Name, pols[fixedIdx].Name, pols[ladderIdx].Name)
	b.WriteString("| scenario | traffic | cells | mean margin | worst margin | cells lost | points lost | worst waste ratio | cells over 0.5 | idle above ladder |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	var all Mean
	for _, m := range Means(cells, fixedIdx, ladderIdx, learnedIdx) {
		fmt.Fprintf(b, "| %s | %g req/s | %d | %+.3f | %+.2f | %d | %.2f | %.3f | %d | %d |\n",
			m.Scenario, m.Rate, m.Cells, m.MarginPP, m.WorstPP, m.Lost, m.LostPP, m.WorstRatio, m.Wasteful, m.IdleAbove)
		all.Cells += m.Cells
		all.MarginPP += m.MarginPP * float64(m.Cells)
		all.Lost += m.Lost
		all.LostPP += m.LostPP
		all.Wasteful += m.Wasteful
		all.IdleAbove += m.IdleAbove
	}
	if all.Cells > 0 {
		all.MarginPP /= float64(all.Cells)
	}
	fmt.Fprintf(b, "\nall %d cells: mean margin %+.3f pp, %d lost (%.2f pp in all), %d over half of fixed's waste, %d idle above the ladder\n",
		all.Cells, all.MarginPP, all.Lost, all.LostPP, all.Wasteful, all.IdleAbove)
}

// writeSummary writes the last line of both tables.
func writeSummary(b *strings.Builder, cells []Cell, fixedIdx, ladderIdx, learnedIdx int) {
	m, r := Summary(cells, fixedIdx, ladderIdx, learnedIdx)
	fmt.Fprintf(b, "learned_min_served_margin_pp=%.2f learned_max_waste_ratio=%.3f\n", m, r)
}

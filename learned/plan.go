package learned

import (
	"math"
	"slices"
)

// The planner of learned_cooldown.adapt (adapt.go): the episode's reset R
// as a mixture of uniform pieces, and its retries chosen by dynamic
// programming over candidate waits.
const (
	// planHazard is the prior count of changes in the hazard p that R
	// differs from the newest agreeing evidence: p = (breaks +
	// planHazard) / (intervals + 1), or the recent share of episodes
	// that missed their evidence (state.miss) if that is more.
	planHazard = 0.5
	// planNovel is the prior count of never-seen resets in q, the share
	// of a change that is broad rather than like older evidence.
	planNovel = 0.5
	// planBroadMin is the least weight of the broad base, so that a
	// reset far below a wait held for long is still looked for.
	planBroadMin = 0.03
	// planRound is the share of the newest evidence's weight at or below
	// its roundest wait (a reset of whole minutes or seconds is common).
	planRound = 0.6
	// planHull is the share of the older evidence's weight on its own
	// intervals; the rest is spread evenly over their hull.
	planHull = 0.5
	// planNear is the weight of a reset that moved a little: log-uniform
	// within a factor planSpan of the held wait.
	planNear = 0.2
	planSpan = 1.6
	// planResolve is the refusals a plan may expect while the newest
	// evidence is wider than its resolution.
	planResolve = 0.75
	// planRatio is the step of the broad base's pieces.
	planRatio = 1.2
)

// piece is R spread evenly over (lo, hi] with weight w.
type piece struct {
	lo, hi int64
	w      float64
}

// belief returns the pieces of the episode's R, the held wait, and how
// many of the pieces are evidence (the rest are the near and broad
// parts).
func (s *state) belief(existing int64) ([]piece, int64, int) {
	a, b := s.common()
	r := roundest(a+1, b)
	anew := s.drawnAnew()
	p := (float64(s.breaks()) + planHazard) / (float64(s.rn) + 1)
	p = min(max(p, 0.02, float64(s.miss)/256, anew), 0.9)
	ps := make([]piece, 0, 96)
	if r < b {
		ps = append(ps, piece{a, r, (1 - p) * planRound}, piece{r, b, (1 - p) * (1 - planRound)})
	} else {
		ps = append(ps, piece{a, b, 1 - p})
	}
	// q: how often an interval lay outside all older ones (a reset never
	// seen before).
	novel, count, farBelow := 0, 0, 0
	for i := 0; i+1 < int(s.rn); i++ {
		x := s.at(i)
		count++
		hl, hh := int64(math.MaxInt64), int64(0)
		for j := i + 1; j < int(s.rn); j++ {
			y := s.at(j)
			hl, hh = min(hl, y.lo), max(hh, y.hi)
		}
		if x.hi <= hl || x.lo >= hh {
			novel++
		}
		if float64(x.hi)*planSpan <= float64(hl) {
			farBelow++
		}
	}
	q := (float64(novel) + planNovel) / (float64(count) + 1)
	// A change like older evidence: on its intervals, newer ones weighing
	// more, and evenly over their hull. The hull reaches down to no
	// interval's lower half: a first retry that recovered proves R <= its
	// wait, not that R may be near 0 (the broad base looks there).
	var sum float64
	for i, wt := 0, 1.0; i < int(s.rn); i, wt = i+1, wt*adaptDecay {
		sum += wt
	}
	top := s.top()
	hl, hh := int64(math.MaxInt64), int64(0)
	for i, wt := 0, 1.0; i < int(s.rn); i, wt = i+1, wt*adaptDecay {
		x := s.at(i)
		hl, hh = min(hl, max(x.lo, x.hi/2)), max(hh, x.hi)
		ps = append(ps, piece{x.lo, x.hi, p * (1 - q) * planHull * wt / sum})
	}
	ps = append(ps, piece{hl, hh, p * (1 - q) * (1 - planHull)})
	nev := len(ps)
	// A reset that moved a little.
	ps = logUniform(ps, max(int64(float64(r)/planSpan), minBoundMS), min(int64(float64(r)*planSpan), maxBoundMS), 1.1, planNear, false)
	// A reset never seen: from an eighth of the existing cooldown to 16
	// of them or four times the longest evidence, in pieces that end on
	// round waits.
	nb := len(ps)
	ps = logUniform(ps, max(minBoundMS, existing/8), min(max(16*existing, 4*top), maxBoundMS), planRatio, max(p*q, planBroadMin), true)
	if anew >= floorAnew {
		s.fallShare(ps[nb:], (float64(farBelow)+planNovel)/(float64(novel)+planNovel))
	}
	if s.aflags&flagLead != 0 && a > existing {
		// A round's lead looks for a fall (leads).
		ps = append(ps, leadPiece(existing, a))
	}
	return ps, hold(a, r, existing), nev
}

// drawnAnew estimates how often R is drawn anew, unrelated to the last
// episode's: the mean gap between neighbouring intervals over the mean
// gap between any two, from four intervals on (0 while no two are
// apart). One drawn anew every episode puts neighbours as far apart as
// any two (about 1, at times more; belief caps p at 0.9), and the newest
// evidence then says no more than the older. A reset that drifts keeps
// neighbours closer than intervals further apart (well below 1), and one
// that changed once leaves a single neighbouring gap (0.57 when the
// newest of eight changed, less as the change ages). Censored evidence
// hides most changes of a reset drawn anew from breaks and the miss
// share: a recovery at the first retry agrees with everything below it.
func (s *state) drawnAnew() float64 {
	n := int(s.rn)
	if n < 4 {
		return 0
	}
	var near, all float64
	for i := range n {
		for j := i + 1; j < n; j++ {
			x, y := s.at(i), s.at(j)
			g := float64(max(0, max(x.lo, y.lo)-min(x.hi, y.hi)))
			all += g
			if j == i+1 {
				near += g
			}
		}
	}
	if all == 0 {
		return 0 // every two overlap or only touch
	}
	return (near / float64(n-1)) / (all / float64(n*(n-1)/2))
}

// held returns the wait adapt holds on its evidence (hold).
func (s *state) held(existing int64) int64 {
	a, b := s.common()
	return hold(a, roundest(a+1, b), existing)
}

// hold returns the wait adapt holds when the newest agreeing evidence
// leaves (a, b] open and r is its roundest wait: r, but no longer than the
// existing cooldown unless a refusal proved R longer than it (a >=
// existing).
func hold(a, r, existing int64) int64 {
	if a < existing {
		return min(r, existing)
	}
	return r
}

// logUniform appends weight w spread log-uniformly over (lo, hi], in
// pieces growing by ratio. With round, each piece ends at the roundest
// wait in the second half of its step: a retry beyond all evidence is
// planned at a piece's end, and a provider's reset is often whole
// minutes, so an end a hair below one (596.5 s in a 600 s spell) is
// refused and holds the credential a whole step past the reset.
func logUniform(ps []piece, lo, hi int64, ratio, w float64, round bool) []piece {
	if hi <= lo {
		return ps
	}
	l := math.Log(float64(hi) / float64(lo))
	for x := lo; x < hi; {
		y := min(int64(float64(x)*ratio)+1, hi)
		if round && y < hi {
			y = roundest(int64(float64(x)*(1+ratio)/2)+1, y)
		}
		ps = append(ps, piece{x, y, w * math.Log(float64(y)/float64(x)) / l})
		x = y
	}
	return ps
}

// trialGap returns how far below a held wait h no longer than the
// existing cooldown a retry must be, unless it is h: a natural request
// may come late, and one refused in the held wait's last second holds
// the credential past it (a cooldown is at least 1 s), where fixed's
// retry at h would have found the reset. Held at the existing cooldown,
// a reset in the gap costs no more than it costs fixed.
func trialGap(h, existing int64) int64 {
	if h > existing {
		return 0
	}
	return max(h/8, 4*resolvedMS)
}

// planGrid returns the candidate retries after e: the held wait, every
// piece's end, and two points inside each wide piece of weight, none of
// them less than trialGap below the held wait.
func planGrid(ps []piece, e, h, gap int64) []int64 {
	g := make([]int64, 0, 3*len(ps)+1)
	g = append(g, h)
	for _, p := range ps {
		g = append(g, p.hi)
		if d := p.hi - p.lo; d > resolution(p.hi) && p.w > 0.05 {
			g = append(g, roundest(p.lo+d/4, p.lo+d/2), roundest(p.lo+d/2, p.hi-d/4))
		}
	}
	g = slices.DeleteFunc(g, func(t int64) bool { return t <= e || t < h && t > h-gap })
	slices.Sort(g)
	return slices.Compact(g)
}

// plan is a belief tabulated at a start e and the candidate retries
// after it: f and m at point i (0: e, i: g[i-1]) are the weight of
// R <= point and the weighted sum of those R, total the whole weight.
type plan struct {
	e       int64
	g       []int64
	x, f, m []float64 // x: point i in ms
	total   float64
}

func newPlan(ps []piece, g []int64, e int64) plan {
	n := len(g) + 1
	pl := plan{e: e, g: g, x: make([]float64, n), f: make([]float64, n), m: make([]float64, n)}
	for _, p := range ps {
		pl.total += p.w
	}
	for i := range pl.f {
		t := e
		if i > 0 {
			t = g[i-1]
		}
		pl.x[i] = float64(t)
		for _, p := range ps {
			if t <= p.lo || p.w == 0 {
				continue
			}
			u, d := min(t, p.hi), float64(p.hi-p.lo)
			pl.f[i] += p.w * float64(u-p.lo) / d
			pl.m[i] += p.w * (float64(u)*float64(u) - float64(p.lo)*float64(p.lo)) / (2 * d)
		}
	}
	return pl
}

// first returns the first retry of the plan that minimises the expected
// idle time plus lambda per refusal given R > e, and the refusals the
// plan expects; t = e when no weight lies beyond e.
func (pl plan) first(lambda float64) (t int64, refusals float64) {
	n := len(pl.g)
	above := pl.total - pl.f[0]
	if n == 0 || above <= 1e-9 {
		return pl.e, 0
	}
	// cost[j]: the least expected cost after a refusal at point j,
	// weighted by the chance of R > point j; next[j] its next retry.
	cost := make([]float64, n+1)
	next := make([]int, n+1)
	for j := n; j >= 0; j-- {
		cost[j], next[j] = 0, -1
		if pl.total-pl.f[j] <= 1e-12 {
			continue
		}
		best := math.Inf(1)
		for k := j + 1; k <= n; k++ {
			c := pl.x[k]*(pl.f[k]-pl.f[j]) - (pl.m[k] - pl.m[j]) + lambda*max(pl.total-pl.f[k], 0) + cost[k]
			if c < best {
				best, next[j] = c, k
			}
		}
		if next[j] != -1 {
			cost[j] = best
		}
	}
	k := next[0]
	if k <= 0 {
		return pl.e, 0
	}
	for i := k; i > 0; i = next[i] {
		refusals += max(pl.total-pl.f[i], 0) / above
	}
	return pl.g[k-1], refusals
}

// lambda is the idle time in ms one refusal is worth at lam.
func lambda(lam int) float64 { return 1000 * math.Pow(2, float64(lam)/2) }

// cheapest returns the first retry under the least lam whose plan
// expects at most budget refusals (adaptMaxLam if none does). A dearer
// refusal never plans more of them, so it bisects the lams.
func (pl plan) cheapest(budget float64) (int64, uint8) {
	lo, hi := 0, adaptMaxLam // the answer is in [lo, hi]
	for lo < hi {
		mid := (lo + hi) / 2
		if _, r := pl.first(lambda(mid)); r <= budget {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	t, _ := pl.first(lambda(lo))
	return t, uint8(lo)
}

// planFirst picks the episode's lambda and returns its first retry and
// the held wait.
func (s *state) planFirst(existing int64) (t, h int64) {
	ps, h, nev := s.belief(existing)
	var total, fixed float64
	for _, p := range ps[:nev] {
		total += p.w
		fixed += p.w * fixedWaste(p.hi, existing)
	}
	budget := min(adaptShare*fixed/total, float64(s.credit)/16)
	if a, b := s.common(); b-a > 2*resolvedMS {
		budget = max(budget, planResolve)
	}
	t, s.lam = newPlan(ps, planGrid(ps, 0, h, trialGap(h, existing)), 0).cheapest(budget)
	return t, h
}

// planAfter returns the next retry after a refusal at e, or e when no
// weight lies beyond it.
func (s *state) planAfter(e, existing int64) int64 {
	ps, h, nev := s.belief(existing)
	pl := newPlan(ps, planGrid(ps, e, h, trialGap(h, existing)), e)
	if slices.ContainsFunc(ps[:nev], func(p piece) bool { return p.hi > e && p.w > 1e-9 }) {
		t, _ := pl.first(lambda(int(s.lam)))
		return t
	}
	// Beyond all evidence, lambda anew: the rest of the plan may expect
	// adaptShare of the refusals fixed would still spend given R > e.
	var above, fixed float64
	for _, p := range ps {
		if p.hi <= e {
			continue
		}
		l := max(p.lo, e)
		w := p.w * float64(p.hi-l) / float64(p.hi-p.lo)
		above += w
		fixed += w * float64((l+p.hi)/2-e) / float64(existing)
	}
	if above <= 1e-9 {
		return e
	}
	t, lam := pl.cheapest(adaptShare * fixed / above)
	s.lam = lam
	return t
}

// floorAnew is the drawnAnew from which the broad base's weight below the
// ring's floor is sized by the falls alone (fallShare).
const floorAnew = 0.7

// fallShare scales by f the weight of the broad base's pieces ps that lie
// at or below the ring's floor, its intervals' lowest lower bound (R was
// longer than the floor in every episode the ring holds), where f < 1 is
// the share of the episodes outside the older evidence (novel) that lay
// more than planSpan below it.
//
// Resets drawn anew lie outside the hull of the older ones by a little,
// as draws of one distribution do, so q (the share of novel episodes) is
// high, and the broad base, sized by q, put most of its weight far below
// every reset seen: at 400-800 s, the first two retries came at 70-150 s
// and 210-360 s and were refused nearly every time. A fall below the
// floor is as likely as the falls the ring saw, not as its draws.
func (s *state) fallShare(ps []piece, f float64) {
	if f >= 1 {
		return
	}
	floor := int64(math.MaxInt64)
	for i := range int(s.rn) {
		floor = min(floor, s.at(i).lo)
	}
	for i := range ps {
		if ps[i].hi <= floor {
			ps[i].w *= f
		}
	}
}

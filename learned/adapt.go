package learned

import "math"

// learned_cooldown.adapt (issue 19): in apply mode, a learner that tracks
// a reset that moves. The spec's rules can only raise the lower bound with
// a throttle and never apply a wait below it, so a reset that got shorter
// is never seen, and 12 trial steps for a seven-day state hold a wait
// learned in a slow spell. Adapt departs from the spec where it must, and
// only there.
//
// Each throttle episode that ends in a recovery is interval evidence on
// the provider's hidden reset R (ms after the episode's first throttle):
// R > lo, the longest wait that was refused, and R <= hi, the wait that
// ran out before the recovery when the recovery came promptly after it
// (a wait followed by a prompt recovery is taken as proven), else the
// time of the recovery. The state keeps the intervals of the last
// adaptRing episodes; older evidence falls out, so it ages. From them
// adapt plans each episode's retries, the cooldown after each refusal:
//
//   - Steady: while the newest intervals agree (at most one break between
//     neighbours in the ring), each episode's first retry bisects their
//     common part (a, b] (the existing cooldown first while nothing shows
//     R longer; in proportion when b > 2a; never within adaptLate, or
//     twice the recent delay of natural retries, of b) until it is
//     resolved, and then holds the roundest wait in (a, b] (a multiple of
//     60 s before 30 s, 15 s, ...): a reset of whole seconds, and the
//     existing cooldown where it fits, is matched exactly, not
//     approached. A refused trial sends the next retry at the held wait.
//   - Explore: while a wait holds, each episode earns credit worth
//     adaptWasteShare of the refusals the existing cooldown would spend
//     at it; a whole refusal's worth lets one natural retry go earlier
//     (7/8 or 3/4 of the wait; for a wait over three existing cooldowns
//     the existing cooldown's first retry, then, while credit lasts, 7/8
//     or 3/4), so that a reset that got shorter is seen.
//   - Spread: with two or more breaks (noise, bursts, drift), each
//     interval is taken as R spread evenly over it, recent ones weighing
//     more, and the retry minimises the expected idle time plus lambda per
//     refusal, lambda the least (of doubling values) whose plan expects at
//     most adaptSpreadShare of the refusals the existing cooldown would
//     spend on the same evidence; the plan ends at the shortest wait that
//     covers adaptCover of the evidence.
//   - Growth: a refusal beyond all evidence grows the wait (planNext).
//   - A step budget that renews: an episode whose first retry is a
//     bisection or an exploration takes one trial step, at most 12 per
//     adaptBudgetMS instead of per seven-day state.
//
// Adapt adds no request: a retry is the next natural request, let through
// earlier or later. Every other bound stays: trusted advice is a hard
// minimum, the model cooldown cap bounds every wait, and the state is one
// record under the same identity, capacity and expiry (version 3, with
// the adapt evidence; version 1 while there is none).
//
// learned/sim measures it against fixed 60 s, a ladder and the spec
// (README, Cooldowns).
const (
	// adaptRing is how many episodes' intervals the state keeps.
	adaptRing = 8
	// adaptBudgetMS is the period over which MaxTrialSteps trial steps
	// are allowed; the budget renews after it.
	adaptBudgetMS = 60 * 60_000
	// adaptWasteShare is the share of the existing cooldown's refusals
	// that explorations may spend.
	adaptWasteShare = 0.4
	// adaptSpreadShare is the share of the existing cooldown's refusals
	// a spread plan may expect to spend.
	adaptSpreadShare = 0.4
	// adaptCover is the weight share of the evidence a spread plan's
	// last retry covers.
	adaptCover = 0.85
	// adaptDecay is the weight of an interval relative to the next newer
	// one.
	adaptDecay = 0.7
	// adaptCreditCap bounds the exploration credit, in sixteenths of a
	// refusal.
	adaptCreditCap = 32
	// adaptLate is how long before the held wait a bisection retry
	// goes at the latest, or twice the recent delay of natural retries
	// (late): a natural retry comes late when other credentials take the
	// traffic, and a refusal then leaves room for the 1 s cooldown.
	adaptLate = 3_000
	// adaptLong: a held wait longer than this many existing cooldowns
	// first retries after the existing cooldown.
	adaptLong = 6
	// adaptSteady is how many agreeing episodes make a reset steady:
	// a refusal then means it moved, and the wait grows fast.
	adaptSteady = 4
	// adaptMaxLam bounds lam: lambda = 500 ms << lam.
	adaptMaxLam = 14
)

// span is one episode's evidence: lo < R <= hi, in ms after its first
// throttle.
type span struct{ lo, hi int64 }

// Adapt flags, in state.aflags.
const (
	// flagTrial: the open episode's first retry was a trial step below
	// the held wait.
	flagTrial uint8 = 1 << iota
	// flagSpread: the open episode follows a spread plan.
	flagSpread
	// flagLong: the open episode's first retry was the existing
	// cooldown's, before a long held wait.
	flagLong
)

const allFlags = flagTrial | flagSpread | flagLong

func (s *state) hasAdapt() bool {
	return s.rn != 0 || s.rhead != 0 || s.elo != 0 || s.fails != 0 || s.aflags != 0 || s.lam != 0 || s.late != 0 ||
		s.credit != 0 || s.explores != 0 || s.budgetAt != 0 || s.ring != [adaptRing]span{}
}

// adaptValid checks the adapt invariants observe keeps.
func (s *state) adaptValid() bool {
	if s.rn > adaptRing || s.rhead >= adaptRing || s.elo < 0 || s.elo >= maxBoundMS ||
		s.aflags&^allFlags != 0 || s.lam > adaptMaxLam || s.credit > adaptCreditCap {
		return false
	}
	for i := range adaptRing {
		sp := s.ring[(int(s.rhead)+adaptRing-1-i)%adaptRing]
		if i < int(s.rn) && (sp.lo < 0 || sp.lo >= sp.hi || sp.hi > maxBoundMS) ||
			i >= int(s.rn) && sp != (span{}) {
			return false
		}
	}
	return true
}

// at returns the i-th newest interval.
func (s *state) at(i int) span { return s.ring[(int(s.rhead)+adaptRing-1-i)%adaptRing] }

func (s *state) push(sp span) {
	if s.rn > 0 && s.breaks() == 0 {
		// While the evidence agrees, an episode keeps what it did not
		// test: a bound ages only when a retry contradicts it.
		if p := s.at(0); max(p.lo, sp.lo) < min(p.hi, sp.hi) {
			sp.lo, sp.hi = max(p.lo, sp.lo), min(p.hi, sp.hi)
		}
	}
	s.ring[s.rhead] = sp
	s.rhead = (s.rhead + 1) % adaptRing
	s.rn = min(s.rn+1, adaptRing)
}

func (s *state) endEpisode() { s.elo, s.fails, s.aflags, s.lam = 0, 0, 0, 0 }

// adaptObserve updates the adapt evidence after st.observe applied o with
// effect eff; before is the state it started from.
func (s *state) adaptObserve(before *state, o observation, eff effect) {
	switch {
	case eff == effNone:
	case eff == effAnomaly || eff == effAnchor || eff == effEnded:
		s.endEpisode()
	case o.throttle:
		// A refused retry: R is longer than this wait.
		s.noteLate(o.at - before.until)
		s.elo = min(max(s.elo, o.at-s.anchor), maxBoundMS-1)
		if s.aflags&(flagTrial|flagLong) == 0 && s.fails < 255 {
			s.fails++
		}
	case before.anchor != 0:
		// A recovery: R is at most the wait that ran out before it.
		s.noteLate(o.at - before.until)
		e := o.at - before.anchor
		if w := before.until - before.anchor; w > s.elo && w < e && e-w <= max(resolvedMS, w/16) {
			e = w // a prompt recovery: the wait is taken as proven
		}
		if e > s.elo && e <= maxBoundMS {
			s.push(span{s.elo, e})
		}
		s.endEpisode()
	}
}

// noteLate records how long after its cooldown ran out a natural retry
// came: late follows the latest such delays, in seconds, decaying by a
// quarter each time.
func (s *state) noteLate(ms int64) {
	l := uint8(min(max(ms, 0)/1000, 255))
	s.late = max(l, s.late-s.late/4)
}

// run returns the common part (a, b] of the intervals from the i-th newest
// on, as far back as they agree, and how many agree.
func (s *state) run(i int) (a, b int64, k int) {
	sp := s.at(i)
	a, b, k = sp.lo, sp.hi, 1
	for j := i + 1; j < int(s.rn); j++ {
		n := s.at(j)
		na, nb := max(a, n.lo), min(b, n.hi)
		if na >= nb {
			break
		}
		a, b, k = na, nb, k+1
	}
	return a, b, k
}

// breaks counts neighbouring intervals in the ring that do not overlap.
func (s *state) breaks() int {
	n := 0
	for i := 1; i < int(s.rn); i++ {
		p, q := s.at(i-1), s.at(i)
		if max(p.lo, q.lo) >= min(p.hi, q.hi) {
			n++
		}
	}
	return n
}

// adaptTarget returns the wait after the episode's first throttle that
// adapt applies for the counted throttle o, or ok=false to use the
// existing cooldown; it records the episode's plan and steps in s.
func (s *state) adaptTarget(o observation) (target int64, trial, ok bool) {
	if s.rn == 0 {
		return 0, false, false // nothing proven yet: the existing cooldown's rhythm
	}
	if o.at != s.anchor {
		return s.planNext(o.at-s.anchor, o.existing), false, true
	}
	if o.at-s.budgetAt >= adaptBudgetMS {
		s.steps, s.budgetAt = 0, o.at
	}
	s.aflags, s.lam = 0, 0
	if s.breaks() >= 2 {
		_, lam := s.spread(0, o.existing, -1)
		s.aflags, s.lam = flagSpread, uint8(lam)
	}
	h := s.hold(0, o.existing)
	s.credit = uint8(min(int(s.credit)+credit(h, o.existing), adaptCreditCap))
	if h > adaptLong*o.existing && s.credit >= 16 && s.steps < MaxTrialSteps {
		// A long wait: first the retry the existing cooldown would
		// allow, so that the end of a long spell is seen at once; a
		// refusal goes on with the plan.
		s.credit -= 16
		s.explores++
		s.aflags |= flagLong
		return s.trial(o.existing)
	}
	if t, trial := s.plan(0, o.existing); trial {
		return s.trial(t)
	}
	if s.aflags&flagSpread == 0 && s.credit >= 16 && s.steps < MaxTrialSteps {
		// Explore: a natural retry before the held wait, so that a reset
		// that got shorter is seen. A wait of several existing cooldowns
		// tries the existing cooldown's first retry, and after its
		// refusal, while credit lasts, 7/8 or 3/4 of the wait; a shorter
		// one 7/8 or 3/4 of it.
		s.credit -= 16
		s.explores++
		if h > 3*o.existing {
			s.aflags |= flagLong
			return s.trial(o.existing)
		}
		return s.trial(s.explorePoint(h))
	}
	return h, false, true
}

// explorePoint is an exploration's retry before the held wait h, in turn
// 7/8 and 3/4 of it.
func (s *state) explorePoint(h int64) int64 {
	if s.explores%4 == 2 {
		return roundest(h-h/4-h/16, h-h/4)
	}
	return roundest(h-h/8-h/16, h-h/8)
}

// hold is the wait the evidence supports once R > e is known: the
// roundest wait of what the agreeing intervals leave open (a reset of
// whole seconds is then held exactly), or the spread plan's.
func (s *state) hold(e, existing int64) int64 {
	if s.aflags&flagSpread != 0 {
		t, _ := s.spread(e, existing, int(s.lam))
		return t
	}
	a, b, _ := s.run(0)
	if b <= e {
		return e
	}
	return roundest(max(a, e)+1, b)
}

// plan returns the next retry after e by the episode's plan: a bisection
// of what the agreeing intervals leave open (trial), or the held wait.
func (s *state) plan(e, existing int64) (int64, bool) {
	h := s.hold(e, existing)
	if s.aflags&flagSpread != 0 || s.steps >= MaxTrialSteps {
		return h, false
	}
	a, b, _ := s.run(0)
	a = max(a, e)
	w := b - a
	if w <= resolution(b) {
		return h, false
	}
	// Bisect; the existing cooldown first, while nothing shows the reset
	// longer.
	if a < existing && existing < b {
		return existing, true
	}
	x, y := a+w/4, min(b-w/4, b-max(adaptLate, 2*int64(s.late)*1000))
	if a > 0 && b > 2*a {
		// A wide interval: bisect in proportion (the geometric mean).
		g := int64(math.Sqrt(float64(a) * float64(b)))
		x, y = g-(g-a)/4, min(g, y)
	}
	if x <= y {
		return roundest(x, y), true
	}
	return h, false
}

// trial records a trial step at t.
func (s *state) trial(t int64) (int64, bool, bool) {
	s.steps++
	s.aflags |= flagTrial
	return t, true, true
}

// planNext returns the wait after a refused retry at e.
func (s *state) planNext(e, existing int64) int64 {
	switch {
	case s.aflags&flagLong != 0:
		// The existing cooldown's retry before a long wait was refused:
		// while credit lasts, 7/8 or 3/4 of the wait (the credit alone
		// paces it, so a reset that fell part of the way is seen in the
		// next episode); else on with the plan.
		h := s.hold(e, existing)
		if s.credit >= 16 && s.aflags&flagSpread == 0 {
			if t := s.explorePoint(h); t > e && t < h {
				s.credit -= 16
				s.aflags = s.aflags&^flagLong | flagTrial
				return t
			}
		}
		s.aflags &^= flagLong | flagTrial
		if t, trial := s.plan(e, existing); t > e {
			if trial {
				s.aflags |= flagTrial
			}
			return t
		}
	case s.aflags&flagTrial != 0:
		// A trial was refused: back to the held wait.
		s.aflags &^= flagTrial
		if t := s.hold(e, existing); t > e {
			return t
		}
	}
	if s.aflags&flagSpread == 0 {
		s.lam = 6
	}
	if t, _ := s.spread(e, existing, int(s.lam)); t > e {
		return t
	}
	// Growth beyond all evidence. In a spread plan (whose last retry
	// leaves some evidence out) or while few episodes agree: an eighth, a
	// half, then double the wait, the roundest wait in the second half of
	// each step. When adaptSteady agreeing episodes were refused (the
	// reset moved): an eighth, then triple, then double the wait, the
	// roundest in the last eighth of each step.
	grow := max(e>>3, 2*resolvedMS)
	if _, _, k := s.run(0); s.aflags&flagSpread != 0 || k < adaptSteady {
		switch {
		case s.fails > 2:
			grow = e
		case s.fails > 1:
			grow = e / 2
		}
		return roundest(e+grow/2, e+grow)
	}
	switch {
	case s.fails > 2:
		grow = e
	case s.fails > 1:
		grow = 2 * e
	}
	return roundest(e+grow-grow/8, e+grow)
}

// resolution is the interval width below which bisection stops.
func resolution(b int64) int64 { return max(8*resolvedMS, b/32) }

// fixedWaste is how many refusals the existing cooldown spends before a
// reset of r.
func fixedWaste(r, existing int64) float64 {
	if existing <= 0 || r <= existing {
		return 0
	}
	return float64((r - 1) / existing)
}

// credit is the exploration credit one episode earns while b is held, in
// sixteenths of a refusal.
func credit(b, existing int64) int {
	return int(16 * adaptWasteShare * fixedWaste(b, existing))
}

// roundUnits are the units roundest prefers, coarsest first.
var roundUnits = [...]int64{600_000, 300_000, 60_000, 30_000, 15_000, 10_000, 5_000, 1_000, 100, 10, 1}

// roundest returns the multiple of the coarsest unit in [x, y] (x <= y).
func roundest(x, y int64) int64 {
	x = max(x, 1)
	for _, u := range roundUnits {
		if m := (x + u - 1) / u * u; m <= y {
			return m
		}
	}
	return x
}

// spread plans the next retry after e (0: the episode's first) from the
// ring, each interval with R > e taken as R spread evenly over it: the
// retry point t minimising the expected idle time plus lambda per refusal
// (500 ms << lam). With lam < 0 it picks the least lambda whose first
// retry spends at most adaptWasteShare of the existing cooldown's
// refusals. It returns t <= e when no interval reaches beyond e.
func (s *state) spread(e, existing int64, lam int) (int64, int) {
	type wspan struct {
		l, h int64
		w    float64
	}
	var sp [adaptRing]wspan
	n, wt, sum, top := 0, 1.0, 0.0, int64(0)
	var fixed float64
	for i := range int(s.rn) {
		x := s.at(i)
		if x.hi > e {
			sp[n] = wspan{max(x.lo, e), x.hi, wt}
			sum += wt
			fixed += wt * fixedWaste((sp[n].l+sp[n].h)/2, existing)
			top = max(top, x.hi)
			n++
		}
		wt *= adaptDecay
	}
	if n == 0 {
		return e, lam
	}
	// The plan ends at the shortest wait that covers most of the
	// evidence, not at an old outlier: past it, growth.
	for _, x := range sp[:n] {
		if x.h >= top {
			continue
		}
		var below float64
		for _, y := range sp[:n] {
			if y.h <= x.h {
				below += y.w
			}
		}
		if below >= adaptCover*sum {
			top = x.h
		}
	}
	for i := range sp[:n] {
		sp[i].h = min(sp[i].h, top)
		sp[i].l = min(sp[i].l, top-1)
	}
	var cand [2 * adaptRing]int64
	nc := 0
	for _, x := range sp[:n] {
		cand[nc] = x.h
		nc++
		if d := x.h - x.l; d > resolution(x.h) {
			cand[nc] = roundest(x.l+d/4, x.h-d/4)
			nc++
		}
	}
	eval := func(t int64, lambda float64) (cost, waste float64) {
		for _, x := range sp[:n] {
			p := 1.0
			switch {
			case t <= x.l:
				p = 0
			case t < x.h:
				p = float64(t-x.l) / float64(x.h-x.l)
			}
			idleOK := float64(t) - float64(x.l+min(t, x.h))/2
			idleNo := float64(top) - float64(max(t, x.l)+x.h)/2
			cost += x.w * (p*idleOK + (1-p)*(lambda+idleNo))
			waste += x.w * (1 - p)
		}
		return cost, waste / sum
	}
	best := func(lambda float64) (int64, float64) {
		bt := top
		bc, bw := eval(top, lambda)
		for _, t := range cand[:nc] {
			if t <= e {
				continue
			}
			if c, w := eval(t, lambda); c < bc || c == bc && t > bt {
				bt, bc, bw = t, c, w
			}
		}
		return bt, bw
	}
	if lam >= 0 {
		t, _ := best(float64(int64(500) << lam))
		return t, lam
	}
	budget := adaptSpreadShare * fixed / sum
	for l := 0; l <= adaptMaxLam; l++ {
		if t, w := best(float64(int64(500) << l)); w <= budget {
			return t, l
		}
	}
	return top, adaptMaxLam
}

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
// R > lo, the longest wait that was refused, and R <= hi, the time of the
// recovery, or, when the recovery came promptly after a wait ran out, the
// roundest time from that wait to the recovery (the wait itself when it
// is round: a wait followed by a prompt recovery is taken as proven). The
// state keeps the intervals of the last adaptRing episodes; older
// evidence falls out, so it ages.
//
// From them the planner (plan.go) plans each episode's retries, the
// cooldown after each refusal: it takes R as a mixture (what the newest
// agreeing evidence leaves open, a reset that moved a little, the older
// evidence, and a broad base for a reset never seen before, each weighed
// by how often the evidence changed, or, if more, by how often an episode
// missed the evidence it started from (noteMiss) or by how far apart
// neighbouring intervals lie against any two (drawnAnew); where the
// resets are drawn anew, below every interval's lower bound the broad
// base weighs only how often they fell far (fallShare)) and picks the
// retries that minimise the expected idle time plus lambda per refusal.
// Lambda is the least whose plan expects at most adaptShare of the
// refusals fixed 60 s would spend on the same evidence, and no more than
// the refusal credit the state holds: each recovered episode earns
// adaptShare of fixed's refusals at its evidence's bound (at no more than
// the wait that ran out, unless refusals proved the reset longer: earn),
// and each refusal spends one (none
// before any evidence, when the existing cooldown's rhythm is fixed's
// own), running into debt that later episodes repay. So a held wait is
// matched exactly while it holds, a natural retry goes earlier once
// credit allows (so that a reset that got shorter is seen), and a spell
// of long resets does not buy exploration at the expense of the quiet
// periods around it.
//
//   - A refusal beyond every interval's evidence plans afresh, lambda
//     chosen so that the rest expects adaptShare of what fixed would
//     still spend; past the broad base the wait grows (planNext). Just
//     past the evidence (below twice its highest bound), while credit
//     holds a refusal, the next retry comes half the existing cooldown
//     later instead (stepPast): a reset that varies overshoots the
//     ring's few episodes by a little, not by a spell's factor.
//   - A reset that moved is narrowed as soon as the newest two episodes
//     agree on it, not only once the evidence that disagrees has left
//     the ring, unless the resets are drawn anew (settled).
//   - A step budget that renews: an episode whose first retry is below
//     the held wait takes one trial step, at most 12 per adaptBudgetMS
//     instead of per seven-day state.
//   - With the credit at its cap, a plan whose first retry would not go
//     below the evidence's lower bound (a hold longer than the existing
//     cooldown, or a trial inside the evidence) retries an eighth below
//     it instead, to check that the bound still holds.
//   - An exact hold at a multiple of the existing cooldown (a whole ring
//     of agreeing episodes resolved there) checks its lower bound an
//     eighth below with its trial (deeper where the plan's trial lies);
//     after three refused checks since a trial last succeeded its trial
//     goes to the existing cooldown, so that a reset that drops to it is
//     found as soon as fixed finds it (exactHoldCheck).
//   - Exploring spends refusals, not idle time: until a refusal proves R
//     longer than the existing cooldown, the held wait is no longer than
//     it (held), and a refused trial's next retry is no later than a held
//     wait that short; while the held wait is no longer than the
//     existing cooldown, no retry is planned in the last eighth below
//     it (trialGap). A retry refused in the last second before the
//     plan's next one rests only until it, less than a second (the
//     pool's least rest of a second is for advice; trusted advice still
//     bounds it): a natural request can reach a trial long after its
//     wait ran out, and a whole second would hold the credential past
//     a reset the held wait matches.
//   - A sibling's fall: when one credential recovers at or below its
//     evidence's lower bound, the others of its provider, model and quota
//     bucket retry once at that wait where their plan would retry later,
//     within an hour and while credit holds a refusal (Learner.noteFall,
//     trySibling; memory only). A sibling already cooling then has its
//     cooldown ended at that wait after its own first throttle, if its
//     episode began no earlier than the faller's and its own resets are
//     not drawn anew (Learner.Fell and Release, which the pool calls;
//     release). The spec keeps each credential's evidence apart, and
//     after a long hold each had to find a drop on its own.
//   - A sibling's refused retries: a credential whose episode began
//     within riseWindow of a sibling's does not retry at or below the
//     wait the sibling just had refused, if that is at or beyond its own
//     held wait, and plans past it instead (Learner.rises, skipRise;
//     memory only: per scope the latest refusal of each of up to
//     siblingKeep credentials, so that a credential's own refusal does
//     not hide its sibling's). When the reset rises, each credential grew
//     through the same refusals in turn.
//   - A sibling's climb: when a credential recovers from an episode
//     whose refusals reached its held wait (the reset climbed past its
//     longest refused wait), a sibling whose episode begins within
//     climbWindow after it keeps its first retry, its own check of a
//     fall, and once that is refused plans past the climbed wait, if its
//     own newest evidence is a rise proven by a refusal and reaching
//     past that wait, and its resets are not drawn anew
//     (Learner.climbs, state.climbed, skipClimb; memory only). In a
//     spell of long resets, a credential that had met it once hedged its
//     next episode on a return to the resets before it.
//   - A sibling's pending check: a credential whose resets moved lately
//     and whose episode began within riseWindow of a sibling's does not
//     retry at or past the sibling's pending check of a fall (a retry
//     at or below its evidence's lower bound, due first), and retries in the
//     middle third between that check and its own plan's next retry
//     instead (Learner.checks, noteCheck, splitCheck; memory only): if
//     the reset fell that far, the sibling's recovery releases it there.
//     Alone, each credential made the same checks and then held the old
//     wait, and all idled past a reset that fell between them together.
//   - A round's lead looks for a fall: a credential whose episode begins
//     with no sibling's begun within leadWindow before it weighs a fall
//     below its evidence's lower bound more (leads, leadPiece; memory
//     only: Learner.starts), where that bound is at least
//     leadMinCooldowns existing cooldowns and the resets are not drawn
//     anew, so that a fall it finds releases the round's others.
//
// Adapt adds no request: a retry is the next natural request, let through
// earlier or later. Every other bound stays: trusted advice is a hard
// minimum, the model cooldown cap bounds every wait, and the state is one
// record under the same identity, capacity and expiry (version 6, with
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
	// adaptShare is the share of fixed 60 s's refusals a plan may expect
	// to spend.
	adaptShare = 0.4
	// adaptDecay is the weight of an interval relative to the next newer
	// one.
	adaptDecay = 0.7
	// adaptCreditCap bounds the refusal credit, in sixteenths of a
	// refusal; the debt is bounded by 255 sixteenths.
	adaptCreditCap = 128
	// adaptSteady is how many agreeing episodes make a reset steady:
	// growth past all evidence is then fast.
	adaptSteady = 4
	// adaptMaxLam bounds lam: lambda = 1 s * 2^(lam/2).
	adaptMaxLam = 14
	// adaptMissKeep: each recovered episode keeps all but 1/adaptMissKeep
	// of the miss share (state.miss) and a miss adds that much of 256.
	adaptMissKeep = 8
	// Just past all evidence, below adaptStepReach times its highest
	// bound, a refused retry is followed 1/adaptStepShare of the existing
	// cooldown later (stepPast).
	adaptStepReach = 2
	adaptStepShare = 2
)

// span is one episode's evidence: lo < R <= hi, in ms after its first
// throttle.
type span struct{ lo, hi int64 }

// The open episode's flags, in state.aflags.
const (
	// flagTrial: the pending retry is a trial below the held wait.
	flagTrial uint8 = 1 << iota
	// flagAtExisting: the pending trial is at the existing cooldown, in
	// an exact hold that watches for a drop (exactHoldCheck).
	flagAtExisting
	// flagWatch: the episode began with such a trial.
	flagWatch
	// flagCheck: the pending trial checks an exact hold's lower bound.
	flagCheck
	// flagLead: the episode leads a round of throttles (leads).
	flagLead
	flagsAll = flagTrial | flagAtExisting | flagWatch | flagCheck | flagLead
)

// adaptStreak is how many checks of an exact hold's lower bound must be
// refused since a trial last succeeded (state.streak) before the hold
// watches for a drop.
const adaptStreak = 3

func (s *state) hasAdapt() bool {
	return s.rn != 0 || s.rhead != 0 || s.elo != 0 || s.fails != 0 || s.aflags != 0 || s.lam != 0 ||
		s.credit != 0 || s.debt != 0 || s.streak != 0 || s.miss != 0 || s.budgetAt != 0 || s.ring != [adaptRing]span{}
}

// adaptValid checks the adapt invariants observe keeps.
func (s *state) adaptValid() bool {
	if s.rn > adaptRing || s.rhead >= adaptRing || s.elo < 0 || s.elo >= maxBoundMS ||
		s.aflags&^flagsAll != 0 || s.lam > adaptMaxLam || s.credit > adaptCreditCap {
		return false
	}
	for i := range adaptRing {
		sp := s.ring[(int(s.rhead)+adaptRing-1-i)%adaptRing]
		if i < int(s.rn) && (sp.lo < 0 || sp.lo >= sp.hi || sp.hi < minBoundMS || sp.hi > maxBoundMS) ||
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
		// A refused retry: R is longer than this wait. It spends a
		// refusal's credit, or runs into debt; before any evidence the
		// episode keeps the existing cooldown's rhythm, whose refusals
		// fixed spends too, so they cost nothing (a long first reset
		// would otherwise hold the next episodes at it while the debt
		// is repaid).
		s.elo = min(max(s.elo, o.at-s.anchor), maxBoundMS-1)
		if s.aflags&flagTrial == 0 && s.fails < 255 {
			s.fails++
		}
		if s.aflags&flagCheck != 0 && s.streak < 255 {
			s.streak++
		}
		if s.rn > 0 {
			c := min(s.credit, 16)
			s.credit -= c
			s.debt = uint8(min(int(s.debt)+16-int(c), 255))
		}
	case before.anchor != 0:
		// A recovery: R is at most the time of the recovery. After a
		// prompt one, the roundest time from the wait that ran out to the
		// recovery is taken as proven: the wait itself when it is round
		// (a held whole minute), else a rounder reset the wait fell just
		// short of (a wait of 596.5 s planned inside a 600 s spell).
		e, w := o.at-before.anchor, before.until-before.anchor
		if w > s.elo && w < e && e-w <= max(resolvedMS, w/16) {
			e = roundest(w, e)
		}
		if e > s.elo && e <= maxBoundMS {
			s.noteMiss(s.elo, e)
			s.push(span{s.elo, e})
			s.earn(o.existing, w)
		}
		if before.aflags&flagTrial != 0 {
			s.streak = 0 // a trial below the held wait succeeded
		}
		s.endEpisode()
	}
}

// noteMiss updates the miss share with an episode that recovered with R
// in (lo, hi]: a miss when that lies outside what the evidence it started
// from left open. Censored evidence looks consistent (a recovery at the
// first retry proves only R <= that wait, which agrees with everything
// below it), so breaks between neighbouring intervals undercount a reset
// drawn anew every episode; a miss is seen whenever a retry contradicts
// the evidence the plan trusted.
func (s *state) noteMiss(lo, hi int64) {
	if s.rn == 0 {
		return
	}
	s.miss -= (s.miss + adaptMissKeep - 1) / adaptMissKeep
	if a, b := s.common(); hi <= a || lo >= b {
		s.miss += 255 / adaptMissKeep
	}
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

// common returns what the newest interval and every older one that
// agrees with it leave open, newest first: a reset seen before a spell
// of others is known again at once.
func (s *state) common() (a, b int64) {
	a, b, _ = s.run(0)
	for j := 1; j < int(s.rn); j++ {
		n := s.at(j)
		if na, nb := max(a, n.lo), min(b, n.hi); na < nb {
			a, b = na, nb
		}
	}
	return a, b
}

// settled reports whether a held wait on the newest evidence may be
// narrowed: all of it agrees, or the newest agrees with the episode
// before it and the resets are not drawn anew (a miss share under
// anewMiss). A reset that moved is narrowed once two episodes agree
// on it: the older evidence that disagrees leaves the ring only adaptRing
// episodes later, and until then a held wait stayed at the top of a wide
// interval (a reset that fell from 600 s to 90 s held at 120 s).
func (s *state) settled() bool {
	if s.breaks() == 0 {
		return true
	}
	_, _, k := s.run(0)
	return k >= 2 && s.miss < anewMiss
}

// anewMiss is the miss share (of 256), an eighth, from which a
// credential's resets count as drawn anew: only evidence that all agrees
// is then narrowed (settled), and a sibling's fall leaves its cooldown
// alone (release), since two agreeing episodes, or another credential's
// reset, say little of its next.
const anewMiss = 32

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
//
// lead says that o, an episode's first throttle, leads a round of
// throttles in its sibling group (leads).
func (s *state) adaptTarget(o observation, lead bool) (target int64, trial, ok bool) {
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
	if lead && s.leads(o.existing) {
		s.aflags |= flagLead
	}
	t, h := s.planFirst(o.existing)
	if t >= h && h > o.existing && s.credit >= 16 && s.settled() {
		// A plan that holds settled evidence longer than the existing
		// cooldown still narrows it while credit lasts, so that a reset
		// of whole seconds is matched exactly.
		t = s.bisect(h)
	}
	if a, _ := s.common(); h > o.existing && s.credit >= adaptCreditCap && a > 2*resolvedMS {
		// Credit piles up: the plans spend less than the episodes earn.
		// A held wait that succeeds proves only R <= h, and so does a
		// trial above the lower bound (agreeing evidence keeps that
		// bound, push), so the bound may be an old refusal's while the
		// reset varies or fell below it: check it with a retry an
		// eighth below, unless the plan's retry is that deep already.
		t = min(t, roundest(a-a/8, a-1))
	}
	if t < h && s.steps < MaxTrialSteps {
		s.steps++
		s.aflags |= flagTrial
		if c := s.exactHoldCheck(h, o.existing); c > 0 && t > o.existing {
			// An exact hold at a multiple of the existing cooldown: its
			// trial checks the lower bound (an eighth below it, or
			// deeper where the plan put it) until checks were refused
			// adaptStreak times since a trial last succeeded, then
			// watches for a drop.
			if s.streak >= adaptStreak {
				t = o.existing
				s.aflags |= flagAtExisting | flagWatch
			} else {
				// The plan's own trial, if deeper, checks the lower
				// bound as well, and finds a reset that fell far at
				// once.
				t = min(t, c)
				s.aflags |= flagCheck
			}
		}
		return t, true, true
	}
	return h, false, true
}

// exactHoldCheck returns where a trial checks the lower bound of an exact
// hold, or 0 if h is not one: held longer than the existing cooldown, at
// a multiple of it, on a whole ring of agreeing episodes resolved at h.
// The check is the roundest wait in the eighth below that bound.
//
// Fixed 60 s idles nothing at such a reset, so adapt can gain nothing
// there, only lose when the reset drops: fixed's first retry finds a
// reset that fell to the existing cooldown at once, where the plan's
// trial near h finds it minutes late (step 300->60 s lost on every
// seed), and a reset that fell less is never seen while held evidence
// that agrees keeps its old lower bound (push). So the hold's trial
// checks the lower bound instead (or goes where the plan put it, if that
// is deeper: a hold of 720 s whose reset fell to 39 s is found by a
// trial at 135 s, not after a check at 660 s per credential leaves the
// evidence behind); once checks were refused adaptStreak
// times since a trial last succeeded, it goes to the existing cooldown (a drop is seen at
// once), and a check follows it only while credit was at its cap
// (planNext), so that a reset drifting down is still seen. Each episode
// still spends about one refusal, as the plan's trial did.
func (s *state) exactHoldCheck(h, existing int64) int64 {
	a, b, k := s.run(0)
	if existing > 0 && h > existing && h%existing == 0 && k >= adaptRing && b-a <= resolution(b) {
		if c := roundest(a-a/8, a-1); c > existing && c < h {
			return c
		}
	}
	return 0
}

// bisect returns a retry inside what the newest agreeing evidence leaves
// open below the held wait h: the roundest wait in its middle half (in
// proportion when it is wide), or h when it is resolved to a couple of
// seconds.
func (s *state) bisect(h int64) int64 {
	a, b := s.common()
	b = min(b, h)
	w := b - a
	if w <= 2*resolvedMS {
		return h
	}
	x, y := a+w/4, b-w/4
	if a > 0 && b > 2*a {
		g := int64(math.Sqrt(float64(a) * float64(b)))
		x, y = g-(g-a)/4, g
	}
	return roundest(x, y)
}

// earn credits the episode that just recovered adaptShare of the refusals
// fixed would spend at the newest evidence's bound, repaying debt first,
// but at no more than w, the wait that ran out before the recovery,
// unless the evidence proves R longer. A late recovery (no request came
// for the credential until long after its wait ran out) proves only R <=
// its own time, which says more of how seldom the pool needed the
// credential than of its reset: a third credential at 0.2 requests/s,
// whose resets were 45 s, earned as if they were 300 s and spent the
// credit in a spell of long resets. (A prompt recovery's bound is the
// wait, or the roundest time just past it: the same refusals of fixed.)
func (s *state) earn(existing, w int64) {
	a, b, _ := s.run(0)
	if w > a {
		b = min(b, w)
	}
	earn := int(16 * adaptShare * fixedWaste(b, existing))
	pay := min(earn, int(s.debt))
	s.debt -= uint8(pay)
	s.credit = uint8(min(int(s.credit)+earn-pay, adaptCreditCap))
}

// planNext returns the wait after a refused retry at e: the plan's next
// retry, or past all evidence growth (an eighth, a half, then double the
// wait, the roundest in the second half of each step; while adaptSteady
// episodes agree, an eighth, then triple, then double, the roundest in
// the last eighth).
func (s *state) planNext(e, existing int64) int64 {
	h := s.held(existing)
	if s.aflags&flagAtExisting != 0 {
		// The trial at the existing cooldown of an exact hold was
		// refused: the reset did not drop to it. A check of the hold's
		// lower bound follows only if credit was at its cap before the
		// trial; else the hold.
		s.aflags &^= flagTrial | flagAtExisting
		if h > e && s.credit < adaptCreditCap-16 {
			return h
		}
		if c := s.exactHoldCheck(h, existing); c > e {
			s.aflags |= flagTrial | flagCheck
			return c
		}
	}
	s.aflags &^= flagTrial | flagCheck
	if t, ok := s.stepPast(e, existing); ok {
		return t
	}
	if t := s.planAfter(e, existing); t > e {
		switch {
		case e < h && h <= existing:
			// A refused trial: the plan's price may prefer a later
			// retry, but never one the existing cooldown would not make.
			t = min(t, h)
		case s.aflags&flagWatch != 0 && e < h && t > h && t-h <= 2*resolvedMS:
			// An exact hold that watches for a drop retries at h, not a
			// second or two above it, where an old recovery left the
			// evidence's upper bound: its trials no longer narrow it.
			t = h
		}
		return t
	}
	grow := max(e>>3, 2*resolvedMS)
	if _, _, k := s.run(0); k < adaptSteady {
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

// stepPast returns the retry after a refusal at e just past all the
// evidence the ring holds (at or beyond its highest upper bound, below
// adaptStepReach times it): 1/adaptStepShare of the existing cooldown
// later, while the credit holds a refusal. A reset a little longer than any the
// ring remembers is most often the next draw of one that varies (noisy's
// 100-200 s, whose ring tops out below 200 s), not a new spell: the
// planner, pricing a rise of any size on its broad base, stepped far past
// it. Further out, or without credit to pay for the refusals, the planner
// grows the wait as before: a spell ten times the steady reset (bursty's
// 600 s after 45 s) would spend twice fixed's refusals at this rhythm.
func (s *state) stepPast(e, existing int64) (int64, bool) {
	if s.rn == 0 || existing <= 0 || s.credit < 16 {
		return 0, false
	}
	if top := s.top(); e < top || e >= adaptStepReach*top {
		return 0, false
	}
	return e + existing/adaptStepShare, true
}

// top returns the highest upper bound of the intervals the ring holds (0
// while it holds none).
func (s *state) top() int64 {
	var t int64
	for i := range int(s.rn) {
		t = max(t, s.at(i).hi)
	}
	return t
}

// resolution is the interval width below which the newest evidence is
// resolved.
func resolution(b int64) int64 { return max(8*resolvedMS, b/32) }

// fixedWaste is how many refusals the existing cooldown spends before a
// reset of r.
func fixedWaste(r, existing int64) float64 {
	if existing <= 0 || r <= existing {
		return 0
	}
	return float64((r - 1) / existing)
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

// fell reports whether the episode that just ended in s recovered at hi,
// at or below the lower bound of what the evidence it started from
// (before) left open: the reset fell.
func (s *state) fell(before *state) (int64, bool) {
	if before.anchor == 0 || s.anchor != 0 || before.rn == 0 || s.rn == 0 || s.ring == before.ring {
		return 0, false
	}
	a, _ := before.common()
	if hi := s.at(0).hi; hi <= a {
		return hi, true
	}
	return 0, false
}

// trySibling moves the retry planned at t (ms after the episode's first
// throttle; e is this throttle's) to sib, the wait a sibling recovered at
// when its reset fell, if that lies between and the credit holds a
// refusal: a trial, whose refusal does not count as growth. It reports
// whether it did.
func (s *state) trySibling(e, t, sib int64) (int64, bool) {
	if sib <= e || sib >= t || s.credit < 16 {
		return t, false
	}
	s.aflags = s.aflags&^(flagAtExisting|flagCheck) | flagTrial
	return sib, true
}

// release ends the open episode's cooldown, held at now, at sib (ms after
// its first throttle), the wait a sibling recovered at when its reset
// fell in an episode that began at from, if the cooldown ends later; not
// when this episode began before the sibling's (its reset may be the one
// from before the fall), when a retry of it was refused at or beyond sib,
// when its own resets are drawn anew (a miss share of an eighth or more:
// the sibling's fall says nothing of its reset), or when the credit
// holds no refusal; never before trusted advice, never before now. The
// retry is a trial, as with trySibling. It reports the new end.
func (s *state) release(now, sib, from int64) (int64, bool) {
	if s.anchor == 0 || s.anchor < from || s.decidedAt == 0 || now <= s.decidedAt || now >= s.until ||
		sib <= s.elo || s.credit < 16 || s.miss >= anewMiss {
		return 0, false
	}
	t := max(s.anchor+sib, s.hintUntil, now)
	if t >= s.until {
		return 0, false
	}
	s.until = t
	s.aflags = s.aflags&^(flagAtExisting|flagCheck) | flagTrial
	return t, true
}

// skipRise moves the retry planned at t (ms after the episode's first
// throttle; e is this throttle's) past r, a sibling's refused retry, to
// the plan's next retry after it, and reports whether it did: when the
// sibling's episode began within riseWindow of this one (the same reset
// most likely refused them both), its refusal was at or beyond the wait
// this credential's evidence holds and at or beyond t (this retry would be
// refused too), and this credential's resets are not drawn anew (a miss
// share under riseMissMax; a sibling's refusal then says nothing of its
// reset).
func (s *state) skipRise(e, t int64, r rise, existing int64) (int64, bool) {
	if s.anchor == 0 || max(r.anchor-s.anchor, s.anchor-r.anchor) >= riseWindow ||
		s.miss >= riseMissMax || r.e <= e || t > r.e || r.e < s.held(existing) {
		return t, false
	}
	return s.skipPast(r.e, t, existing)
}

// riseMissMax is the miss share (of 256) from which skipRise leaves a
// retry alone.
const riseMissMax = 16

// climbed reports whether the recovery just observed (before is the state
// before it) ended an episode whose refusals reached the wait its
// evidence held, so that the reset rose past it: a climb, proving R
// longer than elo, the episode's longest refused wait, which it returns.
func (s *state) climbed(before *state, existing int64) (elo int64, ok bool) {
	if s.anchor != 0 || before.rn == 0 || s.rhead == before.rhead || before.elo < before.held(existing) {
		return 0, false
	}
	return before.elo, true
}

// skipClimb moves the retry planned at t (ms after the episode's first
// throttle; e is this refused retry's) past c.e, where a sibling's reset
// climbed, to the plan's next retry after it, and reports whether it did:
// when this episode began within climbWindow after the sibling's climb,
// this credential's own newest evidence is a rise proven by a refusal
// and reaching past c.e, and its resets are not drawn anew (a miss share
// under climbMissMax). Its first retry, already refused, was its own
// check of a fall (decideAdapt never skips an episode's first).
func (s *state) skipClimb(e, t int64, c rise, existing int64) (int64, bool) {
	if x := s.at(0); x.lo == 0 || x.hi <= c.e || s.miss >= climbMissMax || c.e <= e || t > c.e {
		return t, false
	}
	return s.skipPast(c.e, t, existing)
}

// skipPast moves the retry planned at t to the plan's next retry after
// w, no longer a trial, check or watch, and reports whether it did (not
// when the plan has none past w).
func (s *state) skipPast(w, t, existing int64) (int64, bool) {
	n := s.planAfter(w, existing)
	if n <= w {
		return t, false
	}
	s.aflags &^= flagTrial | flagCheck | flagAtExisting
	return n, true
}

// splitCheck moves the retry planned at t (ms after the episode's first
// throttle; now is this throttle's time) into the middle third between a
// sibling's pending check of a fall (the furthest of cs that qualifies) and
// this credential's plan's next retry after it, and reports whether it
// did. A check qualifies when the two episodes began within riseWindow
// and it comes at or below t, before this retry but after now, and
// beyond this credential's elapsed wait. Only where this credential's
// resets moved lately (a miss share of splitMissMin or more) and the
// credit holds a refusal. A retry at or past the sibling's check learns
// nothing the sibling's will not: if the reset fell that far, the
// sibling's recovery releases this cooldown there (release); if not,
// this retry checks a smaller fall. It is a trial, as with trySibling.
func (s *state) splitCheck(now, t int64, cs []rise, existing int64) (int64, bool) {
	if s.anchor == 0 || s.miss < splitMissMin || s.credit < 16 {
		return t, false
	}
	var w int64
	for _, c := range cs {
		if max(c.anchor-s.anchor, s.anchor-c.anchor) < riseWindow && c.e <= t && c.e > w &&
			c.anchor+c.e > now && s.anchor+c.e > now && c.anchor+c.e <= s.anchor+t {
			w = c.e
		}
	}
	if w == 0 {
		return t, false
	}
	n := s.planAfter(w, existing)
	if n <= w+2*resolvedMS {
		return t, false
	}
	d := n - w
	s.aflags = s.aflags&^(flagAtExisting|flagCheck) | flagTrial
	return roundest(w+d/3, w+2*d/3), true
}

// splitMissMin is the miss share (of 256) from which splitCheck moves a
// retry: an episode missed its evidence within about the last ten.
const splitMissMin = 8

// climbMissMax is the miss share (of 256) from which skipClimb leaves a
// retry alone. It is looser than riseMissMax: the first episode of a
// spell is itself a miss.
const climbMissMax = 64

// A round's lead looks for a fall. At 0.2 requests/s nearly every
// credential's first episode after the reset fell below half idled
// through the old wait (a fall is found at the hold), its siblings with
// it. The credential whose episode leads a round of throttles (no
// sibling's episode began within leadWindow before it) weighs a fall more
// (leadWeight, spread evenly from the existing cooldown up to the middle
// of what lies between it and the evidence's lower bound), so its plan
// looks there sooner, and a fall it finds releases its siblings (release,
// trySibling). Only where the lower bound is at least leadMinCooldowns
// existing cooldowns (a fall below half is then worth minutes of idle
// time), the resets are not drawn anew (drawnAnew under leadAnew) and no
// interval the ring holds lies below half that bound (a reset that falls
// there was seen already, and the belief weighs it).
const (
	leadWindow       = 5 * 60_000
	leadWeight       = 0.2
	leadMinCooldowns = 5
	leadAnew         = 0.7
)

// leads reports whether an episode that leads a round of throttles looks
// for a fall (leadPiece).
func (s *state) leads(existing int64) bool {
	if s.rn == 0 || existing <= 0 {
		return false
	}
	a, _ := s.common()
	if a < leadMinCooldowns*existing || s.drawnAnew() >= leadAnew {
		return false
	}
	for i := range int(s.rn) {
		if s.at(i).hi < a/2 {
			return false
		}
	}
	return true
}

// leadPiece returns the weight a lead gives a fall below a, the
// evidence's lower bound: leadWeight, spread evenly from the existing
// cooldown up to halfway from it to a.
func leadPiece(existing, a int64) piece {
	return piece{existing, existing + (a-existing)/2, leadWeight}
}

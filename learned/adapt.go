package learned

// learned_cooldown.adapt (issue 19): in apply mode, a learner that tracks
// a reset that moves. The spec's rules can only raise the lower bound with
// a throttle and never apply a wait below it, so a reset that got shorter
// is never seen, and 12 trial steps for a seven-day state hold a wait
// learned in a slow spell. Adapt departs from the spec where it must, and
// only there:
//
//   - A proven wait. Adapt applies the last wait that was followed by a
//     recovery (good: the cooldown that ran out before the success), from
//     the first recovery on, instead of a midpoint after three consistent
//     observations.
//   - Shorter natural retries. Once a learned wait has held, adapt lets
//     the next natural request through earlier (a shorter cooldown, never
//     an extra request): halfway into the interval the evidence leaves
//     open, or, while the learned wait is long, after the existing
//     cooldown, the first retry the existing cooldown would have allowed.
//     A refusal sends the following request after the proven wait; a
//     recovery proves the shorter wait and the next episode tries shorter
//     still, by steps that double.
//   - Evidence that ages. A refusal proves the reset longer than its wait
//     for adaptAgeMS; after that it no longer stops a shorter retry.
//   - A step budget that renews: the 12 trial steps are counted per
//     adaptBudgetMS, not per seven-day state.
//   - Growth. After a refused retry at the learned wait, the next retry
//     comes a quarter later, then a half, then double: a few refusals
//     find a reset that grew, where the existing cooldown spends one per
//     minute.
//
// Every other bound stays: trusted advice is a hard minimum, the model
// cooldown cap bounds every wait, no request is added, and the state is
// the same record under the same identity and expiry.
const (
	// adaptAgeMS is how long a refusal's evidence stops a shorter retry.
	adaptAgeMS = 30 * 60_000
	// adaptBudgetMS is the period over which MaxTrialSteps shorter
	// retries are allowed; the budget renews after it.
	adaptBudgetMS = 60 * 60_000
	// adaptResolved: an interval narrower than this share of the wait
	// (or than resolvedMS) is not bisected further.
	adaptResolvedDiv = 20
)

// Adapt flags, in state.aflags.
const (
	// flagExplored: the open episode's first cooldown was a shorter retry.
	flagExplored uint8 = 1 << iota
	// flagReturn: that shorter retry was the existing cooldown's.
	flagReturn
)

// adaptObserve updates the adapt evidence after st.observe applied o with
// effect eff; before is the state it started from.
func (s *state) adaptObserve(before *state, o observation, eff effect) {
	switch {
	case eff == effNone:
		return
	case o.throttle && eff == effAnchor:
		s.fails, s.aflags = 0, 0
	case o.throttle && (eff == effEvidence || eff == effContradiction):
		// A refused retry: the reset is longer than this wait.
		e := o.at - s.anchor
		if s.floorAt == 0 || o.at-s.floorAt >= adaptAgeMS {
			s.floor = 0
		}
		s.floor, s.floorAt = max(s.floor, e), o.at
		if s.fails < 255 {
			s.fails++
		}
		if s.aflags&flagExplored != 0 && s.fails == 1 {
			s.push, s.hold = 0, 0 // the shorter retry was refused
		}
		if s.good != 0 && e >= s.good && s.aflags&flagExplored == 0 {
			s.good = 0 // the proven wait no longer works: the reset grew
		}
	case !o.throttle && before.anchor != 0:
		// A recovery after the episode's latest cooldown ran out: the
		// reset is at most that wait.
		w := before.until - before.anchor
		explored := before.aflags&flagExplored != 0
		if w <= 0 || w > maxBoundMS || eff == effEnded {
			s.good, s.fails, s.aflags = 0, 0, 0
			return
		}
		switch {
		case explored && s.fails == 0:
			s.push = min(s.push+1, 8) // shorter worked: try shorter again
		case s.fails == 0:
			s.hold = min(s.hold+1, 255)
		default:
			s.push = 0
		}
		if s.floor >= w {
			s.floor = 0 // contradicted: the reset got shorter
		}
		s.good = w
		s.fails, s.aflags = 0, 0
	}
}

// adaptEvery is how many episodes a learned wait holds before a shorter
// retry. A long wait, where the existing cooldown would spend several
// refusals per episode, may try every episode; a wait no longer than the
// existing cooldown, which spends none, rarely.
func adaptEvery(good, existing int64) uint8 {
	switch {
	case good > 3*existing:
		return 1
	case good > 2*existing:
		return 2
	case good > existing:
		return 3
	}
	return 12
}

// adaptTarget returns the wait after the episode's first throttle that
// adapt applies for the counted throttle o, or ok=false to use the
// existing cooldown; it records the episode's flags and steps in s.
func (s *state) adaptTarget(o observation) (target int64, trial, ok bool) {
	t := o.at
	if o.at == s.anchor {
		if s.good == 0 {
			return 0, false, false
		}
		if t-s.budgetAt >= adaptBudgetMS {
			s.steps, s.budgetAt = 0, t
		}
		floor := s.floor
		if s.floorAt == 0 || t-s.floorAt >= adaptAgeMS {
			floor = 0
		}
		due := s.hold >= adaptEvery(s.good, o.existing) || s.push > 0
		if !due || s.steps >= MaxTrialSteps || s.hintUntil != 0 {
			return s.good, false, true
		}
		// While the learned wait is long, the first retry comes after
		// the existing cooldown, unless a fresh refusal proves that too
		// short already.
		if s.good > 3*o.existing && floor < o.existing {
			s.aflags, s.hold = flagExplored|flagReturn, 0
			s.steps++
			return o.existing, true, true
		}
		lo := floor
		if lo == 0 {
			// No fresh refusal: step down from the proven wait, by a
			// step that doubles while shorter waits keep working.
			lo = max(s.good-s.good>>2<<min(s.push, 3), 0)
		}
		if s.good-lo <= max(resolvedMS, s.good/adaptResolvedDiv) {
			return s.good, false, true // resolved: hold the proven wait
		}
		s.aflags, s.hold = flagExplored, 0
		s.steps++
		return max(lo+(s.good-lo)/2, minBoundMS), true, true
	}
	// A refused retry at e.
	e := t - s.anchor
	if s.aflags&flagExplored != 0 && s.fails == 1 && s.good > e {
		return s.good, false, true // the shorter retry failed: back to the proven wait
	}
	if s.good == 0 && s.floor == 0 {
		return 0, false, false
	}
	// Growth: a quarter, a half, then double the wait.
	k := max(int(s.fails), 1)
	if s.aflags&flagExplored != 0 {
		k = max(k-1, 1)
	}
	grow := e >> 2 << min(k-1, 2)
	return e + max(grow, resolvedMS), false, true
}

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
//     for adaptAgeEpisodes episodes; after that it no longer stops a
//     shorter retry.
//   - A step budget that renews: the 12 trial steps are counted per
//     adaptBudgetMS, not per seven-day state.
//   - Growth. After a refused retry at the learned wait, the next retry
//     comes an eighth later, then a quarter, a half, then double (or at
//     the wait of a long spell remembered from the last time one ended):
//     a few refusals find a reset that grew, where the existing cooldown
//     spends one per minute.
//
// Every other bound stays: trusted advice is a hard minimum, the model
// cooldown cap bounds every wait, no request is added, and the state is
// one record under the same identity, capacity and expiry (version 2,
// with the adapt evidence; version 1 while there is none).
//
// learned/sim measures it against fixed 60 s, a ladder and the spec; it
// does not yet win every cell there (README, Cooldowns).
const (
	// adaptBudgetMS is the period over which MaxTrialSteps shorter
	// retries are allowed; the budget renews after it.
	adaptBudgetMS = 60 * 60_000
	// adaptResolved: an interval narrower than this share of the wait
	// (or than resolvedMS) is not bisected further.
	adaptResolvedDiv = 128
)

// Adapt flags, in state.aflags.
const (
	// flagExplored: the open episode's first cooldown was a shorter retry.
	flagExplored uint8 = 1 << iota
	// flagReturn: that shorter retry was the existing cooldown's.
	flagReturn
	// flagJumped: a retry of the open episode came after a jump to high.
	flagJumped
	// flagLastReturn: the latest shorter retry was the existing
	// cooldown's; it outlives the episode.
	flagLastReturn
)

// episodeFlags are the flags a new episode clears.
const episodeFlags = flagExplored | flagReturn | flagJumped

// adaptObserve updates the adapt evidence after st.observe applied o with
// effect eff; before is the state it started from.
func (s *state) adaptObserve(before *state, o observation, eff effect) {
	switch {
	case eff == effNone:
		return
	case o.throttle && eff == effAnchor:
		s.fails, s.aflags = 0, s.aflags&^episodeFlags
		s.fage = min(s.fage+1, 255)
	case o.throttle && (eff == effEvidence || eff == effContradiction):
		// A refused retry: the reset is longer than this wait. A refusal
		// below an aged floor is consistent with it and renews it.
		e := o.at - s.anchor
		if s.floor == 0 || int(s.fage) < adaptAgeEpisodes<<s.backoff || e > s.floor {
			s.floor = max(s.floor, e)
		}
		s.fage = 0
		if s.fails < 255 {
			s.fails++
		}
		if s.aflags&flagExplored != 0 && s.fails == 1 {
			// The shorter retry was refused: the next one waits twice as
			// many episodes.
			s.push, s.hold = 0, 0
			s.backoff = min(s.backoff+1, adaptMaxBackoff)
		} else if s.fails == 1 {
			s.backoff = 0 // the proven wait was refused: the reset moved
		}
	case !o.throttle && before.anchor != 0:
		// A recovery after the episode's latest cooldown ran out: the
		// reset is at most that wait.
		w := before.until - before.anchor
		if w <= 0 || w > maxBoundMS || eff == effEnded {
			s.good, s.fails, s.aflags = 0, 0, s.aflags&^episodeFlags
			return
		}
		// The recovery proves the reset at most e. It proves the wait w
		// itself only when it came promptly after w ran out; later, the
		// quota may have reset after w.
		e := o.at - before.anchor
		prompt := e-w <= max(resolvedMS, w/16)
		explored := before.aflags&flagExplored != 0
		switch {
		case explored && s.fails == 0 && prompt:
			s.push = min(s.push+1, 8) // shorter worked: try shorter again
			s.backoff = 0
			if before.aflags&flagReturn != 0 && s.good > 3*w {
				s.high = s.good // a long spell ended: remember its wait
			}
		case explored && s.fails == 0:
			s.push, s.hold = 0, 0 // inconclusive: keep what is proven
			if s.good != 0 && e >= s.good {
				w = s.good
			} else {
				w = e
			}
		case s.fails == 0:
			s.hold = min(s.hold+1, 255)
		default:
			// After refusals: a late recovery does not prove w, but a
			// wait that is too short costs one refusal next time, and one
			// too long an idle credential every time.
			s.push, s.hold = 0, 0
		}
		if s.floor >= w {
			s.floor = 0 // contradicted: the reset got shorter
		}
		if s.high != 0 && s.high <= 2*w {
			s.high = 0
		}
		s.good = min(w, maxBoundMS-1)
		s.fails, s.aflags = 0, s.aflags&^episodeFlags
	}
}

// adaptAgeEpisodes is how many episodes a refusal keeps proving the reset
// longer than its wait; after that it no longer stops a shorter retry.
const adaptAgeEpisodes = 4

// adaptMaxBackoff bounds the doubling of adaptEvery and adaptAgeEpisodes
// while shorter retries keep being refused.
const adaptMaxBackoff = 2

// adaptEvery is how many episodes a learned wait holds before a shorter
// retry. A long wait, where the existing cooldown would spend several
// refusals per episode, may try every episode; a wait no longer than the
// existing cooldown, which spends none, rarely.
func adaptEvery(good, existing int64) int {
	switch {
	case good > 3*existing:
		return 1
	case good > 2*existing:
		return 2
	case good > existing:
		return 3
	}
	return 4
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
		long := s.good > 3*o.existing
		every := adaptEvery(s.good, o.existing)
		if !long {
			// Back off while shorter retries are refused; a long wait keeps
			// its retry after the existing cooldown every other episode, to
			// see the end of a long spell at once.
			every <<= s.backoff
		}
		due := int(s.hold) >= every || s.push > 0
		if !due || s.steps >= MaxTrialSteps || s.hintUntil != 0 {
			return s.good, false, true
		}
		fresh := s.floor != 0 && int(s.fage) < adaptAgeEpisodes<<s.backoff
		var w int64
		if s.good > 3*o.existing && s.push == 0 && s.aflags&flagLastReturn == 0 {
			// A long wait: every other shorter retry is the next request
			// after the existing cooldown, the first retry the existing
			// cooldown would have allowed, so that the end of a long
			// spell is seen at once.
			s.aflags |= flagReturn | flagLastReturn
			w = o.existing
		} else {
			s.aflags &^= flagLastReturn
			switch {
			case fresh && s.good-s.floor > max(resolvedMS, s.good/adaptResolvedDiv):
				w = s.floor + (s.good-s.floor)/2 // bisect what the evidence leaves open
			case fresh:
				return s.good, false, true // resolved: hold the proven wait
			default:
				// Step down from the proven wait, by an eighth, a quarter,
				// then a half while shorter waits keep working.
				w = s.good - s.good>>3<<min(s.push, 2)
			}
		}
		w = max(w, minBoundMS)
		if w >= s.good {
			return s.good, false, true
		}
		s.aflags |= flagExplored
		s.hold = 0
		s.steps++
		return w, true, true
	}
	// A refused retry at e.
	e := t - s.anchor
	if s.aflags&flagExplored != 0 && s.fails == 1 && s.good > e {
		return s.good, false, true // the shorter retry failed: back to the proven wait
	}
	if s.good == 0 {
		return 0, false, false // nothing proven yet: the existing cooldown's rhythm
	}
	if s.high > e && s.aflags&flagJumped == 0 {
		s.aflags |= flagJumped // a long spell again: its remembered wait
		return s.high, false, true
	}
	// Growth: an eighth, a quarter, a half, then double the wait.
	k := int(s.fails)
	if s.aflags&flagExplored != 0 {
		k--
	}
	grow := e >> 3 << min(max(k-1, 0), 3)
	return e + max(grow, resolvedMS), false, true
}

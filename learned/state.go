package learned

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
)

// Bounds and constants of the evidence rules, in milliseconds.
const (
	minBoundMS = 1_000     // the interval starts at 1 s...
	maxBoundMS = 3_600_000 // ...to 3,600 s
	// burstMS is the time resolution of evidence: throttles less than this
	// apart are one event, and an observation this much older than the
	// latest one has a nonincreasing timestamp.
	burstMS = 1_000
	// resolvedMS is the interval width below which trials stop.
	resolvedMS = 1_000
	// confidentAt is the number of consistent directional observations
	// that allow a midpoint trial.
	confidentAt = 3
	// MaxTrialSteps is the most trial steps one learned state allows.
	MaxTrialSteps = 12
	// refreshMS is how long a refusal keeps a learned duration longer than
	// the existing cooldown in force. After that the learner declines once,
	// so that the existing cooldown gathers fresh evidence: a refusal
	// confirms the longer wait, a success below lo contradicts it.
	refreshMS = 15 * 60_000
)

// state is the learned evidence of one identity. It holds no name, key or
// key prefix: only bounds, counters and unix-millisecond times. The reset R
// it estimates satisfies lo < R <= hi.
type state struct {
	lo, hi int64 // ms
	conf   uint8 // consistent directional observations since the last widening
	steps  uint8 // trial steps applied
	// last is when the latest counted observation happened (0: none).
	last int64
	// anchor is when the open episode's first throttle happened (0: no
	// episode).
	anchor int64
	// until is the earliest time a call admitted after the episode's latest
	// counted throttle can have been answered: that throttle plus the
	// cooldown the pool applied.
	until int64
	// hintUntil is the episode's trusted advice: no cooldown ends before it
	// (0: none).
	hintUntil int64
	// decidedAt is the counted throttle whose cooldown the learner decided
	// in apply mode (0: none in this episode).
	decidedAt int64
	// refused is when a retry was last refused: a throttle sample inside an
	// episode (0: never).
	refused int64

	// The adapt evidence (adapt.go); all zero with adapt off, and then
	// the state encodes as version 1, byte for byte what it always was.
	//
	// ring holds the R-intervals of the latest episodes that ended in a
	// recovery, rn of them, the newest at ring[(rhead+adaptRing-1)%adaptRing].
	ring      [adaptRing]span
	rn, rhead uint8
	// elo is the open episode's longest refused wait (ms after its first
	// throttle, 0: none); fails counts its refused retries.
	elo   int64
	fails uint8
	// aflags holds the open episode's flag* bits; lam sets the idle time
	// a refusal is worth in its plan (plan.go, lambda).
	aflags, lam uint8
	// credit and debt are the refusal budget in sixteenths of a refusal
	// (adapt.go): earned by episodes, spent by refusals.
	credit, debt uint8
	// streak counts the checks of an exact hold's lower bound refused
	// since a trial last succeeded (adapt.go, exactHoldCheck).
	streak uint8
	// miss is the recent share of recovered episodes whose interval lay
	// outside the evidence they started from, in 256ths (adapt.go,
	// noteMiss): the planner's least chance that the evidence changes.
	miss uint8
	// budgetAt is when the step budget last renewed (unix ms, 0: never).
	budgetAt int64
}

func newState() state { return state{lo: minBoundMS, hi: maxBoundMS} }

// observation is one learning outcome, converted to milliseconds.
type observation struct {
	throttle bool
	at       int64 // unix ms
	// sent is when the call was sent (unix ms), 0 when unknown.
	sent int64
	// hint is the trusted advice in ms, or -1 for none.
	hint int64
	// existing is the cooldown the pool applies to this throttle without
	// the learner: the advice or the fallback, within 1 s and the cap.
	existing int64
	// group is the process-local key of the credential's siblings: the
	// same provider, model and quota bucket (adapt, learner.go).
	group uint64
}

// effect is what an observation did to a state.
type effect uint8

const (
	effNone          effect = iota // no evidence: nothing, or a straggler folded into the latest throttle
	effAnchor                      // a throttle opened an episode
	effEvidence                    // a consistent directional observation
	effContradiction               // a sample contradicted the interval, which widened
	effAnomaly                     // a nonincreasing timestamp widened the interval
	effEnded                       // a success ended an episode older than the interval's range
)

// confident reports whether the evidence allows a learned duration: three
// consistent directional observations, and an upper bound proven by a
// recovery. Only a success moves hi below 3,600 s, and a widening moves it
// back, so hi < 3,600 s means proven.
func (s *state) confident() bool { return s.conf >= confidentAt && s.hi < maxBoundMS }

// observe applies o. Applying the same observation twice changes nothing
// the second time, so Observe and Suggest may both apply one event, in
// either order.
func (s *state) observe(o observation) effect {
	t := o.at
	if !o.throttle && s.anchor == 0 {
		return effNone // success without a preceding throttle: no sample
	}
	if s.last != 0 && t <= s.last-burstMS {
		s.widen(0)
		s.closeEpisode()
		s.last = t
		if o.throttle {
			s.openEpisode(o)
		}
		return effAnomaly
	}
	if o.throttle {
		if s.anchor == 0 {
			if s.last != 0 && t < s.last+burstMS && (o.sent == 0 || o.sent < s.last) {
				return effNone // a straggler of the episode just ended: sent before its recovery
			}
			s.openEpisode(o)
			return effAnchor
		}
		s.raiseHint(o)
		if t < s.until && (o.sent == 0 || o.sent < s.last || t < s.last+burstMS) {
			return effNone // admitted before the cooldown ran out, not sent after the latest throttle
		}
		e := t - s.anchor
		if e >= maxBoundMS {
			s.openEpisode(o) // outside the learnable range: a new episode
			return effAnchor
		}
		s.last, s.until, s.decidedAt, s.refused = t, t+max(o.existing, burstMS), 0, t
		if e >= s.hi {
			s.widen(e)
			return effContradiction
		}
		s.lo = max(s.lo, e)
		s.bump()
		return effEvidence
	}
	if t < s.until && (o.sent == 0 || o.sent < s.last) {
		return effNone // admitted before the cooldown ran out, not sent after the latest throttle: not a recovery
	}
	if o.sent != 0 && o.sent < s.anchor {
		return effNone // sent before the episode began, in flight through it: it never waited
	}
	e := t - s.anchor
	s.closeEpisode()
	s.last = t
	if e >= maxBoundMS {
		return effEnded
	}
	if e <= s.lo {
		s.widen(e)
		return effContradiction
	}
	s.hi = min(s.hi, e)
	s.bump()
	return effEvidence
}

func (s *state) openEpisode(o observation) {
	s.anchor, s.last, s.until, s.decidedAt = o.at, o.at, o.at+max(o.existing, burstMS), 0
	s.hintUntil = 0
	s.raiseHint(o)
}

func (s *state) closeEpisode() {
	s.anchor, s.until, s.hintUntil, s.decidedAt = 0, 0, 0, 0
}

func (s *state) raiseHint(o observation) {
	if o.hint >= 0 {
		s.hintUntil = max(s.hintUntil, o.at+o.hint)
	}
}

func (s *state) bump() {
	if s.conf < 255 {
		s.conf++
	}
}

// widen drops confidence and the upper evidence, and opens the interval:
// lo halves (after stretching to hold sample, ms, 0 for none) within 1 s,
// and hi returns to 3,600 s until a recovery proves a new one. lo < hi
// still holds.
func (s *state) widen(sample int64) {
	lo := s.lo
	if sample > 0 {
		lo = min(lo, sample)
	}
	s.lo = max(minBoundMS, lo/2)
	s.hi = maxBoundMS
	s.conf = 0
}

// stale reports whether a learned duration longer than the existing
// cooldown lacks a recent refusal to back it at time t.
func (s *state) stale(t int64) bool { return t-s.refused >= refreshMS }

// target is the wait after the episode's first throttle that the learner
// suggests: the midpoint while trials remain and the interval is wider than
// a second (a trial), else hi.
func (s *state) target() (ms int64, trial bool) {
	if s.steps < MaxTrialSteps && s.hi-s.lo > resolvedMS {
		return s.lo + (s.hi-s.lo+1)/2, true
	}
	return s.hi, false
}

// Encoding: version, lo, hi (uint32), conf, steps, then last, anchor, until,
// hintUntil, decidedAt, refused (int64), big-endian, then the CRC-32 (IEEE)
// of everything before it.
//
// Version 6 (adapt evidence present) appends the ring (adaptRing pairs
// of uint32 lo, hi), rn, rhead, elo (uint32), fails, aflags, lam, credit,
// debt, streak, miss, then budgetAt (int64) before the CRC. Version 5,
// the layout before miss, lacks that byte; version 4, the one before
// streak, also has a zero byte in streak's place. Both still decode.
const (
	stateVersion  = 1
	stateSize     = 1 + 4 + 4 + 1 + 1 + 6*8 + 4
	adaptVersion  = 6
	adaptVersion5 = 5
	adaptVersion4 = 4
	adaptSize     = stateSize + adaptRing*8 + 2 + 4 + 7 + 8
)

// retiredAdaptVersions are the adapt layouts of issue 19's earlier
// learners (2: its first attempt, 3: the one before the planner, whose
// credit and flags meant other things); such a record is replaced, like
// a corrupt one.
func retiredAdaptVersion(v byte) bool { return v == 2 || v == 3 }

var (
	errStateVersion = errors.New("learned state of an unknown version")
	errStateCorrupt = errors.New("learned state is corrupt")
)

func (s *state) encode() []byte {
	adapt := s.hasAdapt()
	b := make([]byte, 0, adaptSize)
	if adapt {
		b = append(b, adaptVersion)
	} else {
		b = append(b, stateVersion)
	}
	b = binary.BigEndian.AppendUint32(b, uint32(s.lo))
	b = binary.BigEndian.AppendUint32(b, uint32(s.hi))
	b = append(b, s.conf, s.steps)
	for _, v := range []int64{s.last, s.anchor, s.until, s.hintUntil, s.decidedAt, s.refused} {
		b = binary.BigEndian.AppendUint64(b, uint64(v))
	}
	if adapt {
		for _, sp := range s.ring {
			b = binary.BigEndian.AppendUint32(b, uint32(sp.lo))
			b = binary.BigEndian.AppendUint32(b, uint32(sp.hi))
		}
		b = append(b, s.rn, s.rhead)
		b = binary.BigEndian.AppendUint32(b, uint32(s.elo))
		b = append(b, s.fails, s.aflags, s.lam, s.credit, s.debt, s.streak, s.miss)
		b = binary.BigEndian.AppendUint64(b, uint64(s.budgetAt))
	}
	return binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b))
}

// decodeState parses and validates an encoded state: errStateVersion for a
// version this binary does not know (a newer binary's, left alone),
// errStateCorrupt for anything else that is not a state it could have
// written.
func decodeState(b []byte) (state, error) {
	if len(b) == 0 {
		return state{}, errStateCorrupt
	}
	size := stateSize
	switch v := b[0]; {
	case v == stateVersion:
	case v == adaptVersion:
		size = adaptSize
	case v == adaptVersion5 || v == adaptVersion4:
		size = adaptSize - 1 // no miss
	case retiredAdaptVersion(v):
		return state{}, errStateCorrupt
	default:
		return state{}, errStateVersion
	}
	if len(b) != size || crc32.ChecksumIEEE(b[:size-4]) != binary.BigEndian.Uint32(b[size-4:]) {
		return state{}, errStateCorrupt
	}
	s := state{
		lo:    int64(binary.BigEndian.Uint32(b[1:])),
		hi:    int64(binary.BigEndian.Uint32(b[5:])),
		conf:  b[9],
		steps: b[10],
	}
	times := []*int64{&s.last, &s.anchor, &s.until, &s.hintUntil, &s.decidedAt, &s.refused}
	for i, p := range times {
		*p = int64(binary.BigEndian.Uint64(b[11+8*i:]))
		if *p < 0 {
			return state{}, errStateCorrupt
		}
	}
	if b[0] != stateVersion {
		a := b[stateSize-4:]
		for i := range s.ring {
			s.ring[i].lo = int64(binary.BigEndian.Uint32(a[8*i:]))
			s.ring[i].hi = int64(binary.BigEndian.Uint32(a[8*i+4:]))
		}
		a = a[8*adaptRing:]
		s.rn, s.rhead = a[0], a[1]
		s.elo = int64(binary.BigEndian.Uint32(a[2:]))
		s.fails, s.aflags, s.lam, s.credit, s.debt, s.streak = a[6], a[7], a[8], a[9], a[10], a[11]
		a = a[12:]
		if b[0] == adaptVersion {
			s.miss, a = a[0], a[1:]
		}
		s.budgetAt = int64(binary.BigEndian.Uint64(a))
		if s.budgetAt < 0 || b[0] == adaptVersion4 && (s.streak != 0 || s.aflags&^flagTrial != 0) {
			return state{}, errStateCorrupt
		}
	}
	if !s.valid() {
		return state{}, errStateCorrupt
	}
	return s, nil
}

// valid checks the invariants observe keeps.
func (s *state) valid() bool {
	switch {
	case s.lo < minBoundMS || s.hi > maxBoundMS || s.lo >= s.hi:
		return false
	case s.steps > MaxTrialSteps:
		return false
	case !s.adaptValid():
		return false
	case s.anchor == 0:
		return s.until == 0 && s.hintUntil == 0 && s.decidedAt == 0
	default:
		return s.last >= s.anchor && s.until > s.anchor &&
			(s.decidedAt == 0 || s.decidedAt >= s.anchor && s.decidedAt <= s.last)
	}
}

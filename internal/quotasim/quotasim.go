// Package quotasim models one credential's quota at a provider whose reset
// time is hidden from the caller: the provider both cooldown simulations
// (learned/sim through the real pool, and learned's own tests of the
// learner alone) send their requests to.
package quotasim

import "time"

// Provider is one credential's quota: quota requests succeed, then every
// request is refused until reset(t) after the first refusal, t being the
// time of that refusal; later refusals do not move the reset. The fields
// measure what a cooldown policy cost.
type Provider struct {
	quota   int
	reset   func(now time.Time) time.Duration
	tokens  int
	resetAt time.Time     // zero while serving
	last    time.Duration // the reset of the latest episode
	run     int           // episodes in a row before it at that reset
	change  int           // how the reset changed (Changes), -1: it did not, or the first episode
	started bool          // an episode began
	wasted  int           // the open episode's refusals after the first

	// Wasted counts the refusals after the first of an episode.
	Wasted int
	// Idle sums the cooldown left after each real reset: the time from
	// the reset to Release.
	Idle time.Duration
	// Release is the caller's latest release of this credential (when its
	// cooldown ends); the caller keeps it current.
	Release time.Time
	// ByRun splits Idle and Wasted by the episode's run (Runs), those of
	// ended episodes only.
	ByRun [Runs]Episodes
	// ByChange splits the ended episodes of run 0 that met a reset other
	// than the episode before (not a credential's first) by how it
	// changed (Changes).
	ByChange [Changes]Episodes
}

// The ways a reset changes, ByChange's buckets.
const (
	// FellBelowHalf: to less than half the reset before.
	FellBelowHalf = iota
	// Fell: to half of it or more.
	Fell
	// Rose: to less than one and a half times it.
	Rose
	// RoseByHalf: to one and a half times it or more.
	RoseByHalf
	// Changes is how many buckets ByChange has.
	Changes
)

// ChangeNames names the Changes, in order.
var ChangeNames = [Changes]string{"fell below half", "fell, to half or more", "rose by less than half", "rose by half or more"}

// changeOf classifies a reset r after last.
func changeOf(last, r time.Duration) int {
	switch {
	case 2*r < last:
		return FellBelowHalf
	case r < last:
		return Fell
	case 2*r < 3*last:
		return Rose
	default:
		return RoseByHalf
	}
}

// Runs is how many buckets ByRun has: an episode's run is how many
// episodes in a row before it met the same reset, 0 for a credential's
// first and for one whose reset changed, and runs of Runs-1 or more share
// the last bucket.
const Runs = 6

// Episodes is what the ended episodes of one run bucket cost: those
// whose reset came, so that their idle time is known.
type Episodes struct {
	Ended int
	// Wasted counts their refusals after the first, Idle their idle time.
	Wasted int
	Idle   time.Duration
}

// Add adds o's episodes to e's.
func (e *Episodes) Add(o Episodes) {
	e.Ended += o.Ended
	e.Wasted += o.Wasted
	e.Idle += o.Idle
}

// New returns a Provider with a full quota.
func New(quota int, reset func(now time.Time) time.Duration) *Provider {
	return &Provider{quota: quota, reset: reset, tokens: quota}
}

// Call serves one request at now and reports whether it succeeded.
func (p *Provider) Call(now time.Time) bool {
	if !p.resetAt.IsZero() {
		if now.Before(p.resetAt) {
			p.Wasted++
			p.wasted++
			return false
		}
		p.settle()
	}
	if p.tokens > 0 {
		p.tokens--
		return true
	}
	r := p.reset(now)
	p.change = -1
	switch {
	case p.started && r == p.last:
		p.run++
	case p.started:
		p.run, p.change = 0, changeOf(p.last, r)
	default:
		p.run = 0
	}
	p.last, p.started = r, true
	p.resetAt = now.Add(r)
	return false
}

// ResetAt is the hidden reset of the open episode, zero while the quota
// serves. Only an oracle may read it: a cooldown policy must not.
func (p *Provider) ResetAt() time.Time { return p.resetAt }

// Finish ends the measurement at end: an episode whose reset came before
// end counts its idle time up to end at most.
func (p *Provider) Finish(end time.Time) {
	if !p.resetAt.IsZero() && !p.resetAt.After(end) {
		if p.Release.After(end) {
			p.Release = end
		}
		p.settle()
	}
}

// settle ends an episode: the credential was idle from the real reset to
// its release, and its quota is full again.
func (p *Provider) settle() {
	e := Episodes{Ended: 1, Wasted: p.wasted}
	p.wasted = 0
	if p.Release.After(p.resetAt) {
		e.Idle = p.Release.Sub(p.resetAt)
		p.Idle += e.Idle
	}
	p.ByRun[min(p.run, Runs-1)].Add(e)
	if p.change >= 0 {
		p.ByChange[p.change].Add(e)
	}
	p.resetAt = time.Time{}
	p.tokens = p.quota
}

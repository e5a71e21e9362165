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
	if p.started && r == p.last {
		p.run++
	} else {
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
	b := &p.ByRun[min(p.run, Runs-1)]
	b.Ended++
	b.Wasted += p.wasted
	p.wasted = 0
	if p.Release.After(p.resetAt) {
		p.Idle += p.Release.Sub(p.resetAt)
		b.Idle += p.Release.Sub(p.resetAt)
	}
	p.resetAt = time.Time{}
	p.tokens = p.quota
}

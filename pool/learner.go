package pool

import "time"

// LearnEvent is what the pool tells a Learner about one natural outcome of
// an inference call. Catalog probes are never reported.
type LearnEvent struct {
	// Provider is the pool name (api, zdr).
	Provider string
	// Model is the upstream model; "" stands for null.
	Model string
	// QuotaBucket is the configured quota bucket; "" stands for null.
	QuotaBucket string
	// Identity is an opaque, credential-keyed HMAC digest of provider,
	// model and quota bucket (hex). It is stable across processes for the
	// same key and changes when the key is rotated. Learners store only
	// this, never the names above.
	Identity string
	// Outcome is the classified outcome.
	Outcome Outcome
	// At is the wall-clock time of the observation (learned state is
	// shared across processes, so monotonic readings will not do).
	At time.Time
	// Sent is when the call was sent, zero when unknown: a success sent
	// before the episode's first throttle was in flight through it and
	// is no recovery.
	Sent time.Time
	// RetryAfter is trusted, normalized reset advice in seconds when
	// HasRetryAfter is set: finite and nonnegative.
	RetryAfter    float64
	HasRetryAfter bool
}

// Learner learns cooldown durations from natural outcomes. The pool calls
// Observe for every recorded inference outcome and Suggest when a throttle
// needs a cooldown duration. A nil Learner, or Suggest answering ok=false,
// leaves the existing cooldown in force. Implementations must be safe for
// concurrent use and must never block on the network for long: the pool
// calls them on the request path.
type Learner interface {
	Observe(ev LearnEvent)
	// Suggest returns the learned duration for the throttle ev, already
	// bounded below by trusted advice, or ok=false to use the existing
	// cooldown. The pool caps the result at MODEL_COOLDOWN_MAX_SECONDS;
	// it does not raise a positive result to MinRest, so a learner that
	// answers less than a second means it.
	Suggest(ev LearnEvent) (d time.Duration, ok bool)
}

// A SiblingLearner is a Learner that may end early the cooldowns a
// credential's siblings already hold when the credential's reset fell
// (learned_cooldown.adapt: a sibling's fall). After each natural success
// in a model scope the pool asks Fell; only when it reports true does it
// ask Release for each other credential of the pool still cooling in the
// same scope. A Release never lengthens a cooldown and adds no request:
// the sibling's next natural request is let through earlier.
type SiblingLearner interface {
	Learner
	// Fell reports whether the success ev, just observed, proved that the
	// reset fell, so that the siblings should try the shorter wait.
	Fell(ev LearnEvent) bool
	// Release returns how much longer, from ev.At, the sibling ev names
	// (its identity, provider, model and bucket; ev.Outcome is ignored)
	// should rest, or ok=false to leave its cooldown as it is.
	Release(ev LearnEvent) (rest time.Duration, ok bool)
}

package pool

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrNoCredentials is Select's result when no candidate is configured: an
// empty configuration or candidate list. It is distinct from every
// cooldown error; decisions answers it 503 no_credentials.
var ErrNoCredentials = errors.New("no credentials configured")

// NoCredentialsError is ErrNoCredentials for one pool, with the reason each
// configured credential cannot be used ("credential team-a: env
// PROVIDER_KEY_A is not set"): names of variables and files, never keys.
type NoCredentialsError struct {
	Pool     string
	Unusable []string
}

func (e *NoCredentialsError) Error() string {
	if len(e.Unusable) == 0 {
		return fmt.Sprintf("pool %s has no credentials configured", e.Pool)
	}
	return fmt.Sprintf("pool %s has no usable credential: %s", e.Pool, strings.Join(e.Unusable, "; "))
}

// Unwrap returns ErrNoCredentials.
func (e *NoCredentialsError) Unwrap() error { return ErrNoCredentials }

// CooldownExhaustedError says every candidate credential is cooling: the
// spec's ModelCooldownExhausted. There is no hidden dispatch, wait or
// retry; the caller answers 429, or waits RetryAfter itself when its
// deadline allows.
type CooldownExhaustedError struct {
	// Scoped is set on the scoped path (429 model_cooldown); the legacy
	// path answers 429 rate_limit_exceeded.
	Scoped bool
	// RetryAfter is the time until the earliest candidate's release (which
	// waits for its legacy rest, auth observation and model or bucket
	// observation alike), at most the configured maximum. It is exact:
	// only the Retry-After header rounds it up.
	RetryAfter time.Duration
	// Fallback, on the legacy path with Options.FirstKeyFallback, names the
	// first candidate: the spec's legacy first-key fallback offers it
	// although it rests. The pool knows no requests, so the caller decides:
	// it may send to it once per request, and only when that request has
	// not sent to it already; after that it treats the pool as all resting
	// (wait for RetryAfter inside its deadline, else answer 429).
	Fallback string
}

// Error names no model, bucket or key.
func (e *CooldownExhaustedError) Error() string {
	if e.Scoped {
		return fmt.Sprintf("every eligible credential is cooling down for this model; earliest release in %v", e.RetryAfter)
	}
	return fmt.Sprintf("every eligible credential is resting; earliest release in %v", e.RetryAfter)
}

// CapacityError says the cooldown store is full and new scoped admission
// fails closed until its overflow deadline: the spec's
// ModelCooldownCapacity (503). It is not a credential-wide cooldown.
type CapacityError struct {
	// RetryAfter is the time until the overflow deadline, at most the
	// configured maximum.
	RetryAfter time.Duration
}

// Error says how long admission fails closed.
func (e *CapacityError) Error() string {
	return fmt.Sprintf("cooldown store is full; admission fails closed for %v", e.RetryAfter)
}

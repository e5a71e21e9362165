// Package pool holds provider credentials and decides which one may serve a
// request: the legacy credential-wide rest map, and the model-scoped
// cooldown store of spec/model-cooldown.md (model and quota-bucket scopes,
// HMAC identities, bounded state, the capacity guard). It never waits and
// never sends a request; callers select, call the provider, and record the
// outcome.
//
// # Paths
//
// A Pool answers on one of two paths, chosen per call:
//
//   - Scoped: MODEL_COOLDOWN_ENABLED and the Scope names a model or a
//     configured quota bucket. A credential is excluded while its model
//     (or bucket) observation, its credential-wide auth observation or its
//     legacy rest is live. All cooling is a *CooldownExhaustedError with
//     Scoped set (429 model_cooldown); a full store is a *CapacityError
//     (503 model_cooldown_capacity).
//   - Legacy: model cooldown disabled, or an empty Scope. Only the legacy
//     provider-wide rest map counts; all resting is a legacy
//     *CooldownExhaustedError (429 rate_limit_exceeded); with
//     Options.FirstKeyFallback it names the first candidate as its
//     Fallback, which the caller may send to once per request.
//
// # Readings of the spec
//
// Where the spec leaves a choice, this package reads it so:
//
//   - FirstKeyFallback applies wherever model-scoped admission is not in
//     force: with model cooldown disabled, and on the unscoped path, which
//     the spec says keeps the disabled path's "selection and exceptions".
//     It never applies on the scoped path, where it would be the secret
//     dispatch the spec forbids.
//   - The effective quota bucket is the Scope's bucket when the pool's
//     configuration names it, else the configured bucket of the Scope's
//     model, else none. An unconfigured bucket name from a caller is
//     ignored: buckets come from configuration only.
//   - A legacy-path success clears the credential's legacy rest (the
//     legacy pools' rule); a scoped success never does.
//   - Any delay below one second, zero included, is kept as one second;
//     delays above it are kept exactly and round up only in Retry-After.
//   - A new rest never shortens a live one: the later release wins. Only
//     a SiblingLearner's Release does (below).
//   - Credential identity is the key: two configured credentials with the
//     same key in one pool share its rests and observations; the same key
//     in two pools shares nothing.
//   - A scoped Available returns nil while the capacity guard is active
//     (new admission fails closed); Select then says why.
//   - PreferActive follows inference successes only; a catalog fetch is no
//     evidence that the key serves requests.
//   - The learner sees every non-catalog observation with a model or
//     bucket, on both paths, first Observe and then, for a throttle,
//     Suggest; a suggestion applies on both paths as min(maximum,
//     max(valid advice, suggestion)), never below one second.
//   - After a scoped inference success, a SiblingLearner (learned
//     cooldowns with adapt on) is asked whether the success proved a fall
//     of the reset; if so, each other credential still cooling in the same
//     scope rests only as long as its Release says, never longer, and a
//     rest renewed meanwhile by a newer throttle is kept. The pool logs
//     "credential cooldown ended early: a sibling's reset fell" with the
//     credential's name.
//
// # Storage
//
// Every pool of the process shares one Store: salted HMAC-SHA-256
// identities, monotonic releases, at most DefaultStoreLimit live
// observations, pruned from a min-heap on every read and write. It holds
// no key, model or bucket name; logs name credentials by their configured
// name only.
//
// It imports no other rotor package but internal/ helpers. It declares the
// Learner interface it needs; cmd/rotor wires package learned in.
package pool

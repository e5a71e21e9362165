// Package learned learns cooldown durations from natural throttle and
// recovery outcomes (shared/spec/learned-cooldown.md). It sends no probes and
// no provider requests: the pool reports the outcomes it already records
// (pool.LearnEvent) and asks for a duration when a throttle needs one. The
// learner only ever adjusts that duration; route order, credential
// preference and replay permission stay with their existing policies, and
// learning never enables model cooldown.
//
// The package holds:
//
//   - the strict policy parser (ParsePolicy, ParseSettings): which
//     provider (pool), model and quota-bucket scopes learn;
//   - the Learner (New), which implements pool.Learner in the modes off,
//     shadow and apply;
//   - the Store interface, the spec's private storage domain with its two
//     operations get and put, and MemoryStore, the process-local default.
//     The SQLite store lives in package ledger and is held to the same
//     rules by the conformance suite in learned/storetest.
//
// # How the evidence rules are read
//
// The learner estimates R, the time from the first throttle of an episode
// (a throttle with no episode open) until the quota serves again. Every
// credential, provider, model and quota bucket has its own state, stored
// under the pool's credential-keyed HMAC digest (LearnEvent.Identity); no
// name, key or prefix is ever stored. A state holds an interval lo < R <= hi
// that starts at 1-3,600 s.
//
//   - Waits are measured from the episode's first throttle, not the latest:
//     a refused request does not move a provider's reset, so every wait is a
//     bound on the same R, and the trials of one episode bisect it.
//   - A later throttle in the episode, at a failed wait e, raises lo to e. A
//     genuine success, at an elapsed wait e, lowers hi to e and ends the
//     episode. A success with no episode open, and every other outcome
//     (credential rejections, caller errors, cancellations, transport and
//     provider failures; catalog probes are never reported), teach nothing.
//   - Genuine means admitted after the cooldown of the episode's latest
//     throttle ran out: the pool does not dispatch to a cooling credential,
//     so an outcome before then is a call admitted earlier (an in-flight
//     completion or a concurrent refusal) and is folded into that throttle.
//     So are throttles less than a second apart.
//   - An observation that does not contradict the interval is a consistent
//     directional observation and adds one to the confidence. A throttle at
//     e >= hi or a success at e <= lo contradicts it; an observation more
//     than a second older than the latest one is a nonincreasing timestamp.
//     Both widen the interval (lo halves, to at least 1 s; hi returns to
//     3,600 s) and drop the confidence to zero.
//   - A state is confident with three consistent directional observations
//     and an upper bound proven by a recovery (hi below 3,600 s, which only
//     a success sets). Apply uses the existing cooldown until then.
//   - Confident, the cooldown after a throttle is a midpoint trial: the time
//     left until (lo+hi)/2 after the episode's first throttle, at least 1 s.
//     Each applied trial is one step; a state allows at most 12 (about the
//     halvings that take 1-3,600 s below a second). After the last one, or
//     once hi-lo is a second or less, the learner answers hi, the shortest
//     wait proven to have worked.
//   - A learned wait longer than the existing cooldown rests on refusals. If
//     none was seen for 15 minutes, the learner declines once and lets the
//     existing cooldown gather fresh evidence: a refusal confirms the wait,
//     a recovery below lo contradicts it. Without this, a state whose steps
//     are spent would keep a wait learned during a slow spell for the rest
//     of its seven days.
//   - Trusted reset advice (LearnEvent.RetryAfter) is a hard minimum for the
//     rest of the episode, even above 3,600 s; invalid or nonfinite advice
//     is ignored. An applied duration is min(cap, max(advice, suggestion)),
//     the cap being MODEL_COOLDOWN_MAX_SECONDS. A trial that the advice
//     overrides spends no step.
//
// With learned_cooldown.adapt (Config.Adapt, off by default) apply mode
// departs from these rules where a moving reset needs it; adapt.go lists
// each departure.
//
// Timestamps are LearnEvent.At in wall-clock milliseconds, because a shared
// store is read by several processes. Processes sharing one must keep their
// clocks within a second of each other; otherwise the learner keeps
// dropping its confidence, which is safe.
//
// Package learned imports no rotor package but pool (for the Learner
// interface and its event types) and internal/ helpers.
package learned

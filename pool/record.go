package pool

import (
	"context"
	"encoding/hex"
	"log/slog"
	"math"
	"net/http"
	"time"

	"github.com/rotorhq/rotor/internal/secret"
)

// Observation is the outcome of one upstream call, as Record needs it.
type Observation struct {
	// Scope is the request's scope, the same that selection received. A
	// catalog fetch made for a scoped request passes that scope, so that
	// the scoped rules below apply to it.
	Scope
	// Status is the HTTP status, 0 when none was read.
	Status int
	// Err is the transport or cancellation error when no status was read.
	Err error
	// Outcome is the caller's classification; OutcomeUnknown classifies
	// Status and Err with Classify. A supplied outcome overrides the
	// status, cancellation included.
	Outcome Outcome
	// CredentialWideAuth says whether a credential rejection is genuine
	// credential-wide auth evidence; nil applies the default rule: a 401
	// is, a 403 is not (endpoint or model permission denial).
	CredentialWideAuth *bool
	// RetryAfter is trusted, normalized reset advice in seconds relative
	// to the observation, used when HasRetryAfter is set. Advice that is
	// not finite and nonnegative is invalid and the fallback applies.
	RetryAfter    float64
	HasRetryAfter bool
	// Sent is when the call was sent, zero when unknown. A success sent
	// before the cooldown it would clear began (a long call in flight
	// while another call was throttled) clears nothing, and a learner
	// takes it for no recovery: it never waited.
	Sent time.Time
	// Catalog marks a catalog fetch (GET /v1/models), not inference. On
	// the scoped path it carries no model quota evidence: only a genuine
	// credential-wide auth rejection cools the credential (every model).
	// Learners never see catalog fetches.
	Catalog bool
}

// outcome returns the effective outcome of o.
func (o Observation) outcome() Outcome {
	if o.Outcome != OutcomeUnknown {
		return o.Outcome
	}
	return Classify(o.Status, o.Err)
}

// wideAuth reports whether o, a credential rejection, is genuine
// credential-wide auth evidence.
func (o Observation) wideAuth() bool {
	if o.CredentialWideAuth != nil {
		return *o.CredentialWideAuth
	}
	return o.Status == http.StatusUnauthorized
}

// advice returns the valid advice of o as a duration no longer than limit.
func (o Observation) advice(limit time.Duration) (time.Duration, bool) {
	a := o.RetryAfter
	if !o.HasRetryAfter || math.IsNaN(a) || math.IsInf(a, 0) || a < 0 {
		return 0, false
	}
	if a >= limit.Seconds() {
		return limit, true
	}
	return time.Duration(a * float64(time.Second)), true
}

// Record records the outcome of one upstream call made with the credential
// called name; unknown names are ignored. It never waits, fails or panics.
//
// Scoped (model cooldown enabled and the scope has a model or bucket):
//   - a throttle cools only this credential for this model, or for the
//     configured quota bucket shared by its member models;
//   - a genuine credential-wide auth rejection cools every model of the
//     credential and also rests it in the legacy map with the same
//     deadline, so unscoped selection observes it;
//   - a success clears only this scope's observation: not another model,
//     not an auth rejection, not a legacy rest, not the capacity guard;
//     a SiblingLearner that says the success proved a fall may end the
//     other credentials' cooldowns in this scope early (Release);
//   - a catalog fetch counts only as a genuine auth rejection;
//   - caller errors (a bare 402 included), transport failures,
//     cancellation and provider failures change nothing.
//
// Unscoped (or disabled), the legacy provider-wide rules apply and model
// state is left unchanged: a throttle or a genuine credential-wide auth
// rejection rests the credential in the legacy map; a success clears its
// legacy rest.
//
// Durations: valid advice, else 60 s for a throttle, AuthRest for an auth
// rejection at inference, CatalogTTL for one at a catalog fetch; MinRest
// for zero advice (a positive fraction of a second is kept), at most the
// configured maximum. A throttle's duration may come
// from the Learner: min(max, max(valid advice, suggestion)); the
// suggestion itself is taken as it is (a learner bounds its own and may
// rest a credential less than a second, up to the retry it planned). A new rest never shortens a live one; only a sibling's
// Release does.
func (p *Pool) Record(name string, obs Observation) {
	i, ok := p.byName[name]
	if !ok {
		return
	}
	out := obs.outcome()
	bucket, kind := p.resolve(obs.Scope)
	scoped := p.enabled && kind != scopeNone
	at := p.clk.Now()
	now := p.store.since(at)

	var suggestion time.Duration
	var suggested bool
	var ev LearnEvent // what the learner was told, if anything
	if p.learner != nil && !obs.Catalog && kind != scopeNone {
		ev = LearnEvent{
			Provider:      p.name,
			Model:         obs.Model,
			QuotaBucket:   bucket,
			Identity:      learnIdentity(p.creds[i].Key, p.name, obs.Model, bucket),
			Outcome:       out,
			At:            at,
			Sent:          obs.Sent,
			RetryAfter:    obs.RetryAfter,
			HasRetryAfter: obs.HasRetryAfter,
		}
		p.observe(ev)
		if out == OutcomeThrottled {
			suggestion, suggested = p.suggest(ev)
		}
	}

	switch out {
	case OutcomeSuccess:
		if !obs.Catalog {
			p.active.Store(int32(i) + 1)
		}
		sent := int64(math.MaxInt64) // unknown: clears
		if !obs.Sent.IsZero() {
			sent = p.store.since(obs.Sent)
		}
		switch {
		case !scoped:
			if r := p.legacy[p.rest[i]]; r.since.Load() <= sent {
				r.Store(0)
			}
		case !obs.Catalog:
			k := obsKey{cred: p.ids[i], scope: p.scopeID(obs.Scope, bucket, kind)}
			p.store.mu.Lock()
			p.store.removeIfBefore(k, sent, now)
			p.store.mu.Unlock()
			if ev.Identity != "" {
				p.releaseSiblings(ev, i, k.scope, now)
			}
		}
	case OutcomeThrottled:
		if scoped && obs.Catalog {
			return // a catalog throttle is no model quota evidence
		}
		d := p.cooldown(obs, ThrottleRest, suggestion, suggested)
		if !scoped {
			p.restLegacy(i, now, now+int64(d))
			p.logCooling(name, "legacy", d)
			return
		}
		k := obsKey{cred: p.ids[i], scope: p.scopeID(obs.Scope, bucket, kind)}
		p.observeScoped(name, kind.String(), k, now, d, p.adviceFloor(obs, now))
	case OutcomeCredentialRejected:
		if !obs.wideAuth() {
			return
		}
		fallback := p.opts.AuthRest
		if obs.Catalog {
			fallback = p.opts.CatalogTTL
		}
		d := p.cooldown(obs, fallback, 0, false)
		p.restLegacy(i, now, now+int64(d))
		if !scoped || !p.observeScoped(name, "auth", obsKey{cred: p.ids[i], scope: p.store.authScope}, now, d, p.adviceFloor(obs, now)) {
			p.logCooling(name, "legacy", d)
		}
	}
}

// cooldown returns the duration of one observation.
func (p *Pool) cooldown(obs Observation, fallback, suggestion time.Duration, suggested bool) time.Duration {
	advice, valid := obs.advice(p.cap())
	d := fallback
	if valid {
		d = advice
	}
	if suggested && suggestion > 0 {
		d = suggestion
		if valid {
			d = max(d, advice)
		}
	}
	if suggested && suggestion > 0 && d == suggestion {
		return min(d, p.cap()) // the learner bounds its own below
	}
	return min(atLeastMinRest(d), p.cap())
}

// atLeastMinRest is d, or MinRest for a zero delay: a positive fraction of
// a second is kept as it is (it rounds up only in Retry-After), zero
// would redispatch at once (spec/model-cooldown.md, Evidence and scope).
func atLeastMinRest(d time.Duration) time.Duration {
	if d <= 0 {
		return MinRest
	}
	return d
}

// restLegacy rests credential i in the legacy map until the later of its
// current rest and until, noting now as the latest rest's time.
func (p *Pool) restLegacy(i int, now, until int64) {
	r := p.legacy[p.rest[i]]
	for {
		cur := r.since.Load()
		if cur >= now || r.since.CompareAndSwap(cur, now) {
			break
		}
	}
	for {
		cur := r.Load()
		if cur >= until || r.CompareAndSwap(cur, until) {
			return
		}
	}
}

// adviceFloor returns the end of the rest obs's trusted advice sets, as
// cooldown bounds it, or 0 when obs has no valid advice: a release never
// ends a cooldown before it.
func (p *Pool) adviceFloor(obs Observation, now int64) int64 {
	advice, valid := obs.advice(p.cap())
	if !valid {
		return 0
	}
	return now + int64(min(atLeastMinRest(advice), p.cap()))
}

// observeScoped stores one model-store observation, resting until now+d
// and never released before floor, and logs it. It reports whether the
// store kept it.
func (p *Pool) observeScoped(name, kind string, k obsKey, now int64, d time.Duration, floor int64) bool {
	st := p.store
	st.mu.Lock()
	kept, started := st.put(k, now+int64(d), floor, now)
	overflow := st.overflowUntil(now)
	st.mu.Unlock()
	if kept {
		p.logCooling(name, kind, d)
	}
	if started {
		p.log.Warn("cooldown store full; new scoped admission fails closed",
			"pool", p.name, "capacity", st.limit,
			"seconds", time.Duration(overflow-now).Seconds())
	}
	return kept
}

func (p *Pool) logCooling(name, kind string, d time.Duration) {
	if !p.log.Enabled(context.Background(), slog.LevelInfo) {
		return // spare the hot path the arguments' allocations
	}
	p.log.Info("credential cooling down",
		"pool", p.name, "credential", name, "scope_kind", kind, "seconds", d.Seconds())
}

// observe and suggest shield Record from a learner's panic: observation
// must never interrupt an already produced response.
func (p *Pool) observe(ev LearnEvent) {
	defer p.recoverLearner()
	p.learner.Observe(ev)
}

func (p *Pool) suggest(ev LearnEvent) (d time.Duration, ok bool) {
	defer p.recoverLearner()
	return p.learner.Suggest(ev)
}

// releaseSiblings asks a SiblingLearner whether credential i's success ev
// proved a fall, and if so ends early the cooldowns the pool's other
// credentials hold in the same scope, where the learner says so.
func (p *Pool) releaseSiblings(ev LearnEvent, i int, scope digest, now int64) {
	sl, ok := p.learner.(SiblingLearner)
	if !ok || !p.fell(sl, ev) {
		return
	}
	for j := range p.creds {
		if j == i {
			continue
		}
		k := obsKey{cred: p.ids[j], scope: scope}
		p.store.mu.Lock()
		p.store.prune(now)
		was := p.store.lookup(k)
		p.store.mu.Unlock()
		if was <= now {
			continue // not cooling here
		}
		sib := ev
		sib.Identity = learnIdentity(p.creds[j].Key, ev.Provider, ev.Model, ev.QuotaBucket)
		rest, ok := p.release(sl, sib)
		if !ok {
			continue
		}
		p.store.mu.Lock()
		done := p.store.shorten(k, was, now+int64(max(rest, 0)), now)
		p.store.mu.Unlock()
		if done && p.log.Enabled(context.Background(), slog.LevelInfo) {
			p.log.Info("credential cooldown ended early: a sibling's reset fell",
				"pool", p.name, "credential", p.creds[j].Name, "seconds", max(rest, 0).Seconds())
		}
	}
}

func (p *Pool) fell(sl SiblingLearner, ev LearnEvent) bool {
	defer p.recoverLearner()
	return sl.Fell(ev)
}

func (p *Pool) release(sl SiblingLearner, ev LearnEvent) (rest time.Duration, ok bool) {
	defer p.recoverLearner()
	return sl.Release(ev)
}

func (p *Pool) recoverLearner() {
	if recover() != nil {
		p.log.Warn("learner failed; existing cooldown applies", "pool", p.name)
	}
}

// learnIdentity is the learner's opaque identity of a credential, provider,
// model and bucket: HMAC-SHA-256 keyed by the credential over a
// length-prefixed encoding, hex. It is stable across processes and changes
// when the key is rotated.
func learnIdentity(key secret.Value, provider, model, bucket string) string {
	var b []byte
	for _, f := range [...]string{"rotor learned-cooldown v1", provider, model, bucket} {
		b = appendField(b, f)
	}
	return hex.EncodeToString(key.HMAC(b))
}

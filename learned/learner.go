package learned

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/defaults"
	"github.com/rotorhq/rotor/pool"
)

// Mode is LEARNED_COOLDOWN_MODE.
type Mode string

// The modes. Off is the default.
const (
	// ModeOff learns nothing and performs no storage operations or reports.
	ModeOff Mode = "off"
	// ModeShadow learns and logs what it would suggest, and changes no
	// cooldown: Suggest always answers ok=false.
	ModeShadow Mode = "shadow"
	// ModeApply uses the learned duration once confident, and the existing
	// cooldown otherwise.
	ModeApply Mode = "apply"
)

// Defaults of Config.
const (
	DefaultMaxSeconds      = defaults.MaxCooldownSeconds
	DefaultFallbackSeconds = 60
	DefaultStoreTimeout    = time.Second
)

// ErrInvalidMode is what ParseMode returns for anything but off, shadow,
// apply or blank.
var ErrInvalidMode = errors.New("invalid learned cooldown mode")

// The settings names used in warnings.
const (
	settingMode   = "LEARNED_COOLDOWN_MODE"
	settingPolicy = "LEARNED_COOLDOWN_POLICY_JSON"
)

// ParseMode parses LEARNED_COOLDOWN_MODE: blank is off.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.TrimSpace(s)); m {
	case "":
		return ModeOff, nil
	case ModeOff, ModeShadow, ModeApply:
		return m, nil
	}
	return ModeOff, ErrInvalidMode
}

// ParseSettings resolves LEARNED_COOLDOWN_MODE and
// LEARNED_COOLDOWN_POLICY_JSON as the spec says. Blank values are the
// defaults (off, "{}"). A malformed mode or policy disables tuning: it
// returns ModeOff and logs one warning naming the setting, never the value.
// In off mode the policy is not read at all.
func ParseSettings(mode, policyJSON string, logger *slog.Logger) (Mode, *Policy) {
	if logger == nil {
		logger = discardLogger
	}
	m, err := ParseMode(mode)
	if err != nil {
		logger.Warn("learned cooldown disabled: malformed setting", "setting", settingMode)
		return ModeOff, &Policy{}
	}
	if m == ModeOff {
		return ModeOff, &Policy{}
	}
	p, err := ParsePolicy(policyJSON)
	if err != nil {
		logger.Warn("learned cooldown disabled: malformed setting", "setting", settingPolicy)
		return ModeOff, &Policy{}
	}
	return m, p
}

// Config configures a Learner. Every field is optional.
type Config struct {
	// Mode is off (also for the zero value), shadow or apply. Any other
	// value is off, with one warning.
	Mode Mode
	// Policy lists the scopes that learn; nil learns nothing.
	Policy *Policy
	// Store holds learned state; nil is a new MemoryStore of
	// StoreCapacity records (none is made in off mode).
	Store Store
	// MaxSeconds is MODEL_COOLDOWN_MAX_SECONDS, the cap of every applied
	// duration; <= 0 means DefaultMaxSeconds.
	MaxSeconds int64
	// FallbackSeconds is the pool's existing cooldown for a throttle
	// without trusted advice; <= 0 means DefaultFallbackSeconds. The
	// learner uses it to know when a credential could be tried again.
	FallbackSeconds int64
	// StoreTimeout bounds each storage operation on the request path;
	// <= 0 means DefaultStoreTimeout. A timeout counts as unavailable.
	StoreTimeout time.Duration
	// Logger receives the shadow reports and the fallback warnings; nil
	// discards them.
	Logger *slog.Logger
	// Clock reads the time for storage expiry and for events without a
	// time; nil is the wall clock.
	Clock clock.Clock
	// Adapt is learned_cooldown.adapt (default off): in apply mode, the
	// learner tracks a reset that moves (see adapt.go). Off, apply is
	// exactly the spec's rules with rotor's four departures.
	Adapt bool
	// SpecLiteral drops rotor's departures that change what apply
	// decides (the 15-minute refresh, a trial needing a recovery): the
	// spec's rules to the letter. Only the simulation sets it, to show
	// why the departures exist.
	SpecLiteral bool
}

// failure is a kind of storage fallback; each is warned about once.
type failure int

const (
	failUnavailable failure = iota
	failStaleRevision
	failCapacity
	failInvalidState
	failIdentity
	numFailures
)

var failureNames = [numFailures]string{"unavailable", "stale_revision", "capacity", "invalid_state", "invalid_identity"}

// lockStripes is the number of mutexes guarding per-identity
// read-modify-write; identities hash onto them.
const lockStripes = 64

// Learner learns cooldown durations per identity and implements
// pool.Learner. It is safe for concurrent use; a nil *Learner is off.
type Learner struct {
	mode     Mode
	policy   *Policy
	store    Store
	capMS    int64
	fallback int64 // ms
	timeout  time.Duration
	adapt    bool
	literal  bool
	log      *slog.Logger
	clock    clock.Clock

	seed  maphash.Seed
	locks [lockStripes]sync.Mutex

	// falls holds, per sibling group, the latest fall of the reset one
	// credential saw, for the others to try (adapt; memory only).
	fallMu sync.Mutex
	falls  map[uint64]*fall
	// rises holds, per sibling group, the latest retries credentials had
	// refused, and climbs their latest climbs, for the others to skip;
	// checks their pending checks of a fall, for the others to split.
	rises, climbs, checks siblingEvents
	// starts holds, per sibling group, when credentials' latest episodes
	// began, so that an episode knows whether it leads a round.
	starts siblingEvents
	// noLead turns a round's lead off, for tests that measure another
	// sibling mechanism alone.
	noLead bool
	// forgotAt is when the memories above last dropped what no episode
	// can use any more (ms).
	forgotAt atomic.Int64

	warned [numFailures]atomic.Bool
	stats  counters
}

var _ pool.SiblingLearner = (*Learner)(nil)

type counters struct {
	observations, evidence, contradictions, suggestions, trials atomic.Uint64
	failures                                                    [numFailures]atomic.Uint64
}

var discardLogger = slog.New(slog.NewTextHandler(io.Discard, nil))

// New returns a Learner for cfg.
func New(cfg Config) *Learner {
	l := &Learner{
		mode:     cfg.Mode,
		policy:   cfg.Policy,
		store:    cfg.Store,
		capMS:    DefaultMaxSeconds * 1000,
		fallback: DefaultFallbackSeconds * 1000,
		timeout:  cfg.StoreTimeout,
		adapt:    cfg.Adapt,
		literal:  cfg.SpecLiteral,
		log:      cfg.Logger,
		clock:    cfg.Clock,
		seed:     maphash.MakeSeed(),
	}
	if l.log == nil {
		l.log = discardLogger
	}
	switch l.mode {
	case "":
		l.mode = ModeOff
	case ModeOff, ModeShadow, ModeApply:
	default:
		l.log.Warn("learned cooldown disabled: malformed setting", "setting", settingMode)
		l.mode = ModeOff
	}
	if cfg.MaxSeconds > 0 {
		l.capMS = min(cfg.MaxSeconds, maxHintSeconds) * 1000
	}
	if cfg.FallbackSeconds > 0 {
		l.fallback = min(cfg.FallbackSeconds, maxHintSeconds) * 1000
	}
	if l.timeout <= 0 {
		l.timeout = DefaultStoreTimeout
	}
	if l.clock == nil {
		l.clock = clock.Real()
	}
	if l.policy == nil {
		l.policy = &Policy{}
	}
	if l.store == nil && l.mode != ModeOff {
		l.store = NewMemoryStore(StoreCapacity)
	}
	return l
}

// Mode returns the effective mode.
func (l *Learner) Mode() Mode {
	if l == nil {
		return ModeOff
	}
	return l.mode
}

// Adapt reports whether learned_cooldown.adapt is in force: apply mode
// with adapt on.
func (l *Learner) Adapt() bool { return l != nil && l.mode == ModeApply && l.adapt }

// Observe records one natural outcome. Only throttles and successes in a
// policy scope teach; everything else returns at once. Storage problems
// drop the observation with one warning per kind.
func (l *Learner) Observe(ev pool.LearnEvent) {
	o, id, ok := l.admit(ev)
	if !ok {
		return
	}
	l.stats.observations.Add(1)
	mu := l.lock(id)
	defer mu.Unlock()
	var eff effect
	if _, saved, _ := l.update(id, func(st *state) {
		before := *st
		eff = st.observe(o)
		l.adaptObserve(st, &before, o, eff, id)
	}); saved {
		l.count(eff)
	}
}

// update applies fn to id's stored state and saves the state if fn
// changed it; when another process wrote first, it applies fn once more
// on the fresh state. It returns the state fn left, whether a change was
// saved, and ok=false when the state could not be read or saved (a
// storage fallback, counted and warned about). The caller holds id's
// lock.
func (l *Learner) update(id string, fn func(st *state)) (st state, saved, ok bool) {
	for attempt := 0; ; attempt++ {
		st, rev, ok := l.load(id)
		if !ok {
			return state{}, false, false
		}
		before := st
		fn(&st)
		if st == before {
			return st, false, true
		}
		err := l.save(id, &st, rev)
		if errors.Is(err, ErrStaleRevision) && attempt == 0 {
			continue // another process wrote first: apply fn again on its state
		}
		if err != nil {
			l.fail(err)
			return st, false, false
		}
		return st, true, true
	}
}

// Suggest returns the learned cooldown for the throttle ev, in apply mode
// once confident: min(cap, max(advice, suggestion)). In shadow mode it logs
// the suggestion and answers ok=false; so it does in off mode, for other
// outcomes, outside the policy, before confidence, and whenever storage
// fails. Suggest also records ev as Observe would, so the pool may call the
// two in either order.
func (l *Learner) Suggest(ev pool.LearnEvent) (time.Duration, bool) {
	if ev.Outcome != pool.OutcomeThrottled {
		return 0, false
	}
	o, id, ok := l.admit(ev)
	if !ok {
		return 0, false
	}
	mu := l.lock(id)
	defer mu.Unlock()
	var eff effect
	var dec decision
	st, saved, ok := l.update(id, func(st *state) {
		before := *st
		eff = st.observe(o)
		l.adaptObserve(st, &before, o, eff, id)
		dec = l.decide(st, o, id) // on fresh state, decide again
	})
	if !ok {
		return 0, false
	}
	if saved {
		l.count(eff)
	}
	l.report(dec, id, &st)
	if !dec.apply {
		return 0, false
	}
	return time.Duration(dec.ms) * time.Millisecond, true
}

// Fell reports whether the success ev, just observed, was a fall of its
// reset that adapt recorded for the siblings (noteFall): the pool then
// asks Release for each sibling that still cools.
func (l *Learner) Fell(ev pool.LearnEvent) bool {
	if !l.Adapt() || ev.Outcome != pool.OutcomeSuccess {
		return false
	}
	o, id, ok := l.admit(ev)
	if !ok {
		return false
	}
	l.fallMu.Lock()
	defer l.fallMu.Unlock()
	f := l.falls[o.group]
	return f != nil && f.at == o.at && f.took[0] == id
}

// Release ends early the cooldown the credential ev names holds when a
// sibling's reset fell while it cooled (state.release): the sibling would
// otherwise try the fall only at its next refusal or throttle. It returns
// the rest left from ev.At; ok=false leaves the cooldown alone.
func (l *Learner) Release(ev pool.LearnEvent) (time.Duration, bool) {
	if !l.Adapt() {
		return 0, false
	}
	ev.Outcome, ev.HasRetryAfter = pool.OutcomeThrottled, false // admit reads the scope and identity only
	o, id, ok := l.admit(ev)
	if !ok {
		return 0, false
	}
	sib, from := l.fallFor(o.group, o.at, id)
	if sib == 0 {
		return 0, false
	}
	mu := l.lock(id)
	defer mu.Unlock()
	var until int64
	if _, saved, _ := l.update(id, func(st *state) {
		until, _ = st.release(o.at, sib, from)
	}); !saved {
		return 0, false
	}
	l.tookFall(o.group, id)
	return time.Duration(until-o.at) * time.Millisecond, true
}

// decision is what decide concluded for one throttle.
type decision struct {
	ms     int64 // the learned duration, bounded by advice and cap
	apply  bool  // Suggest answers ms
	report bool  // shadow mode: log ms
	ready  bool  // shadow mode: apply mode would use ms
	fresh  bool  // apply mode: a new decision, recorded in the state
	trial  bool  // the decision is a trial step
}

// decide computes the cooldown for the throttle o once st has observed it,
// and records an apply-mode decision in st.
func (l *Learner) decide(st *state, o observation, id string) decision {
	if st.anchor == 0 || o.at >= st.until {
		return decision{} // not part of the open episode
	}
	if o.at != st.last {
		// A straggler of the latest throttle: keep its cooldown if the
		// learner decided it, else leave the existing one.
		if l.mode != ModeApply || st.decidedAt != st.last {
			return decision{}
		}
		return decision{ms: l.rest(st, o, st.until-o.at), apply: true}
	}
	if l.mode == ModeApply && st.decidedAt == o.at {
		return decision{ms: l.rest(st, o, st.until-o.at), apply: true} // decided already
	}
	if l.mode == ModeApply && l.adapt {
		return l.decideAdapt(st, o, id)
	}
	target, trial := st.target()
	rem := max(st.anchor+target-o.at, minBoundMS)
	d := decision{ms: l.bound(st, o, rem)}
	// A learned wait longer than the existing cooldown rests on refusals;
	// without a recent one, let the existing cooldown refresh the evidence.
	ready := st.confident() && (d.ms <= o.existing || !st.stale(o.at))
	if l.literal {
		ready = st.conf >= confidentAt
	}
	if l.mode == ModeShadow {
		d.report, d.ready = true, ready
		return d
	}
	if !ready {
		return decision{}
	}
	// A trial step is a midpoint that set the duration, capped or not; not
	// one that trusted advice overrode.
	d.apply, d.fresh = true, true
	d.trial = trial && (st.hintUntil == 0 || st.hintUntil-o.at < rem)
	if d.trial {
		st.steps++
	}
	st.until, st.decidedAt = o.at+d.ms, o.at
	return d
}

// adaptObserve applies the adapt evidence of o in apply mode with adapt on.
func (l *Learner) adaptObserve(st, before *state, o observation, eff effect, id string) {
	if l.adapt && l.mode == ModeApply {
		l.forgetOld(o.at)
		st.adaptObserve(before, o, eff)
		if hi, ok := st.fell(before); ok {
			l.noteFall(o.group, o.at, hi, before.anchor, id)
		}
		if o.throttle && st.anchor != 0 && st.anchor == before.anchor && st.elo > before.elo {
			l.rises.note(o.group, rise{id: id, anchor: st.anchor, at: o.at, e: st.elo}, riseWindow)
		}
		if elo, ok := st.climbed(before, o.existing); ok {
			l.climbs.note(o.group, rise{id: id, anchor: before.anchor, at: o.at, e: elo}, climbWindow)
		}
	}
}

// decideAdapt is decide with learned_cooldown.adapt on (adapt.go).
func (l *Learner) decideAdapt(st *state, o observation, id string) decision {
	lead := false
	if o.at == st.anchor && !l.noLead {
		lead = l.leadsRound(o.group, o.at, id)
	}
	target, trial, ok := st.adaptTarget(o, lead)
	if !ok {
		return decision{}
	}
	tried := false
	if sib, _ := l.fallFor(o.group, o.at, id); sib > 0 {
		if target, tried = st.trySibling(o.at-st.anchor, target, sib); tried {
			trial = true
			l.tookFall(o.group, id)
		}
	}
	if r, ok := l.rises.recent(o.group, o.at, id, riseWindow); ok && !tried {
		if t, skipped := st.skipRise(o.at-st.anchor, target, r, o.existing); skipped {
			target, trial = t, false
		}
	}
	if c, ok := l.climbs.recent(o.group, st.anchor, id, climbWindow); ok && !tried && o.at != st.anchor {
		if t, skipped := st.skipClimb(o.at-st.anchor, target, c, o.existing); skipped {
			target, trial = t, false
		}
	}
	if t, split := st.splitCheck(o.at, target, l.checks.others(o.group, id), o.existing); split {
		target, trial = t, true
	}
	l.noteCheck(st, o, id, target)
	rem := st.anchor + target - o.at
	if rem <= 0 {
		rem = minBoundMS // the plan has no retry left: a second
	}
	d := decision{ms: l.rest(st, o, rem), apply: true, fresh: true}
	d.trial = trial && (st.hintUntil == 0 || st.hintUntil-o.at < max(rem, minBoundMS))
	st.until, st.decidedAt = o.at+d.ms, o.at
	return d
}

// leadsRound reports whether id's episode, beginning at at, leads a round
// of throttles in its group (no sibling's episode began within leadWindow
// before it), and records its start.
func (l *Learner) leadsRound(g uint64, at int64, id string) bool {
	lead := true
	for _, r := range l.starts.others(g, id) {
		if r.anchor <= at && at-r.anchor < leadWindow {
			lead = false
		}
	}
	l.starts.note(g, rise{id: id, anchor: at, at: at}, leadWindow)
	return lead
}

// noteCheck records the retry at target (ms after the episode's first
// throttle) as id's pending check of a fall if it lies at or below its
// evidence's lower bound, where a recovery would be a fall that releases
// its siblings (release), and else drops id's pending check.
func (l *Learner) noteCheck(st *state, o observation, id string, target int64) {
	if a, _ := st.common(); target <= a {
		l.checks.note(o.group, rise{id: id, anchor: st.anchor, at: o.at, e: target}, riseWindow)
		return
	}
	l.checks.forget(o.group, id)
}

// report logs a shadow suggestion and counts decisions, after they were
// stored.
func (l *Learner) report(d decision, id string, st *state) {
	if d.report {
		l.log.Info("learned cooldown suggestion",
			"bucket", bucketDigest(id),
			"suggested_seconds", float64(d.ms)/1000,
			"confidence", int(st.conf),
			"steps", int(st.steps),
			"ready", d.ready)
	}
	if d.report && d.ready || d.fresh {
		l.stats.suggestions.Add(1)
	}
	if d.trial {
		l.stats.trials.Add(1)
	}
}

// rest is bound, except that with adapt on a rest under a second stands
// where trusted advice allows it: a retry refused in the last second
// before the plan's next one rests only until it, since a whole second
// would hold the credential past a reset that the held wait matches. A
// straggler of that refusal, or the same throttle seen again, keeps it.
func (l *Learner) rest(st *state, o observation, ms int64) int64 {
	if l.adapt && ms > 0 && ms < minBoundMS && o.at != st.anchor && (st.hintUntil == 0 || st.hintUntil-o.at <= ms) {
		return ms
	}
	return l.bound(st, o, ms)
}

// bound applies the advice floor and the cap: min(cap, max(advice, ms)).
func (l *Learner) bound(st *state, o observation, ms int64) int64 {
	if st.hintUntil != 0 {
		ms = max(ms, st.hintUntil-o.at)
	}
	return max(min(ms, l.capMS), minBoundMS)
}

// maxHintSeconds bounds advice before it is converted, so that no
// arithmetic overflows; it is MODEL_COOLDOWN_MAX_SECONDS' largest value.
const maxHintSeconds = math.MaxInt32

// admit checks that ev teaches in this learner and converts it.
func (l *Learner) admit(ev pool.LearnEvent) (observation, string, bool) {
	if l == nil || l.mode == ModeOff {
		return observation{}, "", false
	}
	if ev.Outcome != pool.OutcomeThrottled && ev.Outcome != pool.OutcomeSuccess {
		return observation{}, "", false
	}
	if !l.policy.Matches(ev.Provider, ev.Model, ev.QuotaBucket) {
		return observation{}, "", false
	}
	if !validIdentity(ev.Identity) {
		l.fail(errIdentity)
		return observation{}, "", false
	}
	at := ev.At
	if at.IsZero() {
		at = l.clock.Now()
	}
	o := observation{throttle: ev.Outcome == pool.OutcomeThrottled, at: at.UnixMilli(), hint: -1}
	if l.adapt {
		o.group = maphash.String(l.seed, ev.Provider+"\x00"+ev.Model+"\x00"+ev.QuotaBucket)
	}
	if o.at <= 0 {
		return observation{}, "", false
	}
	if !ev.Sent.IsZero() && ev.Sent.UnixMilli() > 0 {
		o.sent = ev.Sent.UnixMilli()
	}
	if ev.HasRetryAfter && !math.IsNaN(ev.RetryAfter) && ev.RetryAfter >= 0 && !math.IsInf(ev.RetryAfter, 0) {
		o.hint = int64(math.Ceil(min(ev.RetryAfter, maxHintSeconds) * 1000))
	}
	if o.hint >= 0 {
		o.existing = max(min(o.hint, l.capMS), minBoundMS)
	} else {
		o.existing = min(l.fallback, l.capMS)
	}
	return o, ev.Identity, true
}

var errIdentity = errors.New("learn event without a hex identity digest")

// validIdentity accepts lowercase hex digests of 128 to 512 bits: the
// pool's HMAC identities. Anything else might be a name or a key and is
// never stored.
func validIdentity(id string) bool {
	if len(id) < 32 || len(id) > MaxIDLength || len(id)%2 != 0 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// bucketDigest is the opaque bucket label of shadow reports: a short digest
// of the identity, so that a log line cannot be joined to a stored record.
func bucketDigest(id string) string {
	sum := sha256.Sum256([]byte("rotor learned-cooldown bucket\x00" + id))
	return hex.EncodeToString(sum[:8])
}

func (l *Learner) lock(id string) *sync.Mutex {
	mu := &l.locks[maphash.String(l.seed, id)%lockStripes]
	mu.Lock()
	return mu
}

// load reads the state of id and its revision. A missing record is a new
// state (revision 0); a corrupt one is replaced by a new state, keeping its
// revision for the overwrite; one of an unknown version, or a failed read,
// is a fallback (ok=false).
func (l *Learner) load(id string) (state, int64, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	rec, found, err := l.store.Get(ctx, id, l.clock.Now())
	if err != nil {
		l.fail(err)
		return state{}, 0, false
	}
	if !found {
		return newState(), 0, true
	}
	st, err := decodeState(rec.State)
	switch {
	case errors.Is(err, errStateVersion):
		l.fail(err)
		return state{}, 0, false
	case err != nil:
		l.fail(err)
		return newState(), rec.Revision, true
	}
	return st, rec.Revision, true
}

func (l *Learner) save(id string, st *state, rev int64) error {
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	_, err := l.store.Put(ctx, Record{ID: id, State: st.encode()}, rev, l.clock.Now())
	return err
}

// fail counts a storage fallback and warns once per kind.
func (l *Learner) fail(err error) {
	kind := failUnavailable
	switch {
	case errors.Is(err, ErrStaleRevision):
		kind = failStaleRevision
	case errors.Is(err, ErrCapacity):
		kind = failCapacity
	case errors.Is(err, errStateVersion), errors.Is(err, errStateCorrupt), errors.Is(err, ErrInvalidRecord):
		kind = failInvalidState
	case errors.Is(err, errIdentity):
		kind = failIdentity
	}
	l.stats.failures[kind].Add(1)
	if l.warned[kind].Swap(true) {
		return
	}
	args := []any{"reason", failureNames[kind]}
	if kind == failUnavailable {
		args = append(args, "error", err.Error())
	}
	l.log.Warn("learned cooldown falls back to existing cooldowns", args...)
}

func (l *Learner) count(eff effect) {
	switch eff {
	case effEvidence:
		l.stats.evidence.Add(1)
	case effContradiction, effAnomaly:
		l.stats.contradictions.Add(1)
	}
}

// Snapshot is the learner's status: counts only, never names or digests.
type Snapshot struct {
	Mode Mode `json:"mode"`
	// Scopes is the number of policy scopes.
	Scopes int `json:"scopes"`
	// Observations counts throttles and successes seen in policy scopes.
	Observations uint64 `json:"observations"`
	// Evidence counts consistent directional observations recorded.
	Evidence uint64 `json:"evidence"`
	// Contradictions counts widenings: contradictions and nonincreasing
	// timestamps.
	Contradictions uint64 `json:"contradictions"`
	// Suggestions counts confident suggestions: applied (apply) or logged
	// (shadow).
	Suggestions uint64 `json:"suggestions"`
	// TrialSteps counts midpoint trials applied.
	TrialSteps uint64 `json:"trial_steps"`
	// Fallbacks counts storage fallbacks by kind: unavailable,
	// stale_revision, capacity, invalid_state, invalid_identity.
	Fallbacks map[string]uint64 `json:"fallbacks"`
}

// Snapshot returns the current counts.
func (l *Learner) Snapshot() Snapshot {
	if l == nil {
		return Snapshot{Mode: ModeOff, Fallbacks: map[string]uint64{}}
	}
	s := Snapshot{
		Mode:           l.mode,
		Scopes:         l.policy.Len(),
		Observations:   l.stats.observations.Load(),
		Evidence:       l.stats.evidence.Load(),
		Contradictions: l.stats.contradictions.Load(),
		Suggestions:    l.stats.suggestions.Load(),
		TrialSteps:     l.stats.trials.Load(),
		Fallbacks:      make(map[string]uint64, numFailures),
	}
	for k := range numFailures {
		s.Fallbacks[failureNames[k]] = l.stats.failures[k].Load()
	}
	return s
}

// String renders a snapshot for logs.
func (s Snapshot) String() string {
	return fmt.Sprintf("mode=%s scopes=%d observations=%d evidence=%d contradictions=%d suggestions=%d trial_steps=%d",
		s.Mode, s.Scopes, s.Observations, s.Evidence, s.Contradictions, s.Suggestions, s.TrialSteps)
}

// fall is a drop of the reset one credential saw at at: a recovery hi ms
// after its episode's first throttle (at from), at or below its
// evidence's lower bound (state.fell). The others of its group try hi once
// (trySibling, release).
type fall struct {
	at, hi, from int64
	took         []string // identities that saw or tried it
}

// fallTTL is how long a sibling's fall is offered.
const fallTTL = adaptBudgetMS

// maxFallTook bounds the credentials one fall is offered to.
const maxFallTook = 16

// noteFall records that id's reset fell to hi at at, in an episode that
// began at from, as its group's latest fall (the one id saw itself). At
// most StoreCapacity groups keep a fall; one older than fallTTL gives way.
func (l *Learner) noteFall(g uint64, at, hi, from int64, id string) {
	l.fallMu.Lock()
	defer l.fallMu.Unlock()
	if l.falls == nil {
		l.falls = map[uint64]*fall{}
	}
	if f := l.falls[g]; f != nil && at <= f.at {
		return
	}
	l.dropOldFalls(at)
	if _, ok := l.falls[g]; !ok && len(l.falls) >= StoreCapacity {
		for k, f := range l.falls {
			if at-f.at >= fallTTL {
				delete(l.falls, k)
			}
		}
		if len(l.falls) >= StoreCapacity {
			return
		}
	}
	l.falls[g] = &fall{at: at, hi: hi, from: from, took: []string{id}}
}

// dropOldFalls drops the falls offered no more at at, with their
// identities; fallMu is held.
func (l *Learner) dropOldFalls(at int64) {
	for k, f := range l.falls {
		if at-f.at >= fallTTL {
			delete(l.falls, k)
		}
	}
}

// forgetEvery is how often the memories drop what no episode can use.
const forgetEvery = 60_000

// forgetOld drops, at most once a minute, the falls and sibling events no
// episode can use any more at at, with the credential identities they
// hold: each memory also drops its own when it notes a new one, but a
// kind noted no more (no climb for a week) would keep its last ones
// past the state they came from.
func (l *Learner) forgetOld(at int64) {
	last := l.forgotAt.Load()
	if at-last < forgetEvery || !l.forgotAt.CompareAndSwap(last, at) {
		return
	}
	l.fallMu.Lock()
	l.dropOldFalls(at)
	l.fallMu.Unlock()
	l.rises.drop(at, riseWindow)
	l.climbs.drop(at, climbWindow)
	l.checks.drop(at, riseWindow)
	l.starts.drop(at, leadWindow)
}

// fallFor returns a sibling's recent fall that id has not tried, and when
// the sibling's episode began (0, 0: none).
func (l *Learner) fallFor(g uint64, at int64, id string) (hi, from int64) {
	l.fallMu.Lock()
	defer l.fallMu.Unlock()
	f := l.falls[g]
	if f != nil && at-f.at >= fallTTL {
		delete(l.falls, g) // offered no more: drop it, with its identities
	}
	if f == nil || at-f.at >= fallTTL || at < f.at || len(f.took) >= maxFallTook || slices.Contains(f.took, id) {
		return 0, 0
	}
	return f.hi, f.from
}

// tookFall marks the group's fall tried by id.
func (l *Learner) tookFall(g uint64, id string) {
	l.fallMu.Lock()
	defer l.fallMu.Unlock()
	if f := l.falls[g]; f != nil && !slices.Contains(f.took, id) && len(f.took) < maxFallTook {
		f.took = append(f.took, id)
	}
}

// rise is a credential's event its siblings may act on: a retry it had
// refused (at at, e ms after the first throttle of its episode, which
// began at anchor), a climb (a recovery at at that proved the reset of
// that episode longer than e), or a check of a fall it decided at at (a
// retry e ms after anchor, at or below its evidence's lower bound).
type rise struct {
	id            string
	anchor, at, e int64
}

// riseWindow is how close two episodes' first throttles must be for one's
// refusal to speak for the other's reset, and how long a refusal is
// offered.
const riseWindow = 2 * 60_000

// climbWindow is how soon after a sibling's climb an episode must begin
// for the climb to speak for its reset.
const climbWindow = 5 * 60_000

// siblingEvents holds, per sibling group, the latest events of up to
// siblingKeep credentials, newest first, one each, so that a credential's
// own event does not hide its siblings' (adapt; memory only). At most
// StoreCapacity groups keep them.
type siblingEvents struct {
	mu sync.Mutex
	m  map[uint64][]rise
}

// siblingKeep is how many credentials' events a group keeps.
const siblingKeep = 4

// note records r as its group's latest event, in place of its
// credential's older one; when the map is full, the groups whose latest
// event is window old give way.
func (se *siblingEvents) note(g uint64, r rise, window int64) {
	se.mu.Lock()
	defer se.mu.Unlock()
	if se.m == nil {
		se.m = map[uint64][]rise{}
	}
	se.dropLocked(r.at, window)
	rs, ok := se.m[g]
	if !ok && len(se.m) >= StoreCapacity {
		for k, old := range se.m {
			if len(old) == 0 || r.at-old[0].at >= window {
				delete(se.m, k)
			}
		}
		if len(se.m) >= StoreCapacity {
			return
		}
	}
	rs = slices.DeleteFunc(rs, func(x rise) bool { return x.id == r.id })
	rs = slices.Insert(rs, 0, r)
	se.m[g] = rs[:min(len(rs), siblingKeep)]
}

// drop drops the events no episode can use any more at at.
func (se *siblingEvents) drop(at, window int64) {
	se.mu.Lock()
	defer se.mu.Unlock()
	se.dropLocked(at, window)
}

// dropLocked drops, with its identity, every event no episode can still
// use at at (every episode ends within maxBoundMS of its first throttle),
// so that none outlives the state it came from; mu is held.
func (se *siblingEvents) dropLocked(at, window int64) {
	for k, old := range se.m {
		if old = slices.DeleteFunc(old, func(x rise) bool { return at-x.at >= window+maxBoundMS }); len(old) == 0 {
			delete(se.m, k)
		} else {
			se.m[k] = old
		}
	}
}

// forget drops id's event from its group.
func (se *siblingEvents) forget(g uint64, id string) {
	se.mu.Lock()
	defer se.mu.Unlock()
	if rs, ok := se.m[g]; ok {
		se.m[g] = slices.DeleteFunc(rs, func(x rise) bool { return x.id == id })
	}
}

// others returns the group's events that are not id's own, newest first.
func (se *siblingEvents) others(g uint64, id string) []rise {
	se.mu.Lock()
	defer se.mu.Unlock()
	var out []rise
	for _, r := range se.m[g] {
		if r.id != id {
			out = append(out, r)
		}
	}
	return out
}

// recent returns the latest event of the group that is not id's own, if
// it happened less than window before at (and not after it).
func (se *siblingEvents) recent(g uint64, at int64, id string, window int64) (rise, bool) {
	rs := se.others(g, id)
	if len(rs) == 0 || at-rs[0].at >= window || at < rs[0].at {
		return rise{}, false
	}
	return rs[0], true
}

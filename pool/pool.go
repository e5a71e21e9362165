package pool

import (
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/defaults"
	"github.com/rotorhq/rotor/internal/secret"
)

// Defaults of the spec's fallbacks and settings.
const (
	// DefaultMaxSeconds is MODEL_COOLDOWN_MAX_SECONDS when unset.
	DefaultMaxSeconds = defaults.MaxCooldownSeconds
	// LargestMaxSeconds is the largest MODEL_COOLDOWN_MAX_SECONDS.
	LargestMaxSeconds = 2147483647
	// DefaultAuthRest is the rest after a genuine auth rejection without
	// valid advice (the spec's Codex Everywhere 300 s).
	DefaultAuthRest = defaults.AuthRest
	// ThrottleRest is the rest after a throttle without valid advice.
	ThrottleRest = 60 * time.Second
	// MinRest is the rest zero advice gets, so that it cannot cause an
	// immediate redispatch; positive advice below it is kept as it is
	// (the spec rounds fractions up only in Retry-After). A Learner's
	// suggestion bounds itself.
	MinRest = time.Second
)

// legacyRest is one legacy rest: its release (the embedded value, on the
// store's time base, 0 when none) and when the latest rest was set (since),
// so that a success sent before it clears nothing.
type legacyRest struct {
	atomic.Int64
	since atomic.Int64
}

// Credential is one configured key of a pool.
type Credential struct {
	// Name is the credential's label in the configuration. It is what
	// logs, status and the ledger show; never the key.
	Name string
	Key  secret.Value
}

// Options are the per-pool options that carry what differed between the
// spec's pool implementations.
type Options struct {
	// Name is the pool name ("api", "zdr") and the namespace of its
	// credential IDs: the same key in two pools shares no state.
	Name string
	// FirstKeyFallback offers the first candidate when every candidate
	// rests (the spec's legacy Codex Everywhere fallback), as the Fallback
	// of Select's *CooldownExhaustedError. It applies only where
	// model-scoped admission is not in force: with model cooldown
	// disabled, and on the unscoped path, which keeps the disabled path's
	// selection. Never on the scoped path.
	FirstKeyFallback bool
	// AuthRest is how long a genuine credential-wide auth rejection seen
	// at inference rests the credential without valid advice. Zero or
	// negative means DefaultAuthRest.
	AuthRest time.Duration
	// PreferActive keeps using the credential whose inference call last
	// succeeded while it is available (the spec's NanoGPT active key).
	PreferActive bool
	// CatalogTTL is the rest for a genuine auth rejection seen by a catalog
	// fetch without valid advice (the spec's NanoGPT validation TTL). Zero
	// or negative means AuthRest.
	CatalogTTL time.Duration
	// QuotaBuckets maps a configured quota bucket to its member models.
	// Buckets come only from configuration; a model in two buckets keeps
	// the first in name order (package config rejects that).
	QuotaBuckets map[string][]string
}

// Settings are the MODEL_COOLDOWN_* settings, already parsed and validated
// by package config.
type Settings struct {
	// ModelCooldownEnabled is MODEL_COOLDOWN_ENABLED (default false).
	ModelCooldownEnabled bool
	// MaxSeconds is MODEL_COOLDOWN_MAX_SECONDS: the cap of every rest and
	// Retry-After. Outside 1..LargestMaxSeconds it means DefaultMaxSeconds.
	MaxSeconds int64
}

// Config builds a Pool. Options and Credentials are required (an empty
// credential list is allowed and selects ErrNoCredentials); the rest is
// optional.
type Config struct {
	Options     Options
	Credentials []Credential
	Settings    Settings
	// Store is the process-wide model-scoped store shared by every pool;
	// nil gives the pool a private store with DefaultStoreLimit.
	Store *Store
	// Clock defaults to the store's clock. Give both the same clock: every
	// release is kept on the store's monotonic time base.
	Clock clock.Clock
	// Learner, when set, observes natural inference outcomes and may
	// suggest throttle durations.
	Learner Learner
	// Logger, when set, receives cooldown state changes (never a key or a
	// model name).
	Logger *slog.Logger
	// Previous, when set, is the pool this one replaces on a config
	// reload. Each credential that Keep names and that Previous holds
	// under the same name and key shares its legacy rest with Previous
	// (a request still in flight there records into the same rest), and
	// the active-key preference carries over to it. Model-scoped
	// observations live in the Store, shared already. Previous must use
	// the same Store.
	Previous *Pool
	Keep     func(name string) bool
}

// Pool holds one pool's credentials and decides which may serve a request.
// It keeps the legacy provider-wide rest map itself and the model-scoped
// observations in its Store, under its own namespace. It never waits,
// retries or starts a goroutine or timer: callers select, call the
// provider, and record the outcome.
//
// A Pool is safe for concurrent use.
type Pool struct {
	name    string
	opts    Options
	enabled bool
	// maxRest is the cap of every rest (model_cooldown.max_seconds), in
	// ns, shared with the pool's earlier generations: after a reload their
	// requests still in flight record under the new cap (cap).
	maxRest  *atomic.Int64
	store    *Store
	clk      clock.Clock
	learner  Learner
	log      *slog.Logger
	creds    []Credential
	ids      []digest       // credential IDs, by credential
	rest     []int          // legacy rest slot, by credential: one per key
	byName   map[string]int // credential index
	bucketOf map[string]string
	buckets  map[string]bool

	// legacy holds the legacy provider-wide rests: release times on the
	// store's time base, 0 when none. Credentials with the same key share
	// a slot, as they share the key's quota.
	legacy []*legacyRest
	// active is 1 + the index of the credential whose inference call last
	// succeeded, 0 when none.
	active atomic.Int32
}

// New returns a pool. It panics when two credentials share a name, which
// package config rejects.
func New(cfg Config) *Pool {
	st := cfg.Store
	if st == nil {
		st = NewStore(cfg.Clock, 0)
	}
	clk := cfg.Clock
	if clk == nil {
		clk = st.clk
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := cfg.Options
	if opts.AuthRest <= 0 {
		opts.AuthRest = DefaultAuthRest
	}
	if opts.CatalogTTL <= 0 {
		opts.CatalogTTL = opts.AuthRest
	}
	maxSeconds := cfg.Settings.MaxSeconds
	if maxSeconds < 1 || maxSeconds > LargestMaxSeconds {
		maxSeconds = DefaultMaxSeconds
	}
	p := &Pool{
		name:     opts.Name,
		enabled:  cfg.Settings.ModelCooldownEnabled,
		maxRest:  new(atomic.Int64),
		store:    st,
		clk:      clk,
		learner:  cfg.Learner,
		log:      log,
		creds:    slices.Clone(cfg.Credentials),
		byName:   make(map[string]int, len(cfg.Credentials)),
		bucketOf: map[string]string{},
		buckets:  map[string]bool{},
	}
	restOf := map[digest]int{}
	for i, c := range p.creds {
		if _, dup := p.byName[c.Name]; dup {
			panic(fmt.Sprintf("pool %s: credential name %q configured twice", p.name, c.Name))
		}
		p.byName[c.Name] = i
		id := st.credentialID(p.name, c.Key.Reveal())
		p.ids = append(p.ids, id)
		r, ok := restOf[id]
		if !ok {
			r = len(restOf)
			restOf[id] = r
		}
		p.rest = append(p.rest, r)
	}
	p.legacy = make([]*legacyRest, len(restOf))
	if prev := cfg.Previous; prev != nil && prev.store == st {
		p.maxRest = prev.maxRest
		if cfg.Keep != nil {
			p.adopt(prev, cfg.Keep)
		}
	}
	p.maxRest.Store(int64(time.Duration(maxSeconds) * time.Second))
	p.clipToCap() // a reload shares the store, and may have lowered the cap
	for r := range p.legacy {
		if p.legacy[r] == nil {
			p.legacy[r] = new(legacyRest)
		}
	}
	for _, b := range slices.Sorted(maps.Keys(opts.QuotaBuckets)) {
		if b == "" {
			continue
		}
		p.buckets[b] = true
		for _, m := range opts.QuotaBuckets[b] {
			if _, taken := p.bucketOf[m]; !taken && m != "" {
				p.bucketOf[m] = b
			}
		}
	}
	opts.QuotaBuckets = nil // kept as p.buckets and p.bucketOf
	p.opts = opts
	return p
}

// clipToCap ends every cooldown this pool's credentials carry over from
// the previous generation (adopted legacy rests, live model-store
// observations) by now plus the cap at the latest: a reload that lowered
// model_cooldown.max_seconds binds the cooldowns already running, which
// would otherwise hold requests past the Retry-After they are told. With
// the cap unchanged it changes nothing: every rest was set within it.
func (p *Pool) clipToCap() {
	now := p.store.since(p.clk.Now())
	until := now + int64(p.cap())
	for _, r := range p.legacy {
		for r != nil {
			cur := r.Load()
			if cur <= until || r.CompareAndSwap(cur, until) {
				break
			}
		}
	}
	creds := make(map[digest]bool, len(p.ids))
	for _, id := range p.ids {
		creds[id] = true
	}
	p.store.mu.Lock()
	p.store.clip(creds, until, now)
	p.store.mu.Unlock()
}

// adopt shares prev's legacy rests, and its active credential, with the
// credentials keep names that prev holds under the same name and key.
func (p *Pool) adopt(prev *Pool, keep func(string) bool) {
	for i, c := range p.creds {
		pi, ok := prev.byName[c.Name]
		if !ok || !keep(c.Name) || prev.ids[pi] != p.ids[i] {
			continue
		}
		if p.legacy[p.rest[i]] == nil {
			p.legacy[p.rest[i]] = prev.legacy[prev.rest[pi]]
		}
		if int(prev.active.Load())-1 == pi {
			p.active.Store(int32(i) + 1)
		}
	}
}

// Name returns the pool name.
func (p *Pool) Name() string { return p.name }

// Credentials returns the configured credentials in configured order.
func (p *Pool) Credentials() []Credential { return slices.Clone(p.creds) }

// BucketFor returns the configured quota bucket of model, or "".
func (p *Pool) BucketFor(model string) string { return p.bucketOf[model] }

// ModelCooldownEnabled reports whether model-scoped admission is enabled
// for this pool.
func (p *Pool) ModelCooldownEnabled() bool { return p.enabled }

// Scope is a request's model-cooldown context: the actual upstream model
// and its configured quota bucket. Selection and recording of one call
// must receive the same Scope. Both empty is the unscoped path.
type Scope struct {
	Model       string
	QuotaBucket string
}

// scopeKind says which namespace an observation lives in.
type scopeKind uint8

const (
	scopeNone scopeKind = iota
	scopeModel
	scopeBucket
)

func (k scopeKind) String() string {
	switch k {
	case scopeModel:
		return "model"
	case scopeBucket:
		return "bucket"
	}
	return "none"
}

// resolve returns the effective quota bucket and the scope kind of s. A
// bucket counts only when it is configured; a model that belongs to a
// configured bucket uses it even when the caller left QuotaBucket empty.
// Nothing else (a prefix, a body, another caller field) makes a bucket.
func (p *Pool) resolve(s Scope) (bucket string, kind scopeKind) {
	if s.QuotaBucket != "" && p.buckets[s.QuotaBucket] {
		return s.QuotaBucket, scopeBucket
	}
	if s.Model == "" {
		return "", scopeNone
	}
	if b := p.bucketOf[s.Model]; b != "" {
		return b, scopeBucket
	}
	return "", scopeModel
}

// scopeID is the store label of a resolved scope.
func (p *Pool) scopeID(s Scope, bucket string, kind scopeKind) digest {
	if kind == scopeBucket {
		return p.store.label(labelBucket, bucket)
	}
	return p.store.label(labelModel, s.Model)
}

// maxInline is how many credentials the hot paths handle without
// allocating.
const maxInline = 16

// candidates appends the indexes of names (nil: every credential) to dst in
// configured order. Unknown and repeated names are ignored.
func (p *Pool) candidates(names []string, dst []int) []int {
	if names == nil {
		for i := range p.creds {
			dst = append(dst, i)
		}
		return dst
	}
	if len(p.creds) <= 64 {
		var mask uint64
		for _, n := range names {
			if i, ok := p.byName[n]; ok {
				mask |= 1 << i
			}
		}
		for i := range p.creds {
			if mask&(1<<i) != 0 {
				dst = append(dst, i)
			}
		}
		return dst
	}
	seen := make([]bool, len(p.creds))
	for _, n := range names {
		if i, ok := p.byName[n]; ok {
			seen[i] = true
		}
	}
	for i, ok := range seen {
		if ok {
			dst = append(dst, i)
		}
	}
	return dst
}

// view is one evaluation of candidates: each candidate's release (0 or a
// past time when it is available) and, on the scoped path, the capacity
// guard.
type view struct {
	now      int64
	scoped   bool
	idx      []int
	release  []int64
	overflow int64 // capacity guard deadline, 0 when none
}

// evaluate computes the view of names under s. The buffers keep small
// pools allocation-free.
func (p *Pool) evaluate(s Scope, names []string, idxBuf []int, relBuf []int64) view {
	v := view{idx: p.candidates(names, idxBuf)}
	bucket, kind := p.resolve(s)
	v.scoped = p.enabled && kind != scopeNone
	var scope digest
	if v.scoped && len(v.idx) > 0 {
		scope = p.scopeID(s, bucket, kind)
	}
	v.now = p.store.since(p.clk.Now())
	v.release = relBuf[:0]
	for _, i := range v.idx {
		v.release = append(v.release, p.legacy[p.rest[i]].Load())
	}
	if !v.scoped || len(v.idx) == 0 {
		return v
	}
	st := p.store
	st.mu.Lock()
	st.prune(v.now)
	for j, i := range v.idx {
		// A release waits for the legacy rest, the credential-wide auth
		// observation and this scope's observation alike.
		id := p.ids[i]
		v.release[j] = max(v.release[j],
			st.lookup(obsKey{cred: id, scope: st.authScope}),
			st.lookup(obsKey{cred: id, scope: scope}))
	}
	v.overflow = st.overflowUntil(v.now)
	st.mu.Unlock()
	return v
}

// pick returns the index into v.idx of the credential to use, or -1.
func (p *Pool) pick(v view) int {
	if p.opts.PreferActive {
		if a := int(p.active.Load()) - 1; a >= 0 {
			for j, i := range v.idx {
				if i == a && v.release[j] <= v.now {
					return j
				}
			}
		}
	}
	for j := range v.idx {
		if v.release[j] <= v.now {
			return j
		}
	}
	return -1
}

// earliest returns the time until the earliest candidate release. Call it
// only when no candidate is available.
func (p *Pool) earliest(v view) time.Duration {
	first := int64(math.MaxInt64)
	for _, r := range v.release {
		first = min(first, r)
	}
	return p.bound(time.Duration(first - v.now))
}

// bound caps a wait at the configured maximum.
func (p *Pool) bound(d time.Duration) time.Duration { return min(d, p.cap()) }

// cap is the cap of every rest now: the newest generation's.
func (p *Pool) cap() time.Duration { return time.Duration(p.maxRest.Load()) }

// Available returns the names among candidates (nil: every credential) that
// may be dispatched now, in configured order; the active-key preference
// does not reorder it. Scoped, a credential is excluded while its model or
// bucket observation, its credential-wide auth observation or its legacy
// rest is live; unscoped, while its legacy rest is. While the capacity
// guard is active a scoped Available returns nil: new scoped admission
// fails closed. An empty result says nothing about why; callers that need
// the 429/503 decision call Select with the same arguments.
func (p *Pool) Available(s Scope, candidates []string) []string {
	var ib [maxInline]int
	var rb [maxInline]int64
	v := p.evaluate(s, candidates, ib[:0], rb[:0])
	if v.overflow != 0 {
		return nil
	}
	var out []string
	for j, i := range v.idx {
		if v.release[j] <= v.now {
			out = append(out, p.creds[i].Name)
		}
	}
	return out
}

// Select returns the credential to use among candidates (nil: every
// credential). It never waits. Errors:
//   - ErrNoCredentials when no candidate is configured (an empty
//     configuration or candidate list): the distinct no-key result.
//   - *CooldownExhaustedError when every candidate is cooling, with the
//     time until the earliest candidate's release; Scoped on the scoped
//     path (429 model_cooldown), else legacy (429 rate_limit_exceeded).
//     With FirstKeyFallback outside the scoped path, its Fallback names
//     the first candidate, which the caller may send to once per request.
//   - *CapacityError on the scoped path while the store's capacity guard
//     is active and some candidate is otherwise available (503). A known
//     all-cooling pool still gets the 429.
//
// The available credential is the active one when PreferActive holds and
// it is available, else the first available in configured order.
func (p *Pool) Select(s Scope, candidates []string) (Credential, error) {
	var ib [maxInline]int
	var rb [maxInline]int64
	v := p.evaluate(s, candidates, ib[:0], rb[:0])
	if len(v.idx) == 0 {
		return Credential{}, ErrNoCredentials
	}
	j := p.pick(v)
	if j < 0 {
		ce := &CooldownExhaustedError{Scoped: v.scoped, RetryAfter: p.earliest(v)}
		if !v.scoped && p.opts.FirstKeyFallback {
			ce.Fallback = p.creds[v.idx[0]].Name
		}
		return Credential{}, ce
	}
	if v.overflow != 0 {
		return Credential{}, &CapacityError{RetryAfter: p.bound(time.Duration(v.overflow - v.now))}
	}
	return p.creds[v.idx[j]], nil
}

// NextRelease returns the time until the earliest candidate (nil: every
// credential) becomes available, bounded by the configured maximum, and
// true; or 0 and false when a candidate is available now or there is no
// candidate. It ignores the capacity guard, which Select reports.
func (p *Pool) NextRelease(s Scope, candidates []string) (time.Duration, bool) {
	var ib [maxInline]int
	var rb [maxInline]int64
	v := p.evaluate(s, candidates, ib[:0], rb[:0])
	if len(v.idx) == 0 || p.pick(v) >= 0 {
		return 0, false
	}
	return p.earliest(v), true
}

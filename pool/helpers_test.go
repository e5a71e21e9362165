package pool

import (
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/testutil"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/secret"
)

// Canary keys: tests assert that none reaches the store, a log line, an
// error or a snapshot.
var testCreds = []Credential{
	{Name: "a", Key: secret.New("sk-canary-key-aaaaaaaaaaaaaaaaaaaa")},
	{Name: "b", Key: secret.New("sk-canary-key-bbbbbbbbbbbbbbbbbbbb")},
	{Name: "c", Key: secret.New("sk-canary-key-cccccccccccccccccccc")},
}

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// Scopes used throughout. decide-mini and decide-large share the
// configured bucket "shared".
var (
	unscoped = Scope{}
	modelA   = Scope{Model: "model-alpha"}
	modelB   = Scope{Model: "model-beta"}
	mini     = Scope{Model: "decide-mini", QuotaBucket: "shared"}
	large    = Scope{Model: "decide-large", QuotaBucket: "shared"}
)

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer = testutil.SyncBuffer

type fixture struct {
	t     *testing.T
	clk   *clock.Fake
	store *Store
	pool  *Pool
	logs  *syncBuffer
}

// newFixture builds pool "api" with credentials a, b, c, model cooldown
// enabled, a 3600 s maximum and the bucket "shared"; mods adjust the
// configuration before New.
func newFixture(t *testing.T, mods ...func(*Config)) *fixture {
	t.Helper()
	clk := clock.NewFake(t0)
	logs := &syncBuffer{}
	cfg := Config{
		Options: Options{
			Name:         "api",
			QuotaBuckets: map[string][]string{"shared": {"decide-mini", "decide-large"}},
		},
		Credentials: testCreds,
		Settings:    Settings{ModelCooldownEnabled: true, MaxSeconds: 3600},
		Clock:       clk,
		Logger:      slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	for _, m := range mods {
		m(&cfg)
	}
	if cfg.Store == nil {
		cfg.Store = NewStore(clk, 0)
	}
	return &fixture{t: t, clk: clk, store: cfg.Store, pool: New(cfg), logs: logs}
}

func disabled(c *Config)         { c.Settings.ModelCooldownEnabled = false }
func firstKeyFallback(c *Config) { c.Options.FirstKeyFallback = true }
func preferActive(c *Config)     { c.Options.PreferActive = true }

func withStoreLimit(n int) func(*Config) {
	return func(c *Config) { c.Store = NewStore(c.Clock, n) }
}

func withMaxSeconds(n int64) func(*Config) {
	return func(c *Config) { c.Settings.MaxSeconds = n }
}

func withLearner(l Learner) func(*Config) {
	return func(c *Config) { c.Learner = l }
}

func boolp(b bool) *bool { return &b }

// Observations.
func status(s Scope, code int) Observation { return Observation{Scope: s, Status: code} }

func throttle(s Scope) Observation { return status(s, 429) }

func throttleFor(s Scope, seconds float64) Observation {
	o := throttle(s)
	o.RetryAfter, o.HasRetryAfter = seconds, true
	return o
}

func success(s Scope) Observation { return status(s, 200) }

func (f *fixture) record(name string, o Observation) { f.pool.Record(name, o) }

// available returns Available(s, nil).
func (f *fixture) available(s Scope) []string { return f.pool.Available(s, nil) }

// wantAvailable checks Available(s, nil).
func (f *fixture) wantAvailable(s Scope, want ...string) {
	f.t.Helper()
	got := f.available(s)
	if !slices.Equal(got, want) {
		f.t.Errorf("Available(%+v) = %q, want %q", s, got, want)
	}
}

// wantSelect checks that Select(s, nil) returns the credential name.
func (f *fixture) wantSelect(s Scope, want string) {
	f.t.Helper()
	c, err := f.pool.Select(s, nil)
	if err != nil || c.Name != want {
		f.t.Errorf("Select(%+v) = %q, %v; want %q", s, c.Name, err, want)
	}
}

// wantExhausted checks that Select(s, nil) fails with a cooldown error of
// the given kind and wait.
func (f *fixture) wantExhausted(s Scope, scoped bool, retryAfter time.Duration) {
	f.t.Helper()
	c, err := f.pool.Select(s, nil)
	ce, ok := errors.AsType[*CooldownExhaustedError](err)
	if !ok {
		f.t.Errorf("Select(%+v) = %q, %v; want *CooldownExhaustedError", s, c.Name, err)
		return
	}
	if ce.Scoped != scoped || ce.RetryAfter != retryAfter || scoped && ce.Fallback != "" {
		f.t.Errorf("Select(%+v) error = %+v, want Scoped=%v RetryAfter=%v", s, *ce, scoped, retryAfter)
	}
}

// wantCapacity checks that Select(s, nil) fails closed with the given wait.
func (f *fixture) wantCapacity(s Scope, retryAfter time.Duration) {
	f.t.Helper()
	c, err := f.pool.Select(s, nil)
	ce, ok := errors.AsType[*CapacityError](err)
	if !ok {
		f.t.Errorf("Select(%+v) = %q, %v; want *CapacityError", s, c.Name, err)
		return
	}
	if ce.RetryAfter != retryAfter {
		f.t.Errorf("Select(%+v) RetryAfter = %v, want %v", s, ce.RetryAfter, retryAfter)
	}
}

// cooling reports whether credential name is excluded from s.
func (f *fixture) cooling(name string, s Scope) bool {
	return !slices.Contains(f.available(s), name)
}

// fakeLearner records what the pool tells it.
type fakeLearner struct {
	mu        sync.Mutex
	observed  []LearnEvent
	suggested []LearnEvent
	suggest   func(LearnEvent) (time.Duration, bool)
}

func (l *fakeLearner) Observe(ev LearnEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.observed = append(l.observed, ev)
}

func (l *fakeLearner) Suggest(ev LearnEvent) (time.Duration, bool) {
	l.mu.Lock()
	l.suggested = append(l.suggested, ev)
	fn := l.suggest
	l.mu.Unlock()
	if fn == nil {
		return 0, false
	}
	return fn(ev)
}

func (l *fakeLearner) counts() (observed, suggested int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.observed), len(l.suggested)
}

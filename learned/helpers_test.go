package learned

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/testutil"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/pool"
)

// epoch is the tests' start time.
var epoch = time.UnixMilli(1_767_225_600_000) // 2026-01-01T00:00:00Z

// identity returns a pool-like identity digest for a credential and scope.
func identity(credential, provider, model, bucket string) string {
	sum := sha256.Sum256([]byte(credential + "\x00" + provider + "\x00" + model + "\x00" + bucket))
	return hex.EncodeToString(sum[:])
}

const testPolicy = `{"buckets":[
	{"provider":"api","model":"decide-mini","quota_bucket":null},
	{"provider":"api","model":null,"quota_bucket":"shared-decide"},
	{"provider":"zdr","model":"decide-large","quota_bucket":"shared-decide"}
]}`

func mustPolicy(t testing.TB, raw string) *Policy {
	t.Helper()
	p, err := ParsePolicy(raw)
	if err != nil {
		t.Fatalf("ParsePolicy(%q) = %v", raw, err)
	}
	return p
}

// syncBuffer is a log sink safe for concurrent writers.
type syncBuffer = testutil.SyncBuffer

func newLogger() (*slog.Logger, *syncBuffer) {
	buf := &syncBuffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

// harness drives one learner for one scope with a fake clock.
type harness struct {
	t     testing.TB
	clk   *clock.Fake
	store Store
	l     *Learner
	logs  *syncBuffer
	ev    pool.LearnEvent // the scope and identity of events
}

type harnessOption func(*Config)

func withStore(s Store) harnessOption         { return func(c *Config) { c.Store = s } }
func withMaxSeconds(n int64) harnessOption    { return func(c *Config) { c.MaxSeconds = n } }
func withClock(clk *clock.Fake) harnessOption { return func(c *Config) { c.Clock = clk } }

func newHarness(t testing.TB, mode Mode, opts ...harnessOption) *harness {
	t.Helper()
	log, buf := newLogger()
	clk := clock.NewFake(epoch)
	cfg := Config{Mode: mode, Policy: mustPolicy(t, testPolicy), Store: NewMemoryStore(0), Logger: log, Clock: clk}
	for _, o := range opts {
		o(&cfg)
	}
	if fc, ok := cfg.Clock.(*clock.Fake); ok {
		clk = fc
	}
	return &harness{
		t: t, clk: clk, store: cfg.Store, l: New(cfg), logs: buf,
		ev: pool.LearnEvent{Provider: "api", Model: "decide-mini", Identity: identity("key-a", "api", "decide-mini", "")},
	}
}

// at moves the clock to epoch+d (forward only) and returns the time.
func (h *harness) at(d time.Duration) time.Time {
	h.clk.Set(epoch.Add(d))
	return h.clk.Now()
}

func (h *harness) event(o pool.Outcome, at time.Duration) pool.LearnEvent {
	ev := h.ev
	ev.Outcome = o
	ev.At = h.at(at)
	return ev
}

// throttle reports a throttle at epoch+at as the pool does (Observe, then
// Suggest) and returns the suggestion.
func (h *harness) throttle(at time.Duration) (time.Duration, bool) {
	ev := h.event(pool.OutcomeThrottled, at)
	h.l.Observe(ev)
	return h.l.Suggest(ev)
}

// throttleHint is throttle with trusted advice.
func (h *harness) throttleHint(at time.Duration, hint float64) (time.Duration, bool) {
	ev := h.event(pool.OutcomeThrottled, at)
	ev.RetryAfter, ev.HasRetryAfter = hint, true
	h.l.Observe(ev)
	return h.l.Suggest(ev)
}

func (h *harness) success(at time.Duration) {
	h.l.Observe(h.event(pool.OutcomeSuccess, at))
}

// state reads the stored state of the harness identity.
func (h *harness) state() (state, bool) {
	h.t.Helper()
	return storedState(h.t, h.store, h.ev.Identity, h.clk.Now())
}

// edit rewrites the stored state of the harness identity with f.
func (h *harness) edit(f func(*state)) {
	h.t.Helper()
	rec, ok, err := h.store.Get(context.Background(), h.ev.Identity, h.clk.Now())
	if err != nil || !ok {
		h.t.Fatalf("Get = %v, %v", ok, err)
	}
	st, err := decodeState(rec.State)
	if err != nil {
		h.t.Fatalf("decodeState = %v", err)
	}
	f(&st)
	rec.State = st.encode()
	if _, err := h.store.Put(context.Background(), rec, rec.Revision, h.clk.Now()); err != nil {
		h.t.Fatalf("Put = %v", err)
	}
}

func (h *harness) mustState() state {
	h.t.Helper()
	st, ok := h.state()
	if !ok {
		h.t.Fatal("no stored state")
	}
	return st
}

func storedState(t testing.TB, s Store, id string, now time.Time) (state, bool) {
	t.Helper()
	rec, ok, err := s.Get(context.Background(), id, now)
	if err != nil {
		t.Fatalf("Get = %v", err)
	}
	if !ok {
		return state{}, false
	}
	st, err := decodeState(rec.State)
	if err != nil {
		t.Fatalf("decodeState = %v", err)
	}
	return st, true
}

// becomeConfident feeds the evidence of one episode under the 60 s
// fallback with a reset between 120 and 180 s: throttles at 0, 60 and 120
// s after start and a success at 180 s. The interval is then (120, 180] s
// with confidence 3.
func (h *harness) becomeConfident(start time.Duration) {
	h.t.Helper()
	for _, e := range []time.Duration{0, 60 * time.Second, 120 * time.Second} {
		if _, ok := h.throttle(start + e); ok {
			h.t.Fatalf("suggestion before confidence at %v", start+e)
		}
	}
	h.success(start + 180*time.Second)
	st := h.mustState()
	if st.lo != 120_000 || st.hi != 180_000 || st.conf != 3 {
		h.t.Fatalf("after one episode: lo=%d hi=%d conf=%d, want 120000 180000 3", st.lo, st.hi, st.conf)
	}
}

// funcStore is a Store of func fields.
type funcStore struct {
	get func(ctx context.Context, id string, now time.Time) (Record, bool, error)
	put func(ctx context.Context, rec Record, rev int64, now time.Time) (int64, error)
}

func (f *funcStore) Get(ctx context.Context, id string, now time.Time) (Record, bool, error) {
	return f.get(ctx, id, now)
}

func (f *funcStore) Put(ctx context.Context, rec Record, rev int64, now time.Time) (int64, error) {
	return f.put(ctx, rec, rev, now)
}

// countingStore counts the operations on an inner store.
type countingStore struct {
	inner      Store
	mu         sync.Mutex
	gets, puts int
}

func (c *countingStore) Get(ctx context.Context, id string, now time.Time) (Record, bool, error) {
	c.mu.Lock()
	c.gets++
	c.mu.Unlock()
	return c.inner.Get(ctx, id, now)
}

func (c *countingStore) Put(ctx context.Context, rec Record, rev int64, now time.Time) (int64, error) {
	c.mu.Lock()
	c.puts++
	c.mu.Unlock()
	return c.inner.Put(ctx, rec, rev, now)
}

func (c *countingStore) ops() (int, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gets, c.puts
}

// checkRoundTripAndFlips checks that st's encoding decodes to st and that
// flipping any one bit of it is caught as corrupt.
func checkRoundTripAndFlips(t *testing.T, st state) {
	t.Helper()
	b := st.encode()
	got, err := decodeState(b)
	if err != nil || got != st {
		t.Fatalf("decode(encode(%+v)) = %+v, %v", st, got, err)
	}
	for i := range b {
		c := append([]byte(nil), b...)
		c[i] ^= 0x01
		if _, err := decodeState(c); err == nil {
			t.Errorf("a flipped bit in byte %d went unnoticed", i)
		}
	}
}

// checkStoreHoldsAtMostCapacity throttles one identity more than the
// memory store holds and checks that it keeps exactly StoreCapacity
// records.
func checkStoreHoldsAtMostCapacity(t *testing.T, h *harness) {
	t.Helper()
	for i := range StoreCapacity + 1 {
		ev := h.event(pool.OutcomeThrottled, 0)
		ev.Identity = identity("k", "api", "decide-mini", string(rune(i)))
		h.l.Observe(ev)
	}
	if n := h.store.(*MemoryStore).Len(h.clk.Now()); n != StoreCapacity {
		t.Errorf("memory store holds %d records, want %d", n, StoreCapacity)
	}
}

package learned

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/pool"
)

// --- Storage, errors and retention ---------------------------------------

func TestProcessLocalStateBoundedTo1024(t *testing.T) {
	h := newHarness(t, ModeApply)
	checkStoreHoldsAtMostCapacity(t, h)
}

func TestFullStoreRefusesNewScopesButKeepsServing(t *testing.T) {
	h := newHarness(t, ModeApply, withStore(NewMemoryStore(2)))
	h.becomeConfident(0)
	filler := h.event(pool.OutcomeThrottled, 0)
	filler.Identity = identity("k2", "api", "decide-mini", "")
	h.l.Observe(filler)
	// A third scope is refused with one warning; its Suggest falls back.
	for i := range 3 {
		ev := h.event(pool.OutcomeThrottled, 4*time.Minute+time.Duration(i)*time.Minute)
		ev.Identity = identity("k3", "api", "decide-mini", "")
		h.l.Observe(ev)
		if _, ok := h.l.Suggest(ev); ok {
			t.Error("a refused scope got a suggestion")
		}
	}
	if w := h.logs.Lines("reason=capacity"); len(w) != 1 {
		t.Errorf("capacity warnings = %d, want 1", len(w))
	}
	// The existing scope keeps learning and serving.
	if d, ok := h.throttle(next); !ok || d != 150*sec {
		t.Errorf("existing scope in a full store: %v, %v; want 150s", d, ok)
	}
	if s := h.l.Snapshot(); s.Fallbacks["capacity"] == 0 {
		t.Errorf("Snapshot.Fallbacks = %v", s.Fallbacks)
	}
}

func TestStateResetsOnRestart(t *testing.T) {
	h := newHarness(t, ModeApply)
	h.becomeConfident(0)
	// A restart: a new learner with a new memory store.
	restarted := newHarness(t, ModeApply)
	restarted.ev = h.ev
	if _, ok := restarted.throttle(time.Hour); ok {
		t.Error("learned state survived a restart")
	}
}

func TestSharedStoreAcrossProcesses(t *testing.T) {
	// Two processes sharing a store see one state per identity: the
	// identity digest is stable and the revision check serializes them.
	shared := NewMemoryStore(0)
	clk := clock.NewFake(epoch)
	a := newHarness(t, ModeApply, withStore(shared), withClock(clk))
	b := newHarness(t, ModeApply, withStore(shared), withClock(clk))
	a.throttle(0)
	b.throttle(60 * sec)
	a.throttle(120 * sec)
	b.success(180 * sec)
	if _, ok := a.throttle(next); !ok {
		t.Error("process a did not use evidence gathered by both")
	}
}

func TestStateExpiresSevenDaysAfterCreationNotExtended(t *testing.T) {
	h := newHarness(t, ModeApply)
	h.becomeConfident(0)
	// Observations keep coming for six days; none extends the lifetime.
	for day := 1; day <= 6; day++ {
		at := time.Duration(day) * 24 * time.Hour
		h.throttle(at)
		h.success(at + 170*sec)
	}
	h.throttle(Retention - 10*time.Minute) // refreshes the evidence
	if _, ok := h.throttle(Retention - 9*time.Minute); !ok {
		t.Fatal("no suggestion before expiry")
	}
	h.at(Retention)
	if _, ok := h.state(); ok {
		t.Fatal("state readable 7 days after creation")
	}
	if _, ok := h.throttle(Retention + time.Minute); ok {
		t.Error("a suggestion from expired state")
	}
	if st := h.mustState(); st.conf != 0 || st.lo != 1000 || st.hi != 3_600_000 {
		t.Errorf("after expiry a new state starts at 1-3600 s: lo=%d hi=%d conf=%d", st.lo, st.hi, st.conf)
	}
}

func TestUnavailableStoreFallsBackWithOneWarning(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
	}{
		{"missing table", errors.Join(ErrUnavailable, errors.New("no such table: learned_cooldown"))},
		{"database down", errors.New("database is locked")},
		{"timeout", context.DeadlineExceeded},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := &funcStore{
				get: func(context.Context, string, time.Time) (Record, bool, error) { return Record{}, false, c.err },
				put: func(context.Context, Record, int64, time.Time) (int64, error) { return 0, c.err },
			}
			h := newHarness(t, ModeApply, withStore(store))
			for i := range 20 {
				if _, ok := h.throttle(time.Duration(i) * time.Minute); ok {
					t.Fatal("a suggestion without storage")
				}
				h.success(time.Duration(i)*time.Minute + 30*sec)
			}
			w := h.logs.Lines("level=WARN")
			if len(w) != 1 || !strings.Contains(w[0], "reason=unavailable") {
				t.Errorf("warnings = %q, want one with reason=unavailable", w)
			}
		})
	}
}

func TestStaleRevisionIsRefusedAndPreventsApplying(t *testing.T) {
	inner := NewMemoryStore(0)
	h := newHarness(t, ModeApply, withStore(inner))
	h.becomeConfident(0)
	// Another process writes between every read and write of this one.
	var mu sync.Mutex
	racing := &funcStore{
		get: func(ctx context.Context, id string, now time.Time) (Record, bool, error) {
			mu.Lock()
			defer mu.Unlock()
			rec, ok, err := inner.Get(ctx, id, now)
			if ok {
				_, _ = inner.Put(ctx, rec, rec.Revision, now) // bump the revision
			}
			return rec, ok, err
		},
		put: inner.Put,
	}
	h.l = New(Config{Mode: ModeApply, Policy: mustPolicy(t, testPolicy), Store: racing, Logger: h.l.log, Clock: h.clk})
	if _, ok := h.throttle(next); ok {
		t.Error("a suggestion whose write was refused for a stale revision")
	}
	if w := h.logs.Lines("reason=stale_revision"); len(w) != 1 {
		t.Errorf("stale warnings = %d, want 1", len(w))
	}
	if st := h.mustState(); st.steps != 0 {
		t.Error("a refused put spent a step")
	}
	// A single lost race is retried once and succeeds.
	once := true
	retry := &funcStore{
		get: func(ctx context.Context, id string, now time.Time) (Record, bool, error) {
			rec, ok, err := inner.Get(ctx, id, now)
			if ok && once {
				once = false
				_, _ = inner.Put(ctx, rec, rec.Revision, now)
			}
			return rec, ok, err
		},
		put: inner.Put,
	}
	h.l = New(Config{Mode: ModeApply, Policy: mustPolicy(t, testPolicy), Store: retry, Clock: h.clk})
	if _, ok := h.throttle(next + 2*time.Minute); !ok {
		t.Error("one lost race was not retried")
	}
}

// TestStaleRevisionIsRetriedOnce: rotor's departure from the spec (README,
// "Cooldowns"). A put refused for a stale revision is retried once on the
// fresh state, by Observe and by Suggest alike, and never more: against a
// store that always loses the race each call makes exactly two puts.
func TestStaleRevisionIsRetriedOnce(t *testing.T) {
	inner := NewMemoryStore(0)
	h := newHarness(t, ModeApply, withStore(inner))
	h.becomeConfident(0)
	puts := 0
	racing := &funcStore{
		get: func(ctx context.Context, id string, now time.Time) (Record, bool, error) {
			rec, ok, err := inner.Get(ctx, id, now)
			if ok {
				_, _ = inner.Put(ctx, rec, rec.Revision, now) // another process writes first
			}
			return rec, ok, err
		},
		put: func(ctx context.Context, rec Record, rev int64, now time.Time) (int64, error) {
			puts++
			return inner.Put(ctx, rec, rev, now)
		},
	}
	h.l = New(Config{Mode: ModeApply, Policy: mustPolicy(t, testPolicy), Store: racing, Logger: h.l.log, Clock: h.clk})
	ev := h.event(pool.OutcomeThrottled, next)
	h.l.Observe(ev)
	if puts != 2 {
		t.Errorf("Observe made %d puts against a store that always loses the race, want 2: one retry", puts)
	}
	puts = 0
	if _, ok := h.l.Suggest(ev); ok {
		t.Error("a suggestion whose writes were all refused")
	}
	if puts != 2 {
		t.Errorf("Suggest made %d puts against a store that always loses the race, want 2: one retry", puts)
	}
}

func TestInvalidStoredStatePreventsApplying(t *testing.T) {
	for _, c := range []struct {
		name    string
		corrupt func([]byte) []byte
		healed  bool
	}{
		{"bit flip", func(b []byte) []byte { b[3] ^= 0x40; return b }, true},
		{"truncated", func(b []byte) []byte { return b[:10] }, true},
		{"bounds crossed", func(b []byte) []byte {
			st, _ := decodeState(b)
			st.lo, st.hi = st.hi, st.lo
			return st.encode()
		}, true},
		// States no binary writes, though their CRC is right: each is
		// replaced, not trusted.
		{"too many trial steps", func(b []byte) []byte {
			st, _ := decodeState(b)
			st.steps = MaxTrialSteps + 1
			return st.encode()
		}, true},
		{"negative time", func(b []byte) []byte {
			st, _ := decodeState(b)
			st.refused = -1
			return st.encode()
		}, true},
		{"decided after the latest observation", func(b []byte) []byte {
			st, _ := decodeState(b)
			st.anchor, st.last, st.until, st.decidedAt = 1_000, 2_000, 3_000, 2_500
			return st.encode()
		}, true},
		{"unknown version", func(b []byte) []byte { b[0] = 9; return b }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, ModeApply)
			h.becomeConfident(0)
			ctx := context.Background()
			rec, _, _ := h.store.Get(ctx, h.ev.Identity, h.clk.Now())
			if _, err := h.store.Put(ctx, Record{ID: rec.ID, State: c.corrupt(rec.State)}, rec.Revision, h.clk.Now()); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if _, ok := h.throttle(time.Hour + time.Duration(i)*time.Hour); ok {
					t.Fatal("a suggestion from invalid state")
				}
			}
			if w := h.logs.Lines("reason=invalid_state"); len(w) != 1 {
				t.Errorf("warnings = %d, want 1", len(w))
			}
			rec, _, _ = h.store.Get(ctx, h.ev.Identity, h.clk.Now())
			_, err := decodeState(rec.State)
			if healed := err == nil; healed != c.healed {
				t.Errorf("state rewritten = %v, want %v (a newer binary's state is left alone)", healed, c.healed)
			}
		})
	}
}

func TestConcurrentUseIsSafe(t *testing.T) {
	h := newHarness(t, ModeApply)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				ev := h.ev
				ev.Identity = identity("k", "api", "decide-mini", string(rune('a'+g%3)))
				ev.At = epoch.Add(time.Duration(i) * 7 * sec)
				ev.Outcome = pool.OutcomeThrottled
				if i%3 == 0 {
					ev.Outcome = pool.OutcomeSuccess
				}
				h.l.Observe(ev)
				h.l.Suggest(ev)
				_ = h.l.Snapshot()
			}
		}()
	}
	wg.Wait()
	for _, k := range "abc" {
		if _, ok := storedState(t, h.store, identity("k", "api", "decide-mini", string(k)), h.clk.Now()); !ok {
			t.Errorf("no state for scope %c", k)
		}
	}
}

func TestStateEncoding(t *testing.T) {
	st := state{lo: 61_000, hi: 180_500, conf: 7, steps: 12, last: 1_767_225_780_000, anchor: 1_767_225_600_000,
		until: 1_767_225_840_000, hintUntil: 1_767_225_900_000, decidedAt: 1_767_225_780_000}
	checkRoundTripAndFlips(t, st)
	if _, err := decodeState(nil); !errors.Is(err, errStateCorrupt) {
		t.Errorf("decode(nil) = %v", err)
	}
}

func TestStaleLongerWaitIsRefreshedByExistingCooldown(t *testing.T) {
	t.Run("refusal confirms", func(t *testing.T) {
		h := newHarness(t, ModeApply)
		h.becomeConfident(0) // (120, 180]; the last refusal at 120 s
		// 20 minutes on, a wait longer than the existing 60 s lacks a
		// recent refusal: the existing cooldown goes first.
		if d, ok := h.throttle(20 * time.Minute); ok {
			t.Fatalf("stale evidence applied: %v", d)
		}
		// Its retry is refused: fresh evidence; the learner takes the rest
		// of the episode: the trial at 150 s, 60 s in.
		d, ok := h.throttle(21 * time.Minute)
		if !ok || d != 90*sec {
			t.Errorf("after the refresh: %v, %v; want 90s", d, ok)
		}
	})
	t.Run("recovery below lo contradicts", func(t *testing.T) {
		h := newHarness(t, ModeApply)
		h.becomeConfident(0)
		h.throttle(20 * time.Minute)
		h.success(21 * time.Minute) // the provider got faster: R <= 60 < lo
		if st := h.mustState(); st.conf != 0 || st.lo != 30_000 || st.hi != 3_600_000 {
			t.Errorf("after a faster recovery: lo=%d hi=%d conf=%d; want 30000 3600000 0", st.lo, st.hi, st.conf)
		}
	})
	t.Run("shadow reports not ready", func(t *testing.T) {
		h := newHarness(t, ModeShadow)
		h.becomeConfident(0)
		h.throttle(20 * time.Minute)
		lines := h.logs.Lines("learned cooldown suggestion")
		if last := lines[len(lines)-1]; !strings.Contains(last, "ready=false") {
			t.Errorf("stale shadow report %q, want ready=false", last)
		}
	})
	t.Run("waits no longer than the existing cooldown need no refresh", func(t *testing.T) {
		h := newHarness(t, ModeApply)
		// Advice of 5 s gives the evidence (10, 15] s.
		h.throttleHint(0, 5)
		h.throttleHint(5*sec, 5)
		h.throttleHint(10*sec, 5)
		h.success(15 * sec)
		if d, ok := h.throttle(2 * time.Hour); !ok || d > simFallback {
			t.Errorf("a learned wait under the existing 60 s: %v, %v; want it applied", d, ok)
		}
	})
}

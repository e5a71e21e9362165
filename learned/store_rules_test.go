package learned

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestDecodeRefusesStatesObserveNeverKeeps: a shared ledger's record with
// a right CRC but a base field no rotor writes (bounds outside 1-3,600 s
// or crossed, episode times out of order, a negative budget time, bytes
// after the CRC) is corrupt and replaced, never trusted.
func TestDecodeRefusesStatesObserveNeverKeeps(t *testing.T) {
	open := state{lo: 61_000, hi: 180_500, conf: 3, steps: 4,
		last: 1_767_225_780_000, anchor: 1_767_225_600_000, until: 1_767_225_840_000}
	if _, err := decodeState(open.encode()); err != nil {
		t.Fatalf("base state refused: %v", err)
	}
	adapt := writtenState()
	if _, err := decodeState(adapt.encode()); err != nil {
		t.Fatalf("base adapt state refused: %v", err)
	}
	for _, c := range []struct {
		name string
		enc  func() []byte
	}{
		{"lo under a second", func() []byte { s := open; s.lo = minBoundMS - 1; return s.encode() }},
		{"hi over 3,600 s", func() []byte { s := open; s.hi = maxBoundMS + 1; return s.encode() }},
		{"lo equal to hi", func() []byte { s := open; s.lo = s.hi; return s.encode() }},
		{"no episode but a cooldown end", func() []byte {
			s := open
			s.anchor, s.until, s.hintUntil, s.decidedAt = 0, 0, 0, 0
			s.until = s.last
			return s.encode()
		}},
		{"no episode but advice", func() []byte {
			s := open
			s.anchor, s.until, s.hintUntil, s.decidedAt = 0, 0, 0, 0
			s.hintUntil = s.last
			return s.encode()
		}},
		{"latest observation before the episode", func() []byte { s := open; s.last = s.anchor - 1; return s.encode() }},
		{"cooldown ending at the episode's start", func() []byte { s := open; s.until = s.anchor; return s.encode() }},
		{"negative budget time", func() []byte { s := writtenState(); s.budgetAt = -1; return s.encode() }},
		{"bytes after the CRC", func() []byte { return append(open.encode(), 0) }},
		{"adapt bytes after the CRC", func() []byte { s := writtenState(); return append(s.encode(), 0) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := decodeState(c.enc()); !errors.Is(err, errStateCorrupt) {
				t.Errorf("decodeState = %v, want errStateCorrupt", err)
			}
		})
	}
}

// TestIdentitiesOfOtherShapesAreNeverStored: only lowercase hex digests
// of 128 to 512 bits reach the store. A key-shaped string of letters past
// f, a digest too short to be the pool's HMAC, or one longer than a store
// holds is refused before any storage operation.
func TestIdentitiesOfOtherShapesAreNeverStored(t *testing.T) {
	store := &countingStore{inner: NewMemoryStore(0)}
	h := newHarness(t, ModeApply, withStore(store))
	id := identity("k", "", "", "")
	for _, bad := range []string{
		strings.Repeat("skcanary0123456789", 3)[:48], // letters past f
		id[:16],                               // 64 bits
		id[:30],                               // under 128 bits
		strings.Repeat(id, 3)[:MaxIDLength+2], // past what a store holds
	} {
		h.ev.Identity = bad
		h.throttle(0)
	}
	if g, p := store.ops(); g+p != 0 {
		t.Errorf("events without a valid identity digest did %d storage operations", g+p)
	}
	// The longest identity accepted is stored.
	h.ev.Identity = strings.Repeat(id, 2)[:MaxIDLength]
	h.throttle(time.Minute)
	if _, ok := storedState(t, store, h.ev.Identity, h.clk.Now()); !ok {
		t.Errorf("a %d-digit identity was not stored", MaxIDLength)
	}
}

// TestStoreOperationsHaveTheDefaultTimeout: with no StoreTimeout (as the
// bridge wires the learner), every storage operation gets a context that
// ends within DefaultStoreTimeout, and is released when it returns.
func TestStoreOperationsHaveTheDefaultTimeout(t *testing.T) {
	inner := NewMemoryStore(0)
	var ctxs []context.Context
	check := func(ctx context.Context) {
		ctxs = append(ctxs, ctx)
		d, ok := ctx.Deadline()
		if left := time.Until(d); !ok || left <= 0 || left > DefaultStoreTimeout {
			t.Errorf("storage operation with deadline %v (set %v), want within %v", left, ok, DefaultStoreTimeout)
		}
	}
	store := &funcStore{
		get: func(ctx context.Context, id string, now time.Time) (Record, bool, error) {
			check(ctx)
			return inner.Get(ctx, id, now)
		},
		put: func(ctx context.Context, rec Record, rev int64, now time.Time) (int64, error) {
			check(ctx)
			return inner.Put(ctx, rec, rev, now)
		},
	}
	h := newHarness(t, ModeApply, withStore(store))
	h.throttle(0)
	if len(ctxs) < 2 {
		t.Fatalf("%d storage operations, want a get and a put", len(ctxs))
	}
	for i, ctx := range ctxs {
		if ctx.Err() == nil {
			t.Errorf("operation %d's context still live after it returned", i)
		}
	}
}

// TestMemoryStoreReclaimsAfterTheClockWentBack: a record created after
// the wall clock was set back expires first; a write past its expiry
// reclaims it and makes room, though an older record lives on.
func TestMemoryStoreReclaimsAfterTheClockWentBack(t *testing.T) {
	m := NewMemoryStore(2)
	ctx := context.Background()
	id := func(i int) string { return identity("k", "api", "m", string(rune('a'+i))) }
	if _, err := m.Put(ctx, Record{ID: id(0), State: []byte("a")}, 0, epoch.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Put(ctx, Record{ID: id(1), State: []byte("b")}, 0, epoch); err != nil { // the clock went back
		t.Fatal(err)
	}
	now := epoch.Add(Retention + time.Minute) // b expired, a lives
	if _, ok, _ := m.Get(ctx, id(1), now); ok {
		t.Fatal("b read after its expiry")
	}
	if _, err := m.Put(ctx, Record{ID: id(2), State: []byte("c")}, 0, now); err != nil {
		t.Errorf("a new record once b expired = %v, want it stored in b's place", err)
	}
}

// TestPolicySyntaxErrorsQuoteNoCharacter: encoding/json's syntax errors
// quote the offending input character ("invalid character 's' looking
// for beginning of value"); a policy error names only the offset, so that
// not even the first character of a pasted secret reaches the warning.
func TestPolicySyntaxErrorsQuoteNoCharacter(t *testing.T) {
	for _, raw := range []string{
		`sk-canary`,
		`{"buckets":[{"provider":sk-canary}]}`,
		`{"buckets":[{"provider":"api","model":"m","quota_bucket":nul}]}`,
		`{"buckets":[{"provider":"api" "model":"m"}]}`,
	} {
		_, err := ParsePolicy(raw)
		if err == nil {
			t.Fatalf("ParsePolicy(%q) accepted", raw)
		}
		if strings.Contains(err.Error(), "'") || strings.Contains(err.Error(), "invalid character") {
			t.Errorf("ParsePolicy(%q) error quotes an input character: %v", raw, err)
		}
	}
}

// Package storetest is the conformance suite of learned.Store: the spec's
// rules for the learned-state storage domain, run against any
// implementation (the memory store in package learned, the SQLite store in
// package ledger).
//
// It imports only package learned, pool and the standard library.
// deadcode without -test lists it, on purpose: only tests use it
// (`deadcode -test ./...` is the check).
package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/learned"
	"github.com/rotorhq/rotor/pool"
)

// t0 is the suite's epoch, at millisecond precision like stored times.
var t0 = time.UnixMilli(1_767_225_600_000) // 2026-01-01T00:00:00Z

// Run runs the suite. open must return a new, empty store for each call
// (t.TempDir and t.Cleanup are the caller's tools); the store must hold
// learned.StoreCapacity records.
func Run(t *testing.T, open func(t *testing.T) learned.Store) {
	t.Run("GetMissing", func(t *testing.T) { testGetMissing(t, open(t)) })
	t.Run("PutThenGet", func(t *testing.T) { testPutThenGet(t, open(t)) })
	t.Run("StaleRevisionRefused", func(t *testing.T) { testStaleRevision(t, open(t)) })
	t.Run("InvalidRecordRefused", func(t *testing.T) { testInvalidRecord(t, open(t)) })
	t.Run("ExpirySevenDaysFromCreationNotExtended", func(t *testing.T) { testExpiry(t, open(t)) })
	t.Run("ExpiredRecordIsAbsentAndReplaceable", func(t *testing.T) { testExpiredReplaceable(t, open(t)) })
	t.Run("CapacityRefusesNewScopesKeepsUpdates", func(t *testing.T) { testCapacity(t, open(t)) })
	t.Run("WritesReclaimExpiredRows", func(t *testing.T) { testReclaim(t, open(t)) })
	t.Run("NoNamesStored", func(t *testing.T) { testNoNames(t, open(t)) })
}

// ID returns the i-th test identity, a 64-digit hex digest like the pool's.
func ID(i int) string { return fmt.Sprintf("%064x", i+1) }

func put(t *testing.T, s learned.Store, id string, state string, rev int64, now time.Time) int64 {
	t.Helper()
	got, err := s.Put(context.Background(), learned.Record{ID: id, State: []byte(state)}, rev, now)
	if err != nil {
		t.Fatalf("Put(%s…, rev %d) = %v", id[:8], rev, err)
	}
	if got <= rev {
		t.Fatalf("Put(%s…, rev %d) = revision %d, want more than %d", id[:8], rev, got, rev)
	}
	return got
}

func get(t *testing.T, s learned.Store, id string, now time.Time) (learned.Record, bool) {
	t.Helper()
	rec, ok, err := s.Get(context.Background(), id, now)
	if err != nil {
		t.Fatalf("Get(%s…) = %v", id[:8], err)
	}
	return rec, ok
}

func testGetMissing(t *testing.T, s learned.Store) {
	if rec, ok := get(t, s, ID(0), t0); ok {
		t.Errorf("Get on an empty store = %+v, true; want absent", rec)
	}
}

func testPutThenGet(t *testing.T, s learned.Store) {
	rev := put(t, s, ID(0), "state-1", 0, t0)
	rec, ok := get(t, s, ID(0), t0.Add(time.Second))
	if !ok {
		t.Fatal("Get after Put: absent")
	}
	if rec.ID != ID(0) || string(rec.State) != "state-1" || rec.Revision != rev {
		t.Errorf("Get = {%s… %q rev %d}, want {%s… %q rev %d}", rec.ID[:8], rec.State, rec.Revision, ID(0)[:8], "state-1", rev)
	}
	if got, want := rec.CreatedAt.UnixMilli(), t0.UnixMilli(); got != want {
		t.Errorf("CreatedAt = %d, want %d (the put's now)", got, want)
	}
	if got, want := rec.ExpiresAt.UnixMilli(), t0.Add(learned.Retention).UnixMilli(); got != want {
		t.Errorf("ExpiresAt = %d, want CreatedAt + 7 days = %d", got, want)
	}
	rev2 := put(t, s, ID(0), "state-2", rev, t0.Add(2*time.Second))
	rec, _ = get(t, s, ID(0), t0.Add(3*time.Second))
	if string(rec.State) != "state-2" || rec.Revision != rev2 {
		t.Errorf("after update Get = {%q rev %d}, want {%q rev %d}", rec.State, rec.Revision, "state-2", rev2)
	}
	// The store must not alias the caller's bytes, on Put or on Get.
	buf := []byte("state-3")
	if _, err := s.Put(context.Background(), learned.Record{ID: ID(1), State: buf}, 0, t0); err != nil {
		t.Fatalf("Put(%s…) = %v", ID(1)[:8], err)
	}
	buf[0] = 'P'
	rec, _ = get(t, s, ID(1), t0)
	if string(rec.State) != "state-3" {
		t.Errorf("state changed through the put's slice: %q", rec.State)
	}
	rec.State[0] = 'X'
	if again, _ := get(t, s, ID(1), t0); string(again.State) != "state-3" {
		t.Errorf("state changed through a returned slice: %q", again.State)
	}
}

func testStaleRevision(t *testing.T, s learned.Store) {
	ctx := context.Background()
	rev := put(t, s, ID(0), "a", 0, t0)
	cases := []struct {
		name string
		id   string
		rev  int64
	}{
		{"create over a live record", ID(0), 0},
		{"old revision", ID(0), rev - 1},
		{"future revision", ID(0), rev + 1},
		{"update of an absent record", ID(1), 1},
	}
	for _, c := range cases {
		if c.rev < 0 {
			continue
		}
		_, err := s.Put(ctx, learned.Record{ID: c.id, State: []byte("b")}, c.rev, t0.Add(time.Second))
		if !errors.Is(err, learned.ErrStaleRevision) {
			t.Errorf("%s: Put(rev %d) = %v, want ErrStaleRevision", c.name, c.rev, err)
		}
	}
	// Two writers read the same revision; only the first put wins.
	rev2 := put(t, s, ID(0), "writer-1", rev, t0.Add(2*time.Second))
	if _, err := s.Put(ctx, learned.Record{ID: ID(0), State: []byte("writer-2")}, rev, t0.Add(2*time.Second)); !errors.Is(err, learned.ErrStaleRevision) {
		t.Errorf("second writer's Put(rev %d) = %v, want ErrStaleRevision", rev, err)
	}
	rec, _ := get(t, s, ID(0), t0.Add(3*time.Second))
	if string(rec.State) != "writer-1" || rec.Revision != rev2 {
		t.Errorf("after the race Get = {%q rev %d}, want {%q rev %d}", rec.State, rec.Revision, "writer-1", rev2)
	}
	if _, ok := get(t, s, ID(1), t0); ok {
		t.Error("a refused put created a record")
	}
}

func testInvalidRecord(t *testing.T, s learned.Store) {
	ctx := context.Background()
	cases := []struct {
		name string
		rec  learned.Record
		rev  int64
	}{
		{"empty id", learned.Record{State: []byte("x")}, 0},
		{"overlong id", learned.Record{ID: strings.Repeat("a", learned.MaxIDLength+1), State: []byte("x")}, 0},
		{"empty state", learned.Record{ID: ID(0)}, 0},
		{"oversized state", learned.Record{ID: ID(0), State: bytes.Repeat([]byte("x"), learned.MaxStateSize+1)}, 0},
		{"negative revision", learned.Record{ID: ID(0), State: []byte("x")}, -1},
	}
	for _, c := range cases {
		if _, err := s.Put(ctx, c.rec, c.rev, t0); !errors.Is(err, learned.ErrInvalidRecord) {
			t.Errorf("%s: Put = %v, want ErrInvalidRecord", c.name, err)
		}
	}
	if _, ok := get(t, s, ID(0), t0); ok {
		t.Error("an invalid put created a record")
	}
	// The limits themselves are valid: an ID of MaxIDLength characters
	// and a state of MaxStateSize bytes are stored whole.
	long, full := strings.Repeat("a", learned.MaxIDLength), bytes.Repeat([]byte("x"), learned.MaxStateSize)
	if _, err := s.Put(ctx, learned.Record{ID: long, State: full}, 0, t0); err != nil {
		t.Fatalf("Put of a record at the limits = %v, want it stored", err)
	}
	if rec, ok := get(t, s, long, t0); !ok || !bytes.Equal(rec.State, full) {
		t.Errorf("record at the limits: Get = %d bytes, %v; want %d bytes", len(rec.State), ok, learned.MaxStateSize)
	}
}

func testExpiry(t *testing.T, s learned.Store) {
	rev := put(t, s, ID(0), "a", 0, t0)
	// Observations keep arriving; none extends the lifetime.
	for day := 1; day <= 6; day++ {
		rev = put(t, s, ID(0), fmt.Sprintf("day-%d", day), rev, t0.Add(time.Duration(day)*24*time.Hour))
	}
	rec, ok := get(t, s, ID(0), t0.Add(learned.Retention-time.Millisecond))
	if !ok {
		t.Fatal("record absent a millisecond before it expires")
	}
	if got, want := rec.CreatedAt.UnixMilli(), t0.UnixMilli(); got != want {
		t.Errorf("CreatedAt after updates = %d, want %d", got, want)
	}
	if got, want := rec.ExpiresAt.UnixMilli(), t0.Add(learned.Retention).UnixMilli(); got != want {
		t.Errorf("ExpiresAt after updates = %d, want %d (never extended)", got, want)
	}
	if rec, ok := get(t, s, ID(0), t0.Add(learned.Retention)); ok {
		t.Errorf("Get at CreatedAt + 7 days = rev %d, want absent", rec.Revision)
	}
	_, err := s.Put(context.Background(), learned.Record{ID: ID(0), State: []byte("late")}, rev, t0.Add(learned.Retention))
	if !errors.Is(err, learned.ErrStaleRevision) {
		t.Errorf("update of an expired record = %v, want ErrStaleRevision", err)
	}
}

func testExpiredReplaceable(t *testing.T, s learned.Store) {
	put(t, s, ID(0), "old", 0, t0)
	later := t0.Add(learned.Retention + time.Hour)
	put(t, s, ID(0), "new", 0, later)
	rec, ok := get(t, s, ID(0), later)
	if !ok || string(rec.State) != "new" {
		t.Fatalf("Get after re-creating an expired record = %q, %v; want %q", rec.State, ok, "new")
	}
	if got, want := rec.CreatedAt.UnixMilli(), later.UnixMilli(); got != want {
		t.Errorf("re-created CreatedAt = %d, want %d", got, want)
	}
}

func testCapacity(t *testing.T, s learned.Store) {
	ctx := context.Background()
	revs := make([]int64, learned.StoreCapacity)
	for i := range learned.StoreCapacity {
		revs[i] = put(t, s, ID(i), "x", 0, t0)
	}
	now := t0.Add(time.Hour)
	_, err := s.Put(ctx, learned.Record{ID: ID(learned.StoreCapacity), State: []byte("x")}, 0, now)
	if !errors.Is(err, learned.ErrCapacity) {
		t.Fatalf("Put of scope %d into a full store = %v, want ErrCapacity", learned.StoreCapacity+1, err)
	}
	if _, ok := get(t, s, ID(learned.StoreCapacity), now); ok {
		t.Error("a refused scope was stored")
	}
	// Existing scopes keep working: reads and updates.
	for _, i := range []int{0, learned.StoreCapacity / 2, learned.StoreCapacity - 1} {
		put(t, s, ID(i), "updated", revs[i], now)
		if rec, ok := get(t, s, ID(i), now); !ok || string(rec.State) != "updated" {
			t.Errorf("scope %d in a full store: Get = %q, %v; want %q", i, rec.State, ok, "updated")
		}
	}
}

func testReclaim(t *testing.T, s learned.Store) {
	half := learned.StoreCapacity / 2
	for i := range half {
		put(t, s, ID(i), "old", 0, t0)
	}
	for i := half; i < learned.StoreCapacity; i++ {
		put(t, s, ID(i), "young", 0, t0.Add(24*time.Hour))
	}
	// The old half has expired: its rows must not count against capacity.
	now := t0.Add(learned.Retention)
	for i := learned.StoreCapacity; i < learned.StoreCapacity+half; i++ {
		put(t, s, ID(i), "new", 0, now)
	}
	_, err := s.Put(context.Background(), learned.Record{ID: ID(learned.StoreCapacity + half), State: []byte("x")}, 0, now)
	if !errors.Is(err, learned.ErrCapacity) {
		t.Errorf("Put beyond capacity after reclaiming = %v, want ErrCapacity", err)
	}
	if _, ok := get(t, s, ID(0), now); ok {
		t.Error("an expired record is still read")
	}
	if _, ok := get(t, s, ID(half), now); !ok {
		t.Error("a live record was reclaimed")
	}
}

// testNoNames drives a learner over the store with distinctive names and
// checks that what is stored is keyed by the identity digest and holds no
// name.
func testNoNames(t *testing.T, s learned.Store) {
	const provider, model, bucket = "api", "canary-model-7f3a", "canary-bucket-9c1e"
	policy, err := learned.ParsePolicy(`{"buckets":[{"provider":"api","model":"canary-model-7f3a","quota_bucket":"canary-bucket-9c1e"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	l := learned.New(learned.Config{Mode: learned.ModeApply, Policy: policy, Store: s})
	id := ID(42)
	at := time.Now().Truncate(time.Millisecond)
	for i, o := range []pool.Outcome{pool.OutcomeThrottled, pool.OutcomeThrottled, pool.OutcomeSuccess} {
		l.Observe(pool.LearnEvent{Provider: provider, Model: model, QuotaBucket: bucket, Identity: id,
			Outcome: o, At: at.Add(time.Duration(i) * 2 * time.Minute)})
	}
	rec, ok := get(t, s, id, time.Now())
	if !ok {
		t.Fatal("the learner stored nothing under the identity digest")
	}
	for _, name := range []string{model, bucket, "canary"} {
		if bytes.Contains(rec.State, []byte(name)) || strings.Contains(rec.ID, name) {
			t.Errorf("stored record holds %q", name)
		}
	}
}

package pool

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/secret"
)

func quiet(c *Config) { c.Logger = nil }

// fill records n throttles of credential name, one model each, for the
// given seconds.
func fill(f *fixture, name string, n int, seconds float64) {
	for i := range n {
		f.record(name, throttleFor(Scope{Model: fmt.Sprintf("m%05d", i)}, seconds))
	}
}

// Privacy.

func TestCooldownStateHoldsNoKeyOrModelName(t *testing.T) {
	const model, bucket, member = "model-canary-9f3a", "bucket-canary-77", "member-canary-31"
	key := secret.New("sk-canary-deadbeefdeadbeefdeadbeef")
	learner := &fakeLearner{}
	f := newFixture(t, withLearner(learner), func(c *Config) {
		c.Credentials = []Credential{{Name: "a", Key: key}, testCreds[1]}
		c.Options.QuotaBuckets = map[string][]string{bucket: {member}}
	})
	f.record("a", throttleFor(Scope{Model: model}, 30))
	f.record("a", throttle(Scope{Model: member, QuotaBucket: bucket}))
	f.record("a", status(Scope{Model: model}, 401))
	f.record("b", throttle(Scope{Model: model}))
	f.record("b", Observation{Scope: Scope{Model: model}, Status: 401, Catalog: true})
	_, selErr := f.pool.Select(Scope{Model: model}, nil)

	secrets := []string{key.Reveal(), testCreds[1].Key.Reveal(), model, bucket, member}

	// Structurally, an observation holds fixed-size digests and integers:
	// no string, slice, pointer or interface that could carry a name.
	for _, typ := range []reflect.Type{reflect.TypeFor[obsKey](), reflect.TypeFor[slot]()} {
		if k := kindsIn(typ); k != "" {
			t.Errorf("%v holds a %s", typ, k)
		}
	}

	// Dynamically: the store's memory, formatted and raw.
	f.store.mu.Lock()
	var raw bytes.Buffer
	for k, i := range f.store.index {
		raw.Write(k.cred[:])
		raw.Write(k.scope[:])
		sl := f.store.slots[i]
		raw.Write(sl.key.cred[:])
		raw.Write(sl.key.scope[:])
	}
	dumps := []string{
		raw.String(),
		fmt.Sprintf("%#v", f.store),
		fmt.Sprintf("%#v %#v %#v", f.store.index, f.store.slots, f.store.heap),
	}
	f.store.mu.Unlock()
	l := f.store.hashers.Get().(*labeler)
	dumps = append(dumps, string(l.buf[:cap(l.buf)]))
	f.store.hashers.Put(l)

	// What the pool shows and says.
	snap := f.pool.Snapshot()
	js, _ := json.Marshal(snap)
	dumps = append(dumps, string(js), fmt.Sprintf("%+v", snap), f.logs.String(), selErr.Error())
	for _, ev := range learner.observed {
		dumps = append(dumps, ev.Identity)
	}
	for i, d := range dumps {
		for _, s := range secrets {
			if strings.Contains(d, s) {
				t.Errorf("dump %d holds %q", i, s)
			}
		}
	}
	if !strings.Contains(f.logs.String(), `"msg":"credential cooling down"`) {
		t.Errorf("logs = %s, want cooling lines", f.logs.String())
	}
}

// kindsIn returns the first kind in typ that could hold a name.
func kindsIn(typ reflect.Type) string {
	switch typ.Kind() {
	case reflect.String, reflect.Slice, reflect.Pointer, reflect.Interface, reflect.Map, reflect.UnsafePointer, reflect.Chan, reflect.Func:
		return typ.Kind().String()
	case reflect.Array:
		return kindsIn(typ.Elem())
	case reflect.Struct:
		for i := range typ.NumField() {
			if k := kindsIn(typ.Field(i).Type); k != "" {
				return k
			}
		}
	}
	return ""
}

func TestCooldownLogsNameNoKeyOrModel(t *testing.T) {
	f := newFixture(t, withStoreLimit(1))
	f.record("a", throttleFor(modelA, 12))
	f.record("b", throttleFor(mini, 3))
	f.record("c", status(modelB, 401))
	logs := f.logs.String()
	for _, want := range []string{
		`"level":"INFO","msg":"credential cooling down","pool":"api","credential":"a","scope_kind":"model","seconds":12`,
		`"level":"WARN","msg":"cooldown store full; new scoped admission fails closed","pool":"api","capacity":1,"seconds":3`,
		`"credential":"c","scope_kind":"legacy","seconds":300`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("logs lack %s:\n%s", want, logs)
		}
	}
	for _, s := range []string{"model-alpha", "model-beta", "decide-mini", "shared", "sk-canary"} {
		if strings.Contains(logs, s) {
			t.Errorf("logs hold %q", s)
		}
	}
}

func TestCredentialIDsAreSaltedPoolNamespacedHMACs(t *testing.T) {
	key := testCreds[0].Key.Reveal()
	s1, s2 := NewStore(nil, 0), NewStore(nil, 0)
	id := s1.credentialID("api", key)
	if id != s1.credentialID("api", key) {
		t.Error("credential ID is not stable within a process")
	}
	if id == s2.credentialID("api", key) {
		t.Error("two stores share a salt: a restart would keep identities")
	}
	if id == s1.credentialID("zdr", key) {
		t.Error("credential ID ignores the pool namespace")
	}
	if s1.credentialID("ap", "i"+key) == id {
		t.Error("credential ID encoding is ambiguous")
	}
	plain := sha256.Sum256([]byte(key))
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte("api"))
	if id == digest(plain) || bytes.Equal(id[:], m.Sum(nil)) {
		t.Error("credential ID is an unsalted hash of the key")
	}
	labels := map[digest]string{}
	for _, kind := range []string{labelCredential, labelModel, labelBucket, labelAuthScope} {
		d := s1.label(kind, "same")
		if prev, dup := labels[d]; dup {
			t.Errorf("label kinds %s and %s collide", prev, kind)
		}
		labels[d] = kind
	}
}

// Pruning and the heap.

func TestExpiredObservationsArePruned(t *testing.T) {
	f := newFixture(t)
	f.record("a", throttleFor(modelA, 10))
	f.record("a", throttleFor(modelB, 20))
	f.record("b", throttleFor(modelA, 30))
	live := func() int {
		f.store.mu.Lock()
		defer f.store.mu.Unlock()
		if len(f.store.heap) != len(f.store.index) {
			t.Errorf("heap holds %d, index %d", len(f.store.heap), len(f.store.index))
		}
		return len(f.store.index)
	}
	if n := live(); n != 3 {
		t.Fatalf("live = %d, want 3", n)
	}
	f.clk.Advance(15 * time.Second)
	f.pool.Available(mini, nil) // a read prunes
	if n := live(); n != 2 {
		t.Errorf("live after a read at 15 s = %d, want 2", n)
	}
	f.clk.Advance(10 * time.Second)
	f.record("c", success(mini)) // a write prunes
	if n := live(); n != 1 {
		t.Errorf("live after a write at 25 s = %d, want 1", n)
	}
	f.clk.Advance(5 * time.Second)
	if n := f.store.Len(); n != 0 {
		t.Errorf("Len at 30 s = %d, want 0", n)
	}
	if n := live(); n != 0 {
		t.Errorf("live = %d, want 0", n)
	}
}

func TestStoreHeapMatchesModel(t *testing.T) {
	s := NewStore(nil, 64)
	want := map[obsKey]int64{}
	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([]obsKey, 100)
	for i := range keys {
		keys[i].cred[0], keys[i].scope[0] = byte(i), byte(i>>8)
	}
	var now int64
	for step := range 20000 {
		now += rng.Int64N(3)
		k := keys[rng.IntN(len(keys))]
		for kk, until := range want { // the model prunes too
			if until <= now {
				delete(want, kk)
			}
		}
		switch rng.IntN(3) {
		case 0, 1:
			until := now + 1 + rng.Int64N(50)
			kept, _ := s.put(k, until, 0, now)
			if cur, ok := want[k]; ok {
				want[k] = max(cur, until)
			} else if len(want) < s.limit {
				want[k] = until
			} else if kept {
				t.Fatalf("step %d: put kept an observation over the limit", step)
			}
		case 2:
			s.remove(k, now)
			delete(want, k)
		}
		s.prune(now)
		if len(s.index) != len(want) || len(s.heap) != len(want) {
			t.Fatalf("step %d: %d indexed, %d in heap, want %d", step, len(s.index), len(s.heap), len(want))
		}
		for kk, until := range want {
			if got := s.lookup(kk); got != until {
				t.Fatalf("step %d: lookup = %d, want %d", step, got, until)
			}
		}
		for j, i := range s.heap {
			if int(s.slots[i].pos) != j {
				t.Fatalf("step %d: slot %d pos %d, at %d", step, i, s.slots[i].pos, j)
			}
			if j > 0 && s.slots[s.heap[(j-1)/2]].until > s.slots[i].until {
				t.Fatalf("step %d: heap order broken at %d", step, j)
			}
		}
	}
}

// Capacity.

func TestCapacityTenThousandAndFirstFailsClosed(t *testing.T) {
	f := newFixture(t, quiet)
	fill(f, "a", DefaultStoreLimit, 3600)
	if n := f.store.Len(); n != DefaultStoreLimit {
		t.Fatalf("Len = %d, want %d", n, DefaultStoreLimit)
	}
	fresh := Scope{Model: "m-new"}
	f.record("a", throttleFor(fresh, 60)) // the 10,001st: dropped
	if n := f.store.Len(); n != DefaultStoreLimit {
		t.Errorf("Len after the 10,001st = %d, want %d", n, DefaultStoreLimit)
	}
	f.wantCapacity(fresh, 60*time.Second)
	f.wantCapacity(Scope{Model: "m00005"}, 60*time.Second) // b and c are available for it
	f.wantAvailable(fresh)
	_, err := f.pool.Select(fresh, nil)
	if ce, ok := errors.AsType[*CapacityError](err); !ok || ce.RetryAfter != 60*time.Second {
		t.Errorf("Select = %v; want a capacity error (503 model_cooldown_capacity) with 60 s", err)
	}
	// Every live observation stays.
	for i := range DefaultStoreLimit {
		s := Scope{Model: fmt.Sprintf("m%05d", i)}
		if d, ok := f.pool.NextRelease(s, []string{"a"}); !ok || d != time.Hour {
			t.Fatalf("observation %d: NextRelease = %v, %v; want 1h", i, d, ok)
		}
	}
	f.clk.Advance(60 * time.Second)
	f.wantSelect(fresh, "a")
	if n := f.store.Len(); n != DefaultStoreLimit {
		t.Errorf("Len after the guard = %d, want %d", n, DefaultStoreLimit)
	}
}

func TestKnownAllCoolingStill429AtCapacity(t *testing.T) {
	f := newFixture(t, quiet, func(c *Config) { c.Credentials = testCreds[:2] })
	fill(f, "a", DefaultStoreLimit-1, 3600)
	f.record("b", throttleFor(Scope{Model: "m00007"}, 1800))
	f.record("b", throttleFor(Scope{Model: "m-new"}, 60)) // dropped
	f.wantCapacity(Scope{Model: "m-new"}, 60*time.Second)
	f.wantExhausted(Scope{Model: "m00007"}, true, 1800*time.Second)
	_, err := f.pool.Select(Scope{Model: "m00007"}, nil)
	if ce, ok := errors.AsType[*CooldownExhaustedError](err); !ok || !ce.Scoped {
		t.Errorf("Select = %v; want a scoped cooldown (429 model_cooldown)", err)
	}
}

func TestCapacityFailureIsNotCredentialWideCooldown(t *testing.T) {
	f := newFixture(t, withStoreLimit(1), firstKeyFallback)
	legacy := New(Config{Options: Options{Name: "zdr"}, Credentials: testCreds, Store: f.store, Clock: f.clk})
	f.record("a", throttleFor(modelA, 3600))
	f.record("b", throttleFor(modelB, 90)) // dropped
	f.wantCapacity(modelB, 90*time.Second)
	// No credential rests because of it: not in the legacy map, not in the
	// store, and the unscoped and disabled paths select as usual.
	for _, c := range f.pool.Snapshot().Credentials {
		if !c.RestingUntil.IsZero() || !c.AuthCoolingUntil.IsZero() {
			t.Errorf("%s rests during the capacity guard: %+v", c.Name, c)
		}
	}
	f.wantAvailable(unscoped, "a", "b", "c")
	f.wantSelect(unscoped, "a")
	if c, err := legacy.Select(modelB, nil); err != nil || c.Name != "a" {
		t.Errorf("disabled pool Select = %q, %v; want a", c.Name, err)
	}
	if d, ok := f.pool.NextRelease(modelB, nil); ok {
		t.Errorf("NextRelease = %v: the guard is not a credential release", d)
	}
	f.clk.Advance(90 * time.Second)
	f.wantSelect(modelB, "a")
}

func TestOverflowDeadlineCoversOmittedTTL(t *testing.T) {
	f := newFixture(t, withStoreLimit(1), withMaxSeconds(300))
	f.record("a", throttleFor(modelA, 300)) // fills the store
	f.record("b", throttleFor(modelB, 100))
	f.wantCapacity(modelB, 100*time.Second)
	f.record("c", throttleFor(modelB, 10)) // a shorter omission keeps the later deadline
	f.wantCapacity(modelB, 100*time.Second)
	f.clk.Advance(50 * time.Second)
	f.record("b", throttleFor(mini, 200))
	f.wantCapacity(modelB, 200*time.Second)
	f.record("c", throttleFor(mini, 1e9)) // capped TTL
	f.wantCapacity(modelB, 300*time.Second)
	// An omitted auth observation raises the guard; its legacy rest holds.
	f.clk.Advance(300 * time.Second)
	f.record("a", throttleFor(modelA, 300))
	f.record("c", status(modelB, 401))
	f.wantCapacity(modelB, 300*time.Second)
	if !f.cooling("c", unscoped) {
		t.Error("c available unscoped after a dropped auth observation; its legacy rest must hold")
	}
}

func TestCapacityWarnsOnceWhenOverflowStarts(t *testing.T) {
	f := newFixture(t, withStoreLimit(1))
	f.record("a", throttleFor(modelA, 3600))
	for range 3 {
		f.record("b", throttleFor(modelB, 10))
	}
	warns := func() int { return strings.Count(f.logs.String(), "cooldown store full") }
	if n := warns(); n != 1 {
		t.Errorf("%d warnings, want 1", n)
	}
	f.clk.Advance(10 * time.Second)
	f.record("b", throttleFor(modelB, 10))
	if n := warns(); n != 2 {
		t.Errorf("%d warnings after a new overflow, want 2", n)
	}
}

func TestCapacitySharedAcrossPools(t *testing.T) {
	f := newFixture(t, withStoreLimit(2))
	zdr := New(Config{Options: Options{Name: "zdr"}, Credentials: testCreds, Settings: Settings{ModelCooldownEnabled: true}, Store: f.store, Clock: f.clk})
	f.record("a", throttleFor(modelA, 100))
	zdr.Record("a", throttleFor(modelA, 100))
	f.record("b", throttleFor(modelA, 20)) // the store counts both pools
	if _, err := zdr.Select(modelB, nil); !errors.As(err, new(*CapacityError)) {
		t.Errorf("zdr Select = %v, want *CapacityError", err)
	}
	if s := zdr.Snapshot(); s.StoreLive != 2 || s.StoreCapacity != 2 || !s.OverflowUntil.Equal(t0.Add(20*time.Second)) {
		t.Errorf("zdr Snapshot = %+v", s)
	}
}

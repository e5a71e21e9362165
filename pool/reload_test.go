package pool

import (
	"net/http"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/secret"
)

// A pool rebuilt on a reload shares the legacy rests and the active key of
// the credentials Keep names that the previous pool holds under the same
// name and key; the rest start fresh. The shared rest is live: the old
// pool's outcome (a request still in flight) reaches the new one.
func TestPreviousPoolStateAdoptedForKeptCredentials(t *testing.T) {
	clk := clock.NewFake(t0)
	st := NewStore(clk, 0)
	old := New(Config{Options: Options{Name: "api", PreferActive: true}, Credentials: testCreds, Store: st, Clock: clk})
	for _, n := range []string{"a", "b", "c"} {
		old.Record(n, Observation{Status: http.StatusTooManyRequests})
	}
	rotated := Credential{Name: "c", Key: secret.New("sk-canary-key-rotated-cccccccccccc")}
	creds := []Credential{testCreds[0], testCreds[1], rotated, {Name: "d", Key: secret.New("sk-canary-key-dddddddddddddddddddd")}}
	keep := func(name string) bool { return name != "b" } // b changed (say, its base_url)
	cur := New(Config{Options: Options{Name: "api", PreferActive: true}, Credentials: creds, Store: st, Clock: clk, Previous: old, Keep: keep})

	resting := map[string]bool{}
	for _, c := range cur.Snapshot().Credentials {
		resting[c.Name] = !c.RestingUntil.IsZero()
	}
	if len(resting) != 4 || !resting["a"] || resting["b"] || resting["c"] || resting["d"] {
		t.Errorf("resting after the rebuild %v, want only a (kept, same key)", resting)
	}
	if got, err := cur.Select(unscoped, nil); err != nil || got.Name != "b" {
		t.Errorf("Select = %s, %v; want b (a rests, b is fresh)", got.Name, err)
	}

	// In flight on the old pool: a succeeds, which clears the rest the
	// new pool shares, so a (first) serves again.
	old.Record("a", Observation{Status: http.StatusOK})
	if got, err := cur.Select(unscoped, nil); err != nil || got.Name != "a" {
		t.Errorf("Select after the old pool's success = %s, %v; want a", got.Name, err)
	}

	// Without Keep nothing is adopted.
	fresh := New(Config{Options: Options{Name: "api"}, Credentials: testCreds, Store: st, Clock: clk, Previous: old})
	old.Record("a", Observation{Status: http.StatusTooManyRequests})
	for _, c := range fresh.Snapshot().Credentials {
		if !c.RestingUntil.IsZero() {
			t.Errorf("%s rests in a pool that adopted nothing", c.Name)
		}
	}
}

// A reload that lowers model_cooldown.max_seconds binds the cooldowns
// already running: a credential resting 1800 s on the provider's advice
// under a 3600 s cap is free 30 s after a rebuild with a 30 s cap, on the
// scoped and the legacy path, where it stayed cooling for the old 1800 s
// and requests were held and told to retry in 30 s again and again. With
// the cap unchanged, a rebuild changes no cooldown.
func TestReloadThatLowersTheCapBindsRunningCooldowns(t *testing.T) {
	for _, c := range []struct {
		name     string
		enabled  bool
		scope    Scope
		newCap   int64
		freeFrom time.Duration
	}{
		{"scoped, cap lowered", true, modelA, 30, 30 * time.Second},
		{"legacy, cap lowered", false, modelA, 30, 30 * time.Second},
		{"scoped, cap unchanged", true, modelA, 3600, 1790 * time.Second}, // 1800 s from the throttle
	} {
		t.Run(c.name, func(t *testing.T) {
			clk := clock.NewFake(t0)
			st := NewStore(clk, 0)
			creds := testCreds[:1]
			settings := func(max int64) Settings { return Settings{ModelCooldownEnabled: c.enabled, MaxSeconds: max} }
			old := New(Config{Options: Options{Name: "api"}, Credentials: creds, Store: st, Clock: clk, Settings: settings(3600)})
			old.Record("a", Observation{Scope: c.scope, Status: http.StatusTooManyRequests, RetryAfter: 1800, HasRetryAfter: true})
			clk.Advance(10 * time.Second)
			keep := func(string) bool { return true }
			cur := New(Config{Options: Options{Name: "api"}, Credentials: creds, Store: st, Clock: clk, Settings: settings(c.newCap), Previous: old, Keep: keep})
			clk.Advance(c.freeFrom - time.Millisecond)
			if _, err := cur.Select(c.scope, nil); err == nil {
				t.Errorf("free %v after the rebuild, want cooling until %v", c.freeFrom-time.Millisecond, c.freeFrom)
			}
			clk.Advance(time.Millisecond)
			if got, err := cur.Select(c.scope, nil); err != nil || got.Name != "a" {
				t.Errorf("%v after the rebuild: %v, want a free", c.freeFrom, err)
			}
		})
	}
}

// After a reload that lowered the cap, a request still in flight on the
// old generation that meets a 429 records its rest under the new cap too:
// the generations share it.
func TestOldGenerationRecordsUnderTheNewCap(t *testing.T) {
	for _, enabled := range []bool{true, false} {
		clk := clock.NewFake(t0)
		st := NewStore(clk, 0)
		creds := testCreds[:1]
		old := New(Config{Options: Options{Name: "api"}, Credentials: creds, Store: st, Clock: clk, Settings: Settings{ModelCooldownEnabled: enabled, MaxSeconds: 3600}})
		cur := New(Config{Options: Options{Name: "api"}, Credentials: creds, Store: st, Clock: clk, Settings: Settings{ModelCooldownEnabled: enabled, MaxSeconds: 30},
			Previous: old, Keep: func(string) bool { return true }})
		old.Record("a", Observation{Scope: modelA, Status: http.StatusTooManyRequests, RetryAfter: 1800, HasRetryAfter: true})
		clk.Advance(30 * time.Second)
		if got, err := cur.Select(modelA, nil); err != nil || got.Name != "a" {
			t.Errorf("model cooldown %v: 30 s after the old generation's 429 under the new 30 s cap: %v, want a free", enabled, err)
		}
	}
}

// A reload that lowers model_cooldown.max_seconds ends the capacity guard
// by the new cap, as it ends the cooldowns already running: the guard
// covers a dropped observation's capped TTL (spec), and under a 30 s cap
// that TTL ends 30 s after the reload. Kept at the old 1800 s, new scoped
// admission failed closed for half an hour while every 503 said
// Retry-After 30 s.
func TestReloadThatLowersTheCapEndsTheCapacityGuardByTheNewCap(t *testing.T) {
	clk, cur := guardRaisedThenCapLowered(t)
	clk.Advance(29 * time.Second)
	if _, err := cur.Select(Scope{Model: "model-gamma"}, nil); err == nil {
		t.Error("Select 29 s after a reload to a 30 s cap found a credential; want the guard still holding until the new cap")
	}
	clk.Advance(time.Second)
	if got, err := cur.Select(Scope{Model: "model-gamma"}, nil); err != nil {
		t.Errorf("Select 30 s after a reload to a 30 s cap = %q, %v; want a credential: the guard raised under the old cap ends by the new one", got.Name, err)
	}
}

package pool

import (
	"net/http"
	"testing"

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

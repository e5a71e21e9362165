package pool_test

import (
	"errors"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/secret"
	"github.com/rotorhq/rotor/learned"
	"github.com/rotorhq/rotor/pool"
)

// TestFirstKeyFallbackRecoveryIsLearned: with first_key_fallback (legacy
// path) the pool offers a resting first key; when that call, sent 10 s
// after the throttle, succeeds, it is a genuine recovery after a throttle
// and must teach the learner (one piece of evidence).
func TestFirstKeyFallbackRecoveryIsLearned(t *testing.T) {
	t0 := time.UnixMilli(1_767_225_600_000)
	clk := clock.NewFake(t0)
	policy, err := learned.ParsePolicy(`{"buckets":[{"provider":"api","model":"decide-mini","quota_bucket":null}]}`)
	if err != nil {
		t.Fatal(err)
	}
	l := learned.New(learned.Config{Mode: learned.ModeShadow, Policy: policy, Clock: clk})
	p := pool.New(pool.Config{
		Options:     pool.Options{Name: "api", FirstKeyFallback: true},
		Credentials: []pool.Credential{{Name: "a", Key: secret.New("sk-audit-a")}},
		Store:       pool.NewStore(clk, 0), Clock: clk, Learner: l,
	})
	scope := pool.Scope{Model: "decide-mini"}
	p.Record("a", pool.Observation{Scope: scope, Status: 429, Sent: t0.Add(-100 * time.Millisecond)})
	clk.Advance(10 * time.Second)
	_, err = p.Select(scope, nil)
	var ce *pool.CooldownExhaustedError
	if !errors.As(err, &ce) || ce.Fallback != "a" {
		t.Fatalf("Select = %v; want the first key offered as fallback", err)
	}
	sent := clk.Now()
	clk.Advance(200 * time.Millisecond)
	p.Record("a", pool.Observation{Scope: scope, Status: 200, Sent: sent})
	if s := l.Snapshot(); s.Evidence != 1 {
		t.Errorf("learner evidence after the fallback call's success = %d, want 1 (a recovery 10.2 s after the throttle)", s.Evidence)
	}
}

package decisions

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
)

// The idle watch on the wall clock (the stream tests drive it on a fake
// one): it re-arms from the provider's last activity and cancels only
// once that is StreamIdleTimeout old.
func TestStreamIdleWatchOnTheRealClock(t *testing.T) {
	const idle = 50 * time.Millisecond
	rt := &Route{cfg: Config{Clock: clock.Real(), StreamIdleTimeout: idle}}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var last atomic.Int64
	// Activity 100 ms ahead: the first check finds the provider active
	// and waits for the rest.
	active := time.Now().Add(100 * time.Millisecond)
	last.Store(active.UnixNano())
	stop := rt.watchIdle(cancel, &last)
	defer stop()
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a silent provider was not cut")
	}
	if err := context.Cause(ctx); !errors.Is(err, errStreamIdle) {
		t.Errorf("cause %v, want %v", err, errStreamIdle)
	}
	if early := active.Add(idle).Sub(time.Now()); early > 0 {
		t.Errorf("cut %v before the provider had been silent for %v", early, idle)
	}
}

func TestStreamIdleWatchStops(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	rt := &Route{cfg: Config{Clock: clk, StreamIdleTimeout: time.Minute}}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var last atomic.Int64
	last.Store(clk.Now().UnixNano())
	stop := rt.watchIdle(cancel, &last)
	clk.Advance(30 * time.Second)
	last.Store(clk.Now().UnixNano())
	clk.Advance(30 * time.Second) // the first check: active 30 s ago
	waitFakeTimers(t, clk, 1)     // re-armed for the other 30 s
	stop()
	if n := clk.Timers(); n != 0 {
		t.Errorf("%d timers left after stop, want 0", n)
	}
	clk.Advance(time.Hour)
	if ctx.Err() != nil {
		t.Errorf("a stopped watch cancelled: %v", context.Cause(ctx))
	}
}

// waitFakeTimers waits until n timers wait on clk.
func waitFakeTimers(t *testing.T, clk *clock.Fake, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for clk.Timers() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d timers wait on the clock, want %d", clk.Timers(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

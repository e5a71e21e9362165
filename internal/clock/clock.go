// Package clock abstracts time so that time-dependent logic (cooldowns,
// budget windows, deadlines) can be tested with a fake clock that never
// sleeps.
//
// It imports no other rotor package.
package clock

import (
	"context"
	"time"
)

// Clock tells the time and makes timers. Real() is the wall clock; tests use
// a *Fake.
type Clock interface {
	// Now returns the current time. The real clock's values carry a
	// monotonic reading, so durations between them are safe against wall
	// clock steps.
	Now() time.Time
	// NewTimer returns a timer that fires once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer that rotor uses.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// Real returns the system clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

// Sleep waits for d on c, or until ctx is done, whichever comes first. It
// returns ctx.Err() when the context ended the wait.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Package clock abstracts time so that time-dependent logic (cooldowns,
// budget windows, deadlines) can be tested with a fake clock that never
// sleeps.
//
// It imports no other rotor package.
package clock

import (
	"context"
	"sync"
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

// AfterFunc calls f in its own goroutine once d has passed on c, unless
// stop is called first; stop reports whether it prevented the call, as
// (*time.Timer).Stop does. On the real clock it is time.AfterFunc: nothing
// waits meanwhile, which matters where every stream in flight holds one.
// On another clock a goroutine waits on c's timer, which exists (and a
// Fake counts it) when AfterFunc returns.
func AfterFunc(c Clock, d time.Duration, f func()) (stop func() bool) {
	if _, ok := c.(realClock); ok {
		return time.AfterFunc(d, f).Stop
	}
	t := c.NewTimer(d)
	done := make(chan struct{})
	go func() {
		select {
		case <-t.C():
			f()
		case <-done:
		}
	}()
	var once sync.Once
	return func() bool {
		stopped := t.Stop()
		once.Do(func() { close(done) })
		return stopped
	}
}

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

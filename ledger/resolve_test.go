package ledger

import (
	"errors"
	"testing"
	"time"
)

// `rotor ledger settle` bounds: what an operator may record, and when a
// reservation is still a request in flight (then refused, with the time
// it stops being one).
func TestResolutionBounds(t *testing.T) {
	for _, c := range []struct {
		name string
		res  Resolution
		ok   bool
	}{
		{"every input token cached", Resolution{Input: Known(10), Output: Known(1), CachedInput: Known(10)}, true},
		{"cached above input", Resolution{Input: Known(10), Output: Known(1), CachedInput: Known(11)}, false},
		{"input and output at the bound", Resolution{Input: Known(MaxUsage - 1), Output: Known(1)}, true},
		{"input and output past the bound", Resolution{Input: Known(MaxUsage), Output: Known(1)}, false},
		{"output missing", Resolution{Input: Known(1)}, false},
		{"input missing", Resolution{Output: Known(1)}, false},
	} {
		if err := c.res.Validate(); (err == nil) != c.ok {
			t.Errorf("%s: Validate = %v, want ok %v", c.name, err, c.ok)
		}
	}

	now := t0.UnixMilli()
	day := MaxInFlight.Milliseconds()
	for _, c := range []struct {
		name        string
		ts, expires int64
		until       int64 // 0: not in flight
	}{
		{"at its expiry", now - 1000, now, 0},
		{"a millisecond before its expiry", now - 1000, now + 1, now + 1},
		{"made MaxInFlight ago, not expired", now - day, now + day, now},
		{"made just over MaxInFlight ago", now - day - 1, now + day, 0},
	} {
		err := CheckNotInFlight("r", c.ts, c.expires, now)
		var ife *InFlightError
		switch {
		case c.until == 0 && err != nil:
			t.Errorf("%s: CheckNotInFlight = %v, want nil", c.name, err)
		case c.until != 0 && (!errors.As(err, &ife) || !errors.Is(err, ErrInFlight)):
			t.Errorf("%s: CheckNotInFlight = %v, want ErrInFlight", c.name, err)
		case c.until != 0 && !ife.Until.Equal(time.UnixMilli(c.until)):
			t.Errorf("%s: in flight until %v, want %v", c.name, ife.Until, time.UnixMilli(c.until))
		}
	}
}

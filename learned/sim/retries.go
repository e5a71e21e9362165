package sim

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/pool"
)

// ErrRetries is ParseRetries's error.
var ErrRetries = errors.New("invalid retries")

// ParseRetries reads "145,175,195,200": retries that many seconds after
// an episode's first throttle. They must increase and lie in (0, 3600].
func ParseRetries(s string) ([]time.Duration, error) {
	var at []time.Duration
	for _, part := range strings.Split(s, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		d := time.Duration(x * float64(time.Second))
		if err != nil || math.IsNaN(x) || d <= 0 || x > maxSeconds {
			return nil, fmt.Errorf("%w: %q is not seconds in (0, %d]", ErrRetries, part, maxSeconds)
		}
		if len(at) > 0 && d <= at[len(at)-1] {
			return nil, fmt.Errorf("%w: the seconds must increase", ErrRetries)
		}
		at = append(at, d)
	}
	return at, nil
}

// Retries is a policy that retries on a schedule it is told: each
// episode's retries at these times after its first throttle, then the
// existing cooldown's. Told a reset's distribution (noisy: uniform in
// 100-200 s), it shows what knowing that is worth, as the oracle shows
// what knowing each reset is: the yardstick of a learner that learns the
// distribution. It is shown beside the table's policies, never one of
// them.
func Retries(at []time.Duration) Policy {
	secs := make([]string, len(at))
	for i, d := range at {
		secs[i] = strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
	}
	at = append([]time.Duration(nil), at...)
	return Policy{
		Name: "retries at " + strings.Join(secs, ", ") + " s",
		Learner: func(clock.Clock) pool.Learner {
			return &retries{at: at}
		},
	}
}

// retries is Retries's learner: the first throttle of each identity's
// episode anchors it (the value kept), a success ends it.
type retries struct {
	episodes[time.Time]
	at []time.Duration
}

func (r *retries) Suggest(ev pool.LearnEvent) (time.Duration, bool) {
	var anchor time.Time
	r.update(ev.Identity, func(v time.Time, open bool) time.Time {
		if !open {
			v = ev.At
		}
		anchor = v
		return v
	})
	e := ev.At.Sub(anchor)
	for _, t := range r.at {
		if t > e {
			d := t - e
			if ev.HasRetryAfter {
				d = max(d, time.Duration(ev.RetryAfter*float64(time.Second)))
			}
			return d, true
		}
	}
	return 0, false // past the last retry: the existing cooldown
}

// Package dur parses the durations rotor accepts from users: Go durations
// with an extra day unit ("7d", "7d12h", "30m").
//
// It imports no other rotor package.
package dur

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Day is 24 hours; rotor's days are UTC days without leap seconds.
const Day = 24 * time.Hour

// Parse parses a duration such as "30m", "24h", "7d" or "1d12h". A leading
// "<n>d" is read as n days; the rest is a Go duration.
func Parse(s string) (time.Duration, error) {
	in := s
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty duration")
	}
	var total time.Duration
	if i := strings.IndexByte(s, 'd'); i >= 0 {
		n, err := strconv.ParseInt(s[:i], 10, 64)
		if err != nil || n < 0 || n > 106751 { // time.Duration holds about 106,751 days
			return 0, fmt.Errorf("invalid duration %q", in)
		}
		total = time.Duration(n) * Day
		s = s[i+1:]
		if s == "" {
			return total, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("invalid duration %q (use forms like 30s, 10m, 24h, 7d)", in)
	}
	if total > 0 && d > time.Duration(1<<63-1)-total {
		return 0, fmt.Errorf("invalid duration %q: too long", in)
	}
	return total + d, nil
}

// Format prints d compactly, using days where they divide evenly: 7d, 36h,
// 30m, 1d12h.
func Format(d time.Duration) string {
	if d <= 0 {
		return d.String()
	}
	days := d / Day
	rest := d % Day
	out := ""
	if days > 0 {
		out = strconv.FormatInt(int64(days), 10) + "d"
	}
	if rest == 0 {
		return out
	}
	s := rest.String()
	// time.Duration.String prints "1h0m0s"; drop the zero units.
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return out + s
}

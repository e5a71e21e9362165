package httpx

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxAdviceSeconds bounds parsed advice so that later arithmetic cannot
// overflow a time.Duration (about 292 years).
const maxAdviceSeconds = 1 << 32

// ParseRetryAfter reads a provider's Retry-After header value: delay
// seconds (fractions accepted) or an HTTP date relative to now. It returns
// the advice as finite, nonnegative seconds, or ok=false for anything
// invalid, negative or nonfinite. A date in the past is zero seconds.
func ParseRetryAfter(v string, now time.Time) (seconds float64, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" || len(v) > 64 {
		return 0, false
	}
	if c := v[0]; (c >= '0' && c <= '9') || c == '.' {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
			return 0, false
		}
		return math.Min(f, maxAdviceSeconds), true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now).Seconds()
	if d < 0 {
		d = 0
	}
	return math.Min(d, maxAdviceSeconds), true
}

// ProviderRetryAdvice reads the retry advice from a provider's answer
// headers: retry-after-ms first (more precise), then Retry-After.
func ProviderRetryAdvice(h http.Header, now time.Time) (seconds float64, ok bool) {
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		f, err := strconv.ParseFloat(v, 64)
		if err == nil && !math.IsNaN(f) && !math.IsInf(f, 0) && f >= 0 {
			return math.Min(f/1000, maxAdviceSeconds), true
		}
	}
	return ParseRetryAfter(h.Get("Retry-After"), now)
}

package httpx

import (
	"math"
	"net/http"
	"testing"
	"time"
)

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in     string
		want   float64
		wantOK bool
	}{
		{"30", 30, true},
		{" 2.5 ", 2.5, true},
		{"0", 0, true},
		{"-1", 0, false},
		{"NaN", 0, false},
		{"inf", 0, false},
		{"1e309", 0, false},
		{"abc", 0, false},
		{"", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90, true},
		{now.Add(-time.Hour).Format(http.TimeFormat), 0, true},
		{"99999999999", maxAdviceSeconds, true},
	}
	for _, tt := range tests {
		got, ok := ParseRetryAfter(tt.in, now)
		if ok != tt.wantOK || got != tt.want {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestProviderRetryAdvicePrefersMillis(t *testing.T) {
	h := http.Header{}
	h.Set("Retry-After", "10")
	h.Set("retry-after-ms", "1500")
	if got, ok := ProviderRetryAdvice(h, time.Now()); !ok || got != 1.5 {
		t.Errorf("ProviderRetryAdvice = %v, %v; want 1.5, true", got, ok)
	}
}

// A retry-after-ms that is not finite, nonnegative milliseconds is ignored
// as if absent: the provider's Retry-After is read instead, and without
// one there is no advice. A negative value never becomes negative advice
// (a wait that ends before it starts), and never hides a valid
// Retry-After; huge values are capped like Retry-After's.
func TestProviderRetryAdviceIgnoresBadMillis(t *testing.T) {
	tests := []struct {
		ms, ra string
		want   float64
		wantOK bool
	}{
		{"-1500", "7", 7, true},
		{"-0.5", "", 0, false},
		{"NaN", "7", 7, true},
		{"+Inf", "7", 7, true},
		{"soon", "7", 7, true},
		{"0", "7", 0, true},
		{"1e300", "7", maxAdviceSeconds, true},
	}
	for _, tt := range tests {
		h := http.Header{}
		h.Set("retry-after-ms", tt.ms)
		if tt.ra != "" {
			h.Set("Retry-After", tt.ra)
		}
		got, ok := ProviderRetryAdvice(h, time.Now())
		if ok != tt.wantOK || got != tt.want {
			t.Errorf("retry-after-ms %q, Retry-After %q: advice %v, %v; want %v, %v", tt.ms, tt.ra, got, ok, tt.want, tt.wantOK)
		}
	}
}

// FuzzRetryAfter checks that any header value parses to finite nonnegative
// advice or is refused.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"-1", "0", "0.2", "NaN", "1e309", "99999999999", "Sun, 06 Nov 1994 08:49:37 GMT", "Fri, 01 Jan 2100 00:00:00 GMT", "garbage", " 7 ", ".5", "1_000"} {
		f.Add(s)
	}
	now := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		s, ok := ParseRetryAfter(v, now)
		if ok && (math.IsNaN(s) || math.IsInf(s, 0) || s < 0) {
			t.Fatalf("ParseRetryAfter(%q) = %v accepted", v, s)
		}
	})
}

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

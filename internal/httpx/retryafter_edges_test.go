package httpx

import (
	"net/http"
	"testing"
	"time"
)

// Retry-After edges a provider may send: delay seconds written as a bare
// fraction, a date so far ahead that it must be capped like delay seconds
// are, and a date just past (HTTP dates have whole seconds, the clock
// does not), which is zero, never negative advice: a wait that ends
// before it starts.
func TestParseRetryAfterEdges(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 500e6, time.UTC)
	tests := []struct {
		in     string
		want   float64
		wantOK bool
	}{
		{".5", 0.5, true},
		{"Fri, 31 Dec 9999 23:59:59 GMT", maxAdviceSeconds, true},
		{now.Truncate(time.Second).Format(http.TimeFormat), 0, true},
	}
	for _, tt := range tests {
		got, ok := ParseRetryAfter(tt.in, now)
		if ok != tt.wantOK || got != tt.want {
			t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

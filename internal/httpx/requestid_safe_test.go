package httpx

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// SafeID and SafeLabel are what rotor takes from a trusted hop into its
// logs, headers and ledger rows: 1 to 64 letters, digits, '-', '_' and
// '.', and '@' in a label only (default@<hostname>); anything else is
// refused, so nothing can be injected and a label is never empty.
func TestSafeIDAndLabel(t *testing.T) {
	for _, tt := range []struct {
		s         string
		id, label bool
	}{
		{"0123456789abcdef0123456789abcdef", true, true},
		{"A-b_c.9", true, true},
		{strings.Repeat("a", 64), true, true},
		{strings.Repeat("a", 65), false, false},
		{"", false, false},
		{"default@host.example", false, true},
		{"a b", false, false},
		{"a\nb", false, false},
		{"a{b}", false, false},
		{"a~b", false, false},
		{"é", false, false},
		{"a/b", false, false},
	} {
		if got := SafeID(tt.s); got != tt.id {
			t.Errorf("SafeID(%q) = %v, want %v", tt.s, got, tt.id)
		}
		if got := SafeLabel(tt.s); got != tt.label {
			t.Errorf("SafeLabel(%q) = %v, want %v", tt.s, got, tt.label)
		}
	}
}

// Without a trust function no incoming X-Request-ID is kept: a caller's
// own id never becomes rotor's (README: "a caller's own X-Request-ID is
// not kept").
func TestRequestIDsWithoutTrustKeepNone(t *testing.T) {
	h := RequestIDs(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), nil)
	rec := httptest.NewRecorder()
	req := httptest.NewRequest("GET", "/", nil)
	req.Header.Set("X-Request-ID", "callers-own-id")
	h.ServeHTTP(rec, req)
	if got := rec.Header().Get("X-Request-ID"); got == "" || got == "callers-own-id" {
		t.Errorf("X-Request-ID = %q, want one rotor chose", got)
	}
}

package gateway

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/httpx"
)

// A provider chooses the codes rotor passes through: one that answers a
// new code on every error would add a rotor_requests_total series per
// request for as long as the bridge runs. The code label keeps rotor's
// own codes always and the first 64 others; later ones count as "other".
func TestRequestsCodeLabelStaysBounded(t *testing.T) {
	m := NewMetrics()
	for i := range 200 {
		m.Request("bridge", "/v1/chat/completions", 400, fmt.Sprintf("provider_code_%03d", i), time.Millisecond)
	}
	m.Request("bridge", "/v1/chat/completions", 400, "provider_code_000", time.Millisecond)
	m.Request("bridge", "/v1/chat/completions", 429, httpx.CodeBudgetExceeded, time.Millisecond)
	m.Request("bridge", "/v1/chat/completions", 200, "", time.Millisecond)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	series := map[string]string{} // code -> sample line
	for line := range strings.Lines(string(body)) {
		if !strings.HasPrefix(line, "rotor_requests_total{") {
			continue
		}
		_, rest, _ := strings.Cut(line, `code="`)
		code, _, _ := strings.Cut(rest, `"`)
		series[code] = strings.TrimSpace(line)
	}
	if n := len(series); n != maxOtherCodes+3 {
		t.Errorf("%d code series, want %d (64 provider codes, other, budget_exceeded, success)", n, maxOtherCodes+3)
	}
	for code, want := range map[string]string{
		"provider_code_000":      " 2",
		"provider_code_063":      " 1",
		otherCodes:               " 136",
		httpx.CodeBudgetExceeded: " 1",
		"":                       " 1",
	} {
		if got := series[code]; !strings.HasSuffix(got, want) {
			t.Errorf("code %q: series %q, want a count of%s", code, got, want)
		}
	}
	if _, ok := series["provider_code_064"]; ok {
		t.Error("the 65th provider code has a series of its own")
	}
}

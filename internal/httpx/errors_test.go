package httpx

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestWriteErrorShape(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteError(rec, NewError(CodeInvalidModelPrefix).WithParam("model"))
	if rec.Code != http.StatusBadRequest {
		t.Fatalf("status = %d, want 400", rec.Code)
	}
	var body struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("body is not JSON: %v: %s", err, rec.Body)
	}
	for k, want := range map[string]any{"code": "invalid_model_prefix", "param": "model", "type": TypeInvalidRequest} {
		if got := body.Error[k]; got != want {
			t.Errorf("error.%s = %v, want %v", k, got, want)
		}
	}
	if _, ok := body.Error["retry_after_ms"]; ok {
		t.Error("retry_after_ms present without advice")
	}
	if got := rec.Header().Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q", got)
	}
}

func TestRetryAfterHeaderIsCeilOfMillisAtLeastOne(t *testing.T) {
	tests := []struct {
		d      time.Duration
		header string
		ms     string
	}{
		{time.Nanosecond, "1", "1"},
		{400 * time.Millisecond, "1", "400"},
		{1000 * time.Millisecond, "1", "1000"},
		{1001 * time.Millisecond, "2", "1001"},
		{1500*time.Millisecond + time.Microsecond, "2", "1501"},
		{90 * time.Second, "90", "90000"},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		WriteError(rec, NewError(CodeModelCooldown).WithRetryAfter(tt.d))
		if got := rec.Header().Get("Retry-After"); got != tt.header {
			t.Errorf("Retry-After for %v = %q, want %q", tt.d, got, tt.header)
		}
		if got := rec.Header().Get("retry-after-ms"); got != tt.ms {
			t.Errorf("retry-after-ms for %v = %q, want %q", tt.d, got, tt.ms)
		}
		var body struct {
			Error struct {
				RetryAfterMS int64 `json:"retry_after_ms"`
			} `json:"error"`
		}
		_ = json.Unmarshal(rec.Body.Bytes(), &body)
		if got := body.Error.RetryAfterMS; tt.ms != "" && got == 0 {
			t.Errorf("error.retry_after_ms missing for %v", tt.d)
		}
	}
}

func TestShouldRetryFalse(t *testing.T) {
	tests := []struct {
		err  *Error
		want string
	}{
		{NewError(CodeResponseTooLarge), "false"},
		{NewError(CodePoolUnavailable), "false"},
		{NewError(CodePolicyBlocked), "false"},
		{NewError(CodeNoCredentials), "false"},
		{NewError(CodeBudgetExceeded).WithRetryAfter(61 * time.Second), "false"},
		{NewError(CodeBudgetExceeded).WithRetryAfter(60 * time.Second), ""},
		{NewError(CodeModelCooldown).WithRetryAfter(time.Hour), ""},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		WriteError(rec, tt.err)
		if got := rec.Header().Get("x-should-retry"); got != tt.want {
			t.Errorf("%s (retry %v): x-should-retry = %q, want %q", tt.err.Code, tt.err.RetryAfter, got, tt.want)
		}
	}
}

func TestUnauthorizedCarriesWWWAuthenticate(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteError(rec, NewError(CodeInvalidToken))
	if rec.Header().Get("WWW-Authenticate") == "" {
		t.Error("401 without WWW-Authenticate")
	}
}

func TestRequestIDs(t *testing.T) {
	var seen string
	trusted := func(r *http.Request) bool { return r.Header.Get("X-Trusted") == "yes" }
	h := RequestIDs(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = RequestID(r.Context()) }), trusted)
	tests := []struct {
		in       string
		trusted  bool
		wantSame bool
	}{
		{"abc-123", true, true},
		{"abc-123", false, false},
		{"bad id\nwith newline", true, false},
		{"", true, false},
	}
	for _, tt := range tests {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		if tt.in != "" {
			req.Header.Set("X-Request-ID", tt.in)
		}
		if tt.trusted {
			req.Header.Set("X-Trusted", "yes")
		}
		h.ServeHTTP(rec, req)
		got := rec.Header().Get("X-Request-ID")
		if got == "" || got != seen {
			t.Fatalf("header %q, context %q: want equal and nonempty", got, seen)
		}
		if (got == tt.in) != tt.wantSame {
			t.Errorf("incoming %q: got id %q, keep = %v", tt.in, got, tt.wantSame)
		}
	}
}

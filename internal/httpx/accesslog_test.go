package httpx

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rotorhq/rotor/internal/clock"
)

func TestPanicBecomesGeneric500(t *testing.T) {
	logs := &bytes.Buffer{}
	al := AccessLog{Server: "test", Logger: slog.New(slog.NewTextHandler(logs, nil)), Clock: clock.Real()}
	h := al.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic("boom with secret sk-xyz") }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
	if rec.Code != 500 || strings.Contains(rec.Body.String(), "boom") || strings.Contains(logs.String(), "sk-xyz") {
		t.Errorf("panic answer %d %s; log %s", rec.Code, rec.Body, logs)
	}
}

// The caller's label, set once by whichever layer knows it, reaches the
// access log line; probes are counted but not logged.
func TestAccessLogNamesCallerAndRoute(t *testing.T) {
	logs := &bytes.Buffer{}
	al := AccessLog{Server: "test", Logger: slog.New(slog.NewTextHandler(logs, nil)), Clock: clock.Real()}
	h := al.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = WithCaller(r.Context(), Caller{Label: "ci"})
		AccessInfoFrom(r.Context()).Code = "x_code"
	}))
	for _, p := range []string{"/v1/decisions", "/healthz", "/secret-path"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", p, nil))
	}
	out := logs.String()
	if !strings.Contains(out, "client=ci") || !strings.Contains(out, "route=/v1/decisions") || !strings.Contains(out, "code=x_code") ||
		!strings.Contains(out, "route=other") || strings.Contains(out, "healthz") || strings.Contains(out, "secret-path") {
		t.Errorf("access log:\n%s", out)
	}
}

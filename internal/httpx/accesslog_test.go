package httpx

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/secret"
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

type codeMetrics struct{ got []string }

func (m *codeMetrics) Request(server, route string, status int, code string, d time.Duration) {
	m.got = append(m.got, strconv.Itoa(status)+" "+code)
}

// The guard's refusals (401 and 403) are counted with their code, as the
// route's answers are: a dashboard tells a bad token from a foreign origin.
func TestGuardRefusalsCountedWithTheirCode(t *testing.T) {
	m := &codeMetrics{}
	g := &Guard{Port: 8787, Authenticate: func(*http.Request, secret.Value) (string, bool, error) { return "", false, nil }}
	al := AccessLog{Server: "bridge", Logger: slog.New(slog.DiscardHandler), Metrics: m, Clock: clock.Real()}
	h := al.Wrap(g.Wrap(http.NotFoundHandler()))
	for _, c := range []struct{ host, origin, auth string }{
		{"127.0.0.1:8787", "", ""},
		{"127.0.0.1:8787", "", "Bearer wrong"},
		{"evil.example:8787", "", "Bearer wrong"},
		{"127.0.0.1:8787", "https://evil.example", "Bearer wrong"},
	} {
		r := httptest.NewRequest("POST", "/v1/decisions", nil)
		r.Host = c.host
		if c.origin != "" {
			r.Header.Set("Origin", c.origin)
		}
		if c.auth != "" {
			r.Header.Set("Authorization", c.auth)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	want := []string{"401 invalid_token", "401 invalid_token", "403 host_not_allowed", "403 origin_not_allowed"}
	if !slices.Equal(m.got, want) {
		t.Errorf("counted %q, want %q", m.got, want)
	}
}

type routeMetrics struct{ got []string }

func (m *routeMetrics) Request(server, route string, status int, code string, d time.Duration) {
	m.got = append(m.got, route)
}

// Every route rotor answers is counted and logged under its own path, the
// OpenAI routes too (a dashboard tells chat from embeddings traffic); the
// stored responses under one label, never their id; any other path is
// "other".
func TestRequestsCountedByRoute(t *testing.T) {
	m := &routeMetrics{}
	al := AccessLog{Server: "bridge", Logger: slog.New(slog.DiscardHandler), Metrics: m, Clock: clock.Real()}
	h := al.Wrap(http.NotFoundHandler())
	paths := map[string]string{
		"/v1/decisions": "/v1/decisions", "/v1/chat/completions": "/v1/chat/completions", "/v1/responses": "/v1/responses",
		"/v1/embeddings": "/v1/embeddings", "/v1/models": "/v1/models", "/v1/status": "/v1/status",
		"/v1/responses/resp_0123": "/v1/responses/{id}", "/v1/responses/": "/v1/responses/{id}",
		"/v1/completions": "other", "/v1/chat/completions/x": "other", "/": "other",
	}
	for p, want := range paths {
		m.got = nil
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", p, nil))
		if len(m.got) != 1 || m.got[0] != want {
			t.Errorf("%s counted as %q, want %q", p, m.got, want)
		}
	}
}

// A handler that aborts its answer (http.ErrAbortHandler: a broken stream
// ends without the end of its chunked body) is still logged and counted
// with its code, and the abort reaches net/http, which closes the
// connection; any other panic is a 500 and no access line.
func TestAbortedAnswerIsStillLogged(t *testing.T) {
	logs := &bytes.Buffer{}
	m := &codeMetrics{}
	al := AccessLog{Server: "test", Logger: slog.New(slog.NewTextHandler(logs, nil)), Metrics: m, Clock: clock.Real()}
	h := al.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		AccessInfoFrom(r.Context()).Code = "upstream_stream_cut"
		w.WriteHeader(http.StatusOK)
		panic(http.ErrAbortHandler)
	}))
	func() {
		defer func() {
			if p := recover(); p != http.ErrAbortHandler {
				t.Errorf("panic %v, want http.ErrAbortHandler passed on", p)
			}
		}()
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/chat/completions", nil))
	}()
	if !strings.Contains(logs.String(), "code=upstream_stream_cut") || len(m.got) != 1 || m.got[0] != "200 upstream_stream_cut" {
		t.Errorf("aborted answer: log %q, counted %q; want one line and one count with its code", logs, m.got)
	}
}

package httpx

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
)

// The access line holds what the README lists, each from its own source:
// the request id the answer carried, the route's record (operation, pool,
// model, credential, attempts, tokens as the row recorded them, "unknown"
// where the row could not say), the status net/http sent (200 when the
// handler wrote nothing) and the duration on the server's clock; and
// never the caller's token or the query string.
func TestAccessLineFields(t *testing.T) {
	logs := &bytes.Buffer{}
	m := &codeMetrics{}
	fake := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	al := AccessLog{Server: "bridge", Logger: slog.New(slog.NewJSONHandler(logs, nil)), Metrics: m, Clock: fake}
	in, total := int64(9), int64(11)
	h := al.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = WithCaller(r.Context(), Caller{Label: "ci"})
		i := AccessInfoFrom(r.Context())
		i.Operation, i.Pool, i.Model, i.Credential, i.CredentialDigest = "chat.completions", "api", "gpt-4o-mini", "openai-1", "c0ffee"
		i.Attempts, i.Recorded, i.InputTokens, i.TotalTokens = 2, true, &in, &total
		fake.Advance(1500 * time.Millisecond)
	}))
	const token = "rtr_secret-token-0123456789"
	req := httptest.NewRequest("POST", "/v1/chat/completions?api_key=sk-query-secret", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)

	if s := logs.String(); strings.Contains(s, token) || strings.Contains(s, "sk-query-secret") {
		t.Fatalf("access line holds a secret: %s", s)
	}
	var line map[string]any
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
		t.Fatalf("access line %s: %v", logs, err)
	}
	want := map[string]any{
		"msg": "request", "server": "bridge", "request_id": rec.Header().Get("X-Request-ID"), "method": "POST",
		"route": "/v1/chat/completions", "operation": "chat.completions", "status": 200.0, "code": "",
		"pool": "api", "model": "gpt-4o-mini", "credential": "openai-1", "credential_digest": "c0ffee",
		"attempts": 2.0, "client": "ci", "input_tokens": 9.0, "output_tokens": "unknown", "total_tokens": 11.0,
		"duration_ms": 1500.0,
	}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("access line %s = %v, want %v", k, line[k], v)
		}
	}
	if rec.Header().Get("X-Request-ID") == "" {
		t.Error("answer without X-Request-ID")
	}
	if len(m.got) != 1 || m.got[0] != "200 " {
		t.Errorf("counted %q, want one 200 without a code", m.got)
	}
}

// A request that made no usage row logs no token counts at all: not 0,
// not "unknown".
func TestAccessLineWithoutARowHasNoTokens(t *testing.T) {
	logs := &bytes.Buffer{}
	al := AccessLog{Server: "bridge", Logger: slog.New(slog.NewJSONHandler(logs, nil)), Clock: clock.Real()}
	h := al.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { WriteError(w, NewError(CodeInvalidJSON)) }))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/decisions", nil))
	var line map[string]any
	if err := json.Unmarshal(logs.Bytes(), &line); err != nil {
		t.Fatalf("access line %s: %v", logs, err)
	}
	for _, k := range []string{"input_tokens", "output_tokens", "total_tokens"} {
		if v, ok := line[k]; ok {
			t.Errorf("%s = %v on a request without a row, want it absent", k, v)
		}
	}
	if line["status"] != 400.0 || line["code"] != CodeInvalidJSON {
		t.Errorf("status %v code %v, want 400 %s", line["status"], line["code"], CodeInvalidJSON)
	}
}

// rotor's own routes are counted and logged under their path, the reload
// route too; TestRequestsCountedByRoute covers the OpenAI ones.
func TestOwnRoutesCountedByPath(t *testing.T) {
	for _, p := range []string{"/v1/decisions", "/decisions", "/healthz", "/metrics", "/v1/status", "/v1/admin/reload"} {
		if got := routeLabel(p); got != p {
			t.Errorf("routeLabel(%s) = %s, want its path", p, got)
		}
	}
}

// A runtime's record reaches the bridge whole: what the header said when
// the answer started stays when the trailer lacks it, and an aborted
// stream is marked so the bridge aborts its own answer.
func TestAccessInfoHeaderThenTrailer(t *testing.T) {
	n := int64(5)
	start := AccessInfo{Operation: "responses", Pool: "zdr", Model: "m", Region: "eu", Credential: "c1", CredentialDigest: "d1", Attempts: 3}
	end := AccessInfo{Code: "upstream_stream_cut", Recorded: true, Aborted: true, InputTokens: &n}
	var got AccessInfo
	got.Merge(start.Encode())
	got.Merge(end.Encode())
	if got.Operation != "responses" || got.Pool != "zdr" || got.Model != "m" || got.Region != "eu" || got.Credential != "c1" ||
		got.CredentialDigest != "d1" || got.Attempts != 3 || got.Code != "upstream_stream_cut" || !got.Recorded || !got.Aborted ||
		got.InputTokens == nil || *got.InputTokens != 5 || got.OutputTokens != nil {
		t.Errorf("merged record %+v", got)
	}
}

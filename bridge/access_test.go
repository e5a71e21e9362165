package bridge

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/internal/secret"
	"github.com/rotorhq/rotor/internal/testutil"
)

// With a standalone runtime, the bridge's access line names what the
// runtime learned: pool, model, credential and attempts from the header at
// the start of the answer, the code and tokens from the trailer at its end
// (a stream's). The caller sees neither.
func TestStandaloneRuntimeRecordReachesTheAccessLine(t *testing.T) {
	start := &httpx.AccessInfo{Operation: "chat.completions", Pool: "api", Model: "gpt-x", Credential: "team-a", Attempts: 2}
	end := *start
	end.Code, end.Recorded = "upstream_stream_cut", true
	in, out := int64(7), int64(3)
	end.InputTokens, end.OutputTokens = &in, &out
	runtime := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/decisions" {
			// A whole answer: the header alone carries the record.
			w.Header().Set(httpx.AccessHeader, end.Encode())
			w.Header().Set("Content-Length", "2")
			io.WriteString(w, "{}")
			return
		}
		w.Header().Set(httpx.AccessHeader, start.Encode())
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(200)
		io.WriteString(w, "data: {}\n\n")
		w.(http.Flusher).Flush()
		w.Header().Set(http.TrailerPrefix+httpx.AccessHeader, end.Encode())
	}))
	defer runtime.Close()
	u, _ := url.Parse(runtime.URL)

	logs := &testutil.SyncBuffer{}
	ft := &fakeTokens{labels: map[[32]byte]string{secret.New(tok).Hash(): "ci"}, touched: map[string]time.Time{}}
	var b *Bridge
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { b.Handler().ServeHTTP(w, r) }))
	defer srv.Close()
	su, _ := url.Parse(srv.URL)
	port := 0
	for _, c := range su.Port() {
		port = port*10 + int(c-'0')
	}
	b = New(Config{RuntimeURL: u, RuntimeToken: secret.New("runtime-token-0123456789abcdefghijkl"), Tokens: ft, Port: port,
		Logger: slog.New(slog.NewTextHandler(logs, nil)), Clock: clock.Real(), TouchEvery: time.Hour})
	defer b.Close()

	for _, path := range []string{"/v1/chat/completions", "/v1/decisions"} {
		seen := len(logs.String())
		req, _ := http.NewRequest("POST", srv.URL+path, strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if v := resp.Header.Get(httpx.AccessHeader) + resp.Trailer.Get(httpx.AccessHeader) + resp.Header.Get("Trailer"); v != "" {
			t.Errorf("%s: the caller got the runtime's record: %q", path, v)
		}
		line := logs.WaitFor(t, seen, "status=")
		for _, want := range []string{"client=ci", "operation=chat.completions", "pool=api", "model=gpt-x", "credential=team-a", "attempts=2",
			"code=upstream_stream_cut", "input_tokens=7", "output_tokens=3", "total_tokens=unknown", "status=200"} {
			if !strings.Contains(line, want) {
				t.Errorf("%s: access line lacks %s:\n%s", path, want, line)
			}
		}
	}
}

// The record round-trips, and garbage leaves what is known.
func TestAccessInfoEncodeMerge(t *testing.T) {
	n := int64(0)
	want := httpx.AccessInfo{Operation: "decisions", Pool: "zdr", Model: "m&x=y", Region: "eu", Credential: "c", CredentialDigest: "d",
		Attempts: 3, Code: "model_cooldown", Recorded: true, TotalTokens: &n}
	var got httpx.AccessInfo
	got.Merge(want.Encode())
	if got.Model != want.Model || got.Code != want.Code || got.Attempts != 3 || !got.Recorded || got.TotalTokens == nil || *got.TotalTokens != 0 ||
		got.InputTokens != nil || got.Pool != "zdr" || got.Region != "eu" || got.Operation != "decisions" {
		t.Errorf("round trip: %+v, want %+v", got, want)
	}
	got.Merge("%zz;;")
	if got.Pool != "zdr" {
		t.Errorf("garbage changed the record: %+v", got)
	}
	var buf bytes.Buffer
	buf.WriteString(got.Encode())
	if strings.Contains(buf.String(), "\n") {
		t.Error("encoded record holds a newline")
	}
}

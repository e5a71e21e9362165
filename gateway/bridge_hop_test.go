package gateway

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/internal/secret"
)

// hopRig is a standalone runtime whose OpenAI route is openAI, served with
// the given write timeout (zero: none).
func hopRig(t *testing.T, openAI http.Handler, writeTimeout time.Duration) *httptest.Server {
	t.Helper()
	var s *Server
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.Handler().ServeHTTP(w, r) }))
	srv.Config.WriteTimeout = writeTimeout
	srv.Start()
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	status := func(context.Context) any { return fakeStatus{} }
	s = New(Config{Decisions: &fakeRoute{}, OpenAI: openAI, Status: status, Token: secret.New(runtimeToken), Logger: slog.New(slog.DiscardHandler), Port: port})
	return srv
}

// hopCall sends POST /v1/chat/completions with the runtime token, as a
// bridge (naming a client) or as a direct caller.
func hopCall(t *testing.T, srv *httptest.Server, bridge bool) *http.Response {
	t.Helper()
	resp, err := http.DefaultClient.Do(hopRequest(srv, bridge))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// A stream to a bridge leaves event by event: the runtime's flushes reach
// the bridge through the writer that carries its access record, so that
// the first event arrives before the route sends the next.
func TestRuntimeFlushesAStreamToABridge(t *testing.T) {
	for _, bridge := range []bool{true, false} {
		next := make(chan struct{})
		srv := hopRig(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: 1\n\n")
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Errorf("bridge %v: flush: %v", bridge, err)
			}
			select {
			case <-next:
			case <-time.After(10 * time.Second): // a guard against a hang, not a timing
			}
			io.WriteString(w, "data: [DONE]\n\n")
		}), 0)
		// The call runs aside: unflushed, not even the status line
		// leaves before the route ends.
		first, done := make(chan string, 1), make(chan struct{})
		go func() {
			defer close(done)
			resp, err := http.DefaultClient.Do(hopRequest(srv, bridge))
			if err != nil {
				first <- err.Error()
				return
			}
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			line, _ := br.ReadString('\n')
			first <- line
			io.Copy(io.Discard, br)
		}()
		select {
		case line := <-first:
			if line != "data: 1\n" {
				t.Errorf("bridge %v: first line %q", bridge, line)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("bridge %v: the first event did not arrive before the route sent the next (not flushed)", bridge)
		}
		close(next)
		<-done
	}
}

// The route pushes its write deadline out past the server's write timeout
// (a long generation, a stream) through http.ResponseController; to a
// bridge too, where the route writes through the access record's writer.
func TestRouteExtendsItsWriteDeadlineForABridge(t *testing.T) {
	const writeTimeout = 200 * time.Millisecond
	srv := hopRig(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
			t.Errorf("SetWriteDeadline: %v", err)
		}
		time.Sleep(3 * writeTimeout)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}), writeTimeout)
	for _, bridge := range []bool{true, false} {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer "+runtimeToken)
		if bridge {
			req.Header.Set(httpx.ClientHeader, "ci")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("bridge %v: %v (the server's write timeout cut the answer)", bridge, err)
			continue
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || string(b) != `{"ok":true}` {
			t.Errorf("bridge %v: %d %q %v", bridge, resp.StatusCode, b, err)
		}
	}
}

// An answer the route starts with WriteHeader (every error answer) still
// carries the access record to a bridge: a short answer has a
// Content-Length and no trailer, so the header is the record's only way.
func TestRuntimeAccessRecordRidesAnErrorAnswer(t *testing.T) {
	srv := hopRig(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info := httpx.AccessInfoFrom(r.Context())
		info.Pool, info.Model, info.Credential, info.Attempts = "api", "m", "a", 2
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"error":{"code":"rate_limit_exceeded"}}`)
	}), 0)
	resp := hopCall(t, srv, true)
	io.Copy(io.Discard, resp.Body)
	var got httpx.AccessInfo
	got.Merge(resp.Header.Get(httpx.AccessHeader))
	got.Merge(resp.Trailer.Get(httpx.AccessHeader))
	if resp.StatusCode != 429 || got.Pool != "api" || got.Model != "m" || got.Credential != "a" || got.Attempts != 2 {
		t.Errorf("%d: record %+v (header %q), want the route's", resp.StatusCode, got, resp.Header.Get(httpx.AccessHeader))
	}
}

// A stream the route breaks off (http.ErrAbortHandler) ends cleanly to a
// bridge, its trailer marked Aborted so that the bridge breaks off its own
// answer; a direct caller sees the break itself.
func TestBrokenStreamEndsCleanlyToABridgeMarkedAborted(t *testing.T) {
	srv := hopRig(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpx.AccessInfoFrom(r.Context()).Code = "upstream_stream_cut"
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: 1\n\n")
		http.NewResponseController(w).Flush()
		panic(http.ErrAbortHandler)
	}), 0)
	resp := hopCall(t, srv, true)
	b, err := io.ReadAll(resp.Body)
	var got httpx.AccessInfo
	got.Merge(resp.Trailer.Get(httpx.AccessHeader))
	if err != nil || string(b) != "data: 1\n\n" || !got.Aborted || got.Code != "upstream_stream_cut" {
		t.Errorf("to a bridge: body %q err %v, trailer %+v; want the event, a clean end, and a trailer marked aborted", b, err, got)
	}
	resp = hopCall(t, srv, false)
	if _, err := io.ReadAll(resp.Body); err == nil {
		t.Errorf("to a direct caller: the broken stream ended cleanly")
	}
}

// hopRequest is POST /v1/chat/completions with the runtime token, as a
// bridge sends it (naming a client) or as a direct caller.
func hopRequest(srv *httptest.Server, bridge bool) *http.Request {
	req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"api/m","stream":true}`))
	req.Header.Set("Authorization", "Bearer "+runtimeToken)
	if bridge {
		req.Header.Set(httpx.ClientHeader, "ci")
	}
	return req
}

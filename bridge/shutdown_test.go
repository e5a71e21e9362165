package bridge

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/internal/secret"
	"github.com/rotorhq/rotor/internal/testutil"
)

// README, "Streams": a bridge in front of a standalone runtime answers a
// request its stop cut after runtime.shutdown_grace as the in-process
// route does: 503 server_shutdown, with x-should-retry: false, since the
// runtime had the request and may have made a provider call. The proxy
// sees only its caller's context end; answered as a runtime it could not
// reach (502 runtime_unavailable), or with a retry hint, an SDK would send
// the paid call again.
func TestShutdownCutBehindAStandaloneRuntimeIs503ServerShutdown(t *testing.T) {
	arrived := make(chan struct{})
	rsrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // read: its context ends when the bridge leaves
		close(arrived)
		<-r.Context().Done() // a provider call that outlives the grace
	}))
	t.Cleanup(rsrv.Close)
	ru, _ := url.Parse(rsrv.URL)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ft := &fakeTokens{labels: map[[32]byte]string{secret.New(tok).Hash(): "ci"}, touched: map[string]time.Time{}}
	b := New(Config{RuntimeURL: ru, RuntimeToken: secret.New("runtime-token-0123456789abcdefghijkl"), Tokens: ft,
		Port: ln.Addr().(*net.TCPAddr).Port, TouchEvery: time.Hour})
	t.Cleanup(b.Close)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	served := make(chan error, 1)
	go func() {
		served <- httpx.Serve(ctx, ln, b.Handler(), httpx.ServeOptions{Drain: 100 * time.Millisecond, Settle: 10 * time.Second})
	}()

	type reply struct {
		resp *http.Response
		body []byte
	}
	got := make(chan reply, 1)
	go func() {
		resp, body := callWithToken(t, "POST", "http://"+ln.Addr().String()+"/v1/decisions", strings.NewReader(`{"model":"api/m"}`), 0)
		got <- reply{resp, body}
	}()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the runtime")
	}
	stop() // SIGTERM: the request outlives the grace
	r := <-got
	if r.resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(r.body), `"server_shutdown"`) ||
		r.resp.Header.Get("x-should-retry") != "false" {
		t.Errorf("cut request: %d %s (x-should-retry %q), want 503 server_shutdown with x-should-retry: false",
			r.resp.StatusCode, r.body, r.resp.Header.Get("x-should-retry"))
	}
	if err := <-served; err == nil || !strings.Contains(err.Error(), "cut off") {
		t.Errorf("Serve = %v, want the requests-cut-off error", err)
	}
}

// A caller that hangs up while a standalone runtime holds its request is
// logged as what it is: 499 client_closed_request (README, the error
// table), never as a runtime the bridge could not reach (502
// runtime_unavailable, with a "runtime unreachable" warning that sends the
// operator looking for a fault that is not there).
func TestCallerGoneBehindAStandaloneRuntimeIsClientClosedRequest(t *testing.T) {
	arrived := make(chan struct{})
	rsrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // read: its context ends when the bridge leaves
		close(arrived)
		<-r.Context().Done()
	}))
	t.Cleanup(rsrv.Close)
	ru, _ := url.Parse(rsrv.URL)

	logs := &testutil.SyncBuffer{}
	_, srv, _ := setupConfig(t, Config{RuntimeURL: ru, Logger: slog.New(slog.NewTextHandler(logs, nil))})

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/decisions", strings.NewReader(`{"model":"api/m"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the runtime")
	}
	cancel()
	<-done
	line := logs.WaitFor(t, 0, "status=")
	if !strings.Contains(line, "status=499") || !strings.Contains(line, "code=client_closed_request") {
		t.Errorf("access line of a caller that hung up:\n%s\nwant status=499 code=client_closed_request", line)
	}
	if strings.Contains(logs.String(), "runtime unreachable") {
		t.Errorf("a caller hanging up was logged as the runtime unreachable:\n%s", logs.String())
	}
}

// The bridge sets the security headers and X-Request-ID on every answer;
// the standalone runtime's copies are dropped, so that the caller gets
// each once (a doubled X-Request-ID reads "id, id" joined).
func TestStandaloneRuntimeAnswerCarriesEachBridgeHeaderOnce(t *testing.T) {
	names := []string{"X-Content-Type-Options", "Content-Security-Policy", "Cache-Control", "X-Request-ID"}
	rsrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, k := range names {
			w.Header().Set(k, r.Header.Get("X-Request-ID")) // any value: the runtime's own copy
		}
		w.Header().Set("X-Request-ID", r.Header.Get("X-Request-ID"))
		w.Write([]byte(`{}`))
	}))
	t.Cleanup(rsrv.Close)
	ru, _ := url.Parse(rsrv.URL)
	_, srv, _ := setup(t, nil, ru)
	resp, _ := callWithToken(t, "POST", srv.URL+"/v1/decisions", strings.NewReader(`{}`), 0)
	for _, k := range names {
		if v := resp.Header.Values(k); len(v) != 1 {
			t.Errorf("%s: %q, want the bridge's one copy", k, v)
		}
	}
}

// README: a token's last use is written coalesced every TouchEvery (30 s),
// not only when the bridge stops: a bridge that runs for weeks shows it in
// `rotor bridge token list` while it runs.
func TestLastUseIsWrittenEachTouchInterval(t *testing.T) {
	_, srv, ft := setupConfig(t, Config{Runtime: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), TouchEvery: 10 * time.Millisecond})
	callWithToken(t, "POST", srv.URL+"/v1/decisions", strings.NewReader(`{}`), 0)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ft.mu.Lock()
		_, ok := ft.touched["ci"]
		ft.mu.Unlock()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the last use was not written while the bridge ran")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A stream event larger than the server's write buffer (one long
// chunk), after a pause longer than WriteIdle, reaches the caller whole:
// each write, not only each flush, pushes the write deadline out, so
// that only a write the caller does not take within WriteIdle fails
// (README: each write to the caller may block for at most that timeout).
func TestLargeEventAfterAPauseBehindAStandaloneRuntime(t *testing.T) {
	// idle leaves a loaded machine's caller time to take the event.
	const idle = time.Second
	first, big := "data: {}\n\n", "data: {\"text\":\""+strings.Repeat("a", 256<<10)+"\"}\n\n"
	rsrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, first)
		w.(http.Flusher).Flush()
		time.Sleep(2 * idle) // the provider thinks; the caller reads on
		io.WriteString(w, big)
	}))
	t.Cleanup(rsrv.Close)
	ru, _ := url.Parse(rsrv.URL)
	_, srv, _ := setupConfig(t, Config{RuntimeURL: ru, WriteIdle: idle})
	req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"api/m","stream":true}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(body) != first+big {
		t.Errorf("the caller got %d of %d bytes, %v; want the whole stream", len(body), len(first+big), err)
	}
}

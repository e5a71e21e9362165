package decisions

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/httpx"
)

// README, "Streams": a stream that breaks ends without its terminal event
// and without the end of its chunked body, so that an SDK reports an
// error rather than a clean end (openai-go's stream.Err() is nil on a
// clean end); its row says upstream_stream_cut with unknown usage. A
// provider that closes its body early is such a break, on chat and on
// Responses alike (a Responses stream is complete only on its
// response.completed, .incomplete or .failed event).
func TestStreamCutByTheProviderBreaksOffTheCallersAnswer(t *testing.T) {
	for _, c := range []struct {
		path, body string
		events     []string
	}{
		{KindChat.Path, `{"model":"api/gpt-test","stream":true,"messages":[]}`, chatEvents[:3]},
		{KindResponses.Path, `{"model":"api/gpt-test","stream":true,"input":"x"}`, responsesEvents[:2]},
	} {
		h, u := newOpenAIHarness(t, opts{})
		u.script(keyA, c.path, upReply{status: 200, events: c.events})
		resp := h.open(context.Background(), c.path, c.body)
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Errorf("%s: a cut stream ended cleanly; want the answer broken off", c.path)
		}
		if want := strings.Join(c.events, ""); !strings.HasPrefix(string(got), want) && string(got) != want {
			t.Errorf("%s: caller saw %q, want %q", c.path, got, want)
		}
		if row := h.settled(resp.Header.Get("X-Request-ID")); row.ErrorCode != endCut || row.Status != 200 || row.InputTokens.Known || row.CostMicros.Known {
			t.Errorf("%s: row %+v, want %s with unknown usage and cost", c.path, row, endCut)
		}
	}
}

// A caller that stops reading (its connection open, nothing taken) fails
// the stream's writes once stream_idle_timeout passes: the row says
// client_closed_request, the caller's doing, not upstream_stream_cut,
// which would blame a provider that was still sending.
func TestStreamToACallerThatStoppedReadingIsClientClosed(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	h.router.cfg.StreamIdleTimeout = 300 * time.Millisecond // the window of each write, in wall time
	big := "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"" + strings.Repeat("a", 256<<10) + "\"}}]}\n\n"
	events := make([]string, 128) // 32 MiB: more than the sockets hold
	for i := range events {
		events[i] = big
	}
	gone := make(chan struct{})
	u.script(keyA, KindChat.Path, upReply{status: 200, events: events, stallAfter: len(events), gone: gone})
	conn, err := net.Dial("tcp", h.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := `{"model":"api/gpt-test","stream":true,"messages":[]}`
	req, _ := http.NewRequest(http.MethodPost, h.srv.URL+KindChat.Path, strings.NewReader(body))
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	// Nothing is read: the caller's connection stays open and full.
	<-gone // rotor gave up on the caller and cancelled the provider call
	rows := h.rows()
	deadline := time.Now().Add(10 * time.Second)
	for len(rows) == 0 || rows[0].Status == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the row never settled")
		}
		time.Sleep(2 * time.Millisecond)
		rows = h.rows()
	}
	if rows[0].ErrorCode != endClientClosed {
		t.Errorf("row %+v, want %s", rows[0], endClientClosed)
	}
}

// README, "Access log": the line carries the provider calls, how a
// stream ended as its code, and the tokens the row recorded (a bridge in
// front of a standalone runtime gets them in the header and trailer):
// upstream_stream_cut for a cut stream, no code and the usage for a
// complete one or a whole answer.
func TestAccessRecordOnTheOpenAIRoutes(t *testing.T) {
	for _, c := range []struct {
		name  string
		reply upReply
		body  string
		code  string
		input int64 // -1: unknown
	}{
		{"cut stream", upReply{status: 200, events: chatEvents[:3]}, `{"model":"api/gpt-test","stream":true,"messages":[]}`, endCut, -1},
		{"complete stream", upReply{status: 200, events: chatEvents}, `{"model":"api/gpt-test","stream":true,"messages":[]}`, "", 12},
		{"whole answer", upReply{status: 200, body: chatAnswer}, `{"model":"api/gpt-test","messages":[]}`, "", 11},
	} {
		h, u := newOpenAIHarness(t, opts{})
		u.script(keyA, KindChat.Path, c.reply)
		openAI := h.router.OpenAI()
		var info *httpx.AccessInfo
		done := make(chan struct{})
		srv := httptest.NewServer(httpx.RequestIDs(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer close(done) // a cut stream's handler panics (http.ErrAbortHandler)
			var ctx context.Context
			ctx, info = httpx.WithAccessInfo(httpx.WithCaller(r.Context(), httpx.Caller{Label: "test-client"}))
			openAI.ServeHTTP(w, r.WithContext(ctx))
		}), nil))
		resp, err := http.Post(srv.URL+KindChat.Path, "application/json", strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		<-done
		srv.Close()
		if info.Code != c.code || !info.Recorded || info.Attempts != 1 || (c.input < 0) != (info.InputTokens == nil) || c.input >= 0 && *info.InputTokens != c.input {
			t.Errorf("%s: access record code %q recorded %v attempts %d input %v; want code %q, 1 attempt, input %d",
				c.name, info.Code, info.Recorded, info.Attempts, info.InputTokens, c.code, c.input)
		}
	}
}

// A provider silent for stream_idle_timeout after its last byte is cut
// then, not up to a whole timeout later: the watch, finding the provider
// active 60 s ago at its first check, waits the 60 s left, not another
// 120 s (a stream that sent a byte a moment before each check would
// otherwise be cut only after nearly twice the timeout).
func TestStreamIdleWatchCutsOnTimeAfterActivity(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	rt := &Route{cfg: Config{Clock: clk, StreamIdleTimeout: 2 * time.Minute}}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	var last atomic.Int64
	last.Store(clk.Now().UnixNano())
	stop := rt.watchIdle(cancel, &last)
	defer stop()
	clk.Advance(time.Minute)
	last.Store(clk.Now().UnixNano()) // the provider's last byte
	clk.Advance(time.Minute)         // the first check: active 60 s ago
	waitFakeTimers(t, clk, 1)
	if ctx.Err() != nil {
		t.Fatalf("cut 60 s after the provider's last byte: %v", context.Cause(ctx))
	}
	clk.Advance(time.Minute) // 120 s of silence
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a provider silent for stream_idle_timeout after its last byte was not cut")
	}
	if err := context.Cause(ctx); !errors.Is(err, errStreamIdle) {
		t.Errorf("cause %v, want %v", err, errStreamIdle)
	}
}

// A stream's row counts every provider call the request made: one that
// failed over on a 429 before the first byte records 2 attempts, as a
// whole answer's row does.
func TestStreamRowCountsTheCallsBeforeTheFirstByte(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	u.script(keyA, KindChat.Path, upReply{status: 429, body: `{"error":{"message":"slow","type":"requests","code":"rate_limit_exceeded"}}`})
	u.script(keyB, KindChat.Path, upReply{status: 200, events: chatEvents})
	resp := h.open(context.Background(), KindChat.Path, `{"model":"api/gpt-test","stream":true,"messages":[]}`)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if row := h.row(resp.Header.Get("X-Request-ID")); row.Attempts != 2 || row.Credential != "team-b" || resp.Header.Get("X-Rotor-Attempts") != "2" {
		t.Errorf("row %+v (X-Rotor-Attempts %q), want 2 attempts answered by team-b", row, resp.Header.Get("X-Rotor-Attempts"))
	}
}

// Every byte the provider sends (an SSE comment, a partial event) is
// activity on the route's clock: the idle watch measures silence from
// it, so a stream that keeps sending is never cut as silent.
func TestStreamActivityIsEachRead(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	var last atomic.Int64
	a := &activity{r: strings.NewReader(": keep-alive\n\n"), clk: clk, last: &last}
	clk.Advance(time.Minute)
	buf := make([]byte, 4)
	if n, err := a.Read(buf); n == 0 || err != nil {
		t.Fatalf("read %d, %v", n, err)
	}
	if got := time.Unix(0, last.Load()); !got.Equal(clk.Now()) {
		t.Errorf("last activity %v, want the read at %v", got, clk.Now())
	}
	io.Copy(io.Discard, a)
	if !a.eof {
		t.Error("the body's end was not noted")
	}
}

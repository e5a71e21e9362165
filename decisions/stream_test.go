package decisions

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/ledger"
)

var (
	chatEvents = []string{
		"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"he\"}}],\"usage\":null}\n\n",
		": keep-alive\n\n",
		"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"llo\"},\"finish_reason\":\"stop\"}],\"usage\":null}\n\n",
		"data: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":4,\"total_tokens\":16,\"prompt_tokens_details\":{\"cached_tokens\":2}}}\n\n",
		"data: [DONE]\n\n",
	}
	responsesEvents = []string{
		"event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_s\"}}\n\n",
		"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n",
		"event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_s\",\"usage\":{\"input_tokens\":8,\"output_tokens\":3,\"total_tokens\":11,\"output_tokens_details\":{\"reasoning_tokens\":1}}}}\n\n",
	}
)

// open sends a request and returns the answer unread.
func (h *harness) open(ctx context.Context, path, body string) *http.Response {
	h.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.srv.URL+path, strings.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("POST %s: %v", path, err)
	}
	return resp
}

// settled waits until the request's row is settled (status set).
func (h *harness) settled(id string) ledger.Row {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		for _, r := range h.rows() {
			if r.RequestID == id && r.Status != 0 {
				return r
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("row of %s never settled", id)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestChatStreamHidesOnlyTheInjectedUsageChunk(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	u.script(keyA, KindChat.Path, upReply{status: 200, events: chatEvents})
	all := strings.Join(chatEvents, "")
	without := strings.Join(append(append([]string{}, chatEvents[:3]...), chatEvents[4]), "")
	for _, c := range []struct {
		name, body, want, upstream string
	}{
		{"rotor asks for usage", `{"model":"api/gpt-test","stream":true,"messages":[]}`, without,
			`{"model":"gpt-test","stream":true,"messages":[],"stream_options":{"include_usage":true}}`},
		{"caller asked", `{"model":"api/gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[]}`, all,
			`{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[]}`},
		{"caller said false", `{"model":"api/gpt-test","stream":true,"stream_options":{"include_usage":false},"messages":[]}`, without,
			`{"model":"gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[]}`},
	} {
		resp := h.open(context.Background(), KindChat.Path, c.body)
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(got) != c.want {
			t.Errorf("%s: caller saw\n%q\nwant\n%q", c.name, got, c.want)
		}
		sent := u.requests()
		if b := sent[len(sent)-1]; b.body != c.upstream || b.header.Get("Accept") != "text/event-stream" {
			t.Errorf("%s: upstream got %s (Accept %q), want %s", c.name, b.body, b.header.Get("Accept"), c.upstream)
		}
		row := h.row(resp.Header.Get("X-Request-ID"))
		if row.Status != 200 || row.ErrorCode != "" || row.InputTokens != ledger.Known(12) || row.OutputTokens != ledger.Known(4) ||
			row.CachedInputTokens != ledger.Known(2) || row.Operation != "chat.completions" {
			t.Errorf("%s: row %+v", c.name, row)
		}
	}
}

// Some OpenAI-compatible servers put the usage on the last content chunk
// (beside its choices, with finish_reason), not on a chunk of its own: the
// row was recorded with unknown tokens and cost (a cost budget then
// refuses every request) though the usage came through. It counts now,
// and the chunk reaches the caller whole: it carries content.
func TestChatStreamUsageBesideChoicesIsRecorded(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	events := []string{
		"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"he\"}}]}\n\n",
		"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"llo\"},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":4,\"total_tokens\":16}}\n\n",
		"data: [DONE]\n\n",
	}
	u.script(keyA, KindChat.Path, upReply{status: 200, events: events})
	resp := h.open(context.Background(), KindChat.Path, `{"model":"api/gpt-test","stream":true,"messages":[]}`)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := strings.Join(events, ""); string(got) != want {
		t.Errorf("caller saw\n%q\nwant\n%q", got, want)
	}
	row := h.row(resp.Header.Get("X-Request-ID"))
	if row.ErrorCode != "" || row.InputTokens != ledger.Known(12) || row.OutputTokens != ledger.Known(4) {
		t.Errorf("row %+v, want 12 input and 4 output tokens", row)
	}
}

func TestResponsesStreamRecordsUsage(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	u.script(keyA, KindResponses.Path, upReply{status: 200, events: responsesEvents})
	resp := h.open(context.Background(), KindResponses.Path, `{"model":"api/gpt-test","stream":true,"input":"hi"}`)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := strings.Join(responsesEvents, ""); string(got) != want {
		t.Errorf("caller saw\n%q\nwant\n%q", got, want)
	}
	row := h.row(resp.Header.Get("X-Request-ID"))
	if row.ErrorCode != "" || row.InputTokens != ledger.Known(8) || row.ReasoningTokens != ledger.Known(1) || row.Operation != "responses" {
		t.Errorf("row %+v", row)
	}
	if cred, ok := h.router.affinity.lookup("resp_s"); !ok || cred != "team-a" {
		t.Errorf("a streamed response's id is not pinned to its credential: %q %v", cred, ok)
	}
}

func TestStreamFailsOverBeforeTheFirstByteOnly(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	u.script(keyA, KindChat.Path, upReply{status: 429, body: `{"error":{"message":"slow","type":"requests","code":"rate_limit_exceeded"}}`})
	u.script(keyB, KindChat.Path, upReply{status: 200, events: chatEvents})
	resp := h.open(context.Background(), KindChat.Path, `{"model":"api/gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[]}`)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != strings.Join(chatEvents, "") || resp.Header.Get("X-Rotor-Credential") != "team-b" {
		t.Errorf("after a 429 before the first byte: %s from %s", got, resp.Header.Get("X-Rotor-Credential"))
	}

	// Cut after two events: the caller sees them and no [DONE]; nothing is
	// sent again.
	h, u = newOpenAIHarness(t, opts{})
	u.script(keyA, KindChat.Path, upReply{status: 200, events: chatEvents[:2]})
	u.script(keyB, KindChat.Path, upReply{status: 200, events: chatEvents})
	resp = h.open(context.Background(), KindChat.Path, `{"model":"api/gpt-test","stream":true,"messages":[]}`)
	got, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != strings.Join(chatEvents[:2], "") {
		t.Errorf("cut stream: caller saw %q", got)
	}
	if n := len(u.requests()); n != 1 {
		t.Errorf("%d provider calls after the first byte, want 1", n)
	}
	if row := h.row(resp.Header.Get("X-Request-ID")); row.ErrorCode != endCut || row.Status != 200 || row.InputTokens.Known {
		t.Errorf("cut row %+v, want %s with unknown usage", row, endCut)
	}
}

func TestStreamClientDisconnectCancelsUpstream(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	gone := make(chan struct{})
	u.script(keyA, KindChat.Path, upReply{status: 200, events: chatEvents, stallAfter: 1, gone: gone})
	ctx, cancel := context.WithCancel(context.Background())
	resp := h.open(ctx, KindChat.Path, `{"model":"api/gpt-test","stream":true,"messages":[]}`)
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != strings.SplitAfter(chatEvents[0], "\n")[0] {
		t.Fatalf("first event: %q %v", line, err)
	}
	cancel()
	resp.Body.Close()
	select {
	case <-gone:
	case <-time.After(10 * time.Second):
		t.Fatal("the provider call was not cancelled")
	}
	if row := h.settled(resp.Header.Get("X-Request-ID")); row.ErrorCode != endClientClosed {
		t.Errorf("row %+v, want %s", row, endClientClosed)
	}
}

func TestStreamIdleTimeoutCutsASilentProvider(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	gone := make(chan struct{})
	u.script(keyA, KindChat.Path, upReply{status: 200, events: chatEvents, stallAfter: 1, gone: gone})
	resp := h.open(context.Background(), KindChat.Path, `{"model":"api/gpt-test","stream":true,"messages":[]}`)
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	h.waitTimers(1)
	h.clk.Advance(119 * time.Second)
	h.clk.Advance(time.Second)
	rest, _ := io.ReadAll(br)
	if strings.Contains(string(rest), "[DONE]") {
		t.Errorf("a cut stream ended with [DONE]: %q", rest)
	}
	<-gone
	if row := h.row(resp.Header.Get("X-Request-ID")); row.ErrorCode != endIdle {
		t.Errorf("row %+v, want %s", row, endIdle)
	}
}

func TestStreamTerminalEventWaitsForTheRow(t *testing.T) {
	for _, c := range []struct {
		path, body string
		events     []string
		terminal   string
	}{
		{KindChat.Path, `{"model":"api/gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[]}`, chatEvents, "[DONE]"},
		{KindResponses.Path, `{"model":"api/gpt-test","stream":true,"input":"x"}`, responsesEvents, "response.completed"},
	} {
		h, u := newOpenAIHarness(t, opts{wrapLedger: func(l Ledger) Ledger { return settleFails{l} }})
		u.script(keyA, c.path, upReply{status: 200, events: c.events})
		resp := h.open(context.Background(), c.path, c.body)
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := strings.Join(c.events[:len(c.events)-1], ""); string(got) != want {
			t.Errorf("%s: the row did not commit, caller saw\n%q\nwant everything but %s", c.path, got, c.terminal)
		}
	}
}

func TestStreamOutlastsTheServerWriteTimeout(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	// Seven events 500 ms apart: a 3 s stream behind a 1 s write timeout.
	events := []string{}
	for range 6 {
		events = append(events, chatEvents[0])
	}
	events = append(events, "data: [DONE]\n\n")
	u.script(keyA, KindChat.Path, upReply{status: 200, events: events, every: 500 * time.Millisecond})
	srv := httptest.NewUnstartedServer(h.srv.Config.Handler)
	srv.Config.WriteTimeout = time.Second
	srv.Start()
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+KindChat.Path, strings.NewReader(`{"model":"api/gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || string(got) != strings.Join(events, "") {
		t.Errorf("stream behind a 1 s write timeout: %v, got %q", err, got)
	}
}

func TestStreamCutAtTheGenerationDeadline(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{generation: 300 * time.Millisecond})
	gone := make(chan struct{})
	u.script(keyA, KindResponses.Path, upReply{status: 200, events: responsesEvents, stallAfter: 2, gone: gone})
	resp := h.open(context.Background(), KindResponses.Path, `{"model":"api/gpt-test","stream":true,"input":"x"}`)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	<-gone
	if want := strings.Join(responsesEvents[:2], ""); string(got) != want {
		t.Errorf("caller saw %q, want the two events sent", got)
	}
	if row := h.row(resp.Header.Get("X-Request-ID")); row.ErrorCode != endDeadline || row.Status != 200 || row.InputTokens.Known {
		t.Errorf("row %+v, want %s with unknown usage", row, endDeadline)
	}
}

// DESIGN: shutdown waits runtime.shutdown_grace for streams, then cuts
// them and settles their rows; the row says server_shutdown, and the
// caller's stream ends without its terminal event.
func TestStreamCutAtShutdownRecordsServerShutdown(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	gone := make(chan struct{})
	u.script(keyA, KindChat.Path, upReply{status: 200, events: chatEvents, stallAfter: 1, gone: gone})
	addr, stop, served := h.serveDraining()
	defer stop()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+KindChat.Path, strings.NewReader(`{"model":"api/gpt-test","stream":true,"messages":[]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	stop() // SIGINT: the stream outlives the grace
	rest, _ := io.ReadAll(br)
	if strings.Contains(string(rest), "[DONE]") {
		t.Errorf("a stream cut at shutdown ended with [DONE]: %q", rest)
	}
	<-gone
	if row := h.settled(resp.Header.Get("X-Request-ID")); row.ErrorCode != endShutdown {
		t.Errorf("row %+v, want %s", row, endShutdown)
	}
	if err := <-served; err == nil || !strings.Contains(err.Error(), "cut off") {
		t.Errorf("Serve = %v, want the requests-cut-off error", err)
	}
}

// readThrough reads the caller's stream through the end of the event that
// holds want.
func readThrough(t *testing.T, br *bufio.Reader, want string) string {
	t.Helper()
	var got strings.Builder
	for !strings.Contains(got.String(), want) || !strings.HasSuffix(got.String(), "\n\n") {
		line, err := br.ReadString('\n')
		got.WriteString(line)
		if err != nil {
			t.Fatalf("stream ended before %q: %v\n%s", want, err, got.String())
		}
	}
	return got.String()
}

// A complete stream's provider connection goes back to the pool: rotor
// reads the body to its end (the last chunk, which the provider here sends
// only once the caller holds the terminal event) instead of closing it at
// the terminal event, which would make the next request dial again.
func TestStreamProviderConnectionIsReused(t *testing.T) {
	for _, c := range []struct {
		path, body, terminal string
		events               []string
	}{
		{KindChat.Path, `{"model":"api/gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[]}`, "[DONE]", chatEvents},
		{KindResponses.Path, `{"model":"api/gpt-test","stream":true,"input":"x"}`, "response.completed", responsesEvents},
	} {
		// rotor's own client, limited to one connection to the provider:
		// a request then waits for the connection the last one returns
		// to the pool (the transport's read loop does that a moment after
		// the body's end, and the catalog fetch's just before the first
		// stream) instead of dialing beside it, so that only a
		// connection closed early dials again.
		client := NewHTTPClient()
		client.Transport.(*http.Transport).MaxConnsPerHost = 1
		h, u := newOpenAIHarness(t, opts{httpClient: client})
		var conns []int64
		for range 3 {
			release := make(chan struct{})
			u.script(keyA, c.path, upReply{status: 200, events: c.events, release: release})
			resp := h.open(context.Background(), c.path, c.body)
			br := bufio.NewReader(resp.Body)
			readThrough(t, br, c.terminal)
			close(release)
			if rest, err := io.ReadAll(br); err != nil || len(rest) != 0 {
				t.Errorf("%s: after the terminal event the caller read %q, %v", c.path, rest, err)
			}
			resp.Body.Close()
			if row := h.settled(resp.Header.Get("X-Request-ID")); row.ErrorCode != "" {
				t.Errorf("%s: row %+v, want a complete stream", c.path, row)
			}
			conns = append(conns, u.conns.Load())
		}
		if conns[2] != conns[0] {
			t.Errorf("%s: connections to the provider after each of three streams: %v, want no new one", c.path, conns)
		}
	}
}

// A provider that keeps a stream open after its terminal event does not
// hold the caller: rotor gives up on the connection drainWait later. Every
// terminal event counts: a Responses stream ending on response.incomplete
// (max_output_tokens reached) or response.failed was held open until
// stream_idle_timeout, then cut, so the SDK reported an error after a
// complete answer and the row said stream_idle_timeout.
func TestStreamEndsWhenTheProviderLingersAfterTheTerminalEvent(t *testing.T) {
	responses := func(typ string) []string {
		return []string{responsesEvents[0], "event: " + typ + "\ndata: {\"type\":\"" + typ +
			"\",\"response\":{\"id\":\"resp_s\",\"usage\":{\"input_tokens\":8,\"output_tokens\":3,\"total_tokens\":11}}}\n\n"}
	}
	for _, c := range []struct {
		name, path, body, terminal string
		events                     []string
	}{
		{"chat [DONE]", KindChat.Path, `{"model":"api/gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[]}`, "[DONE]", chatEvents},
		{"response.completed", KindResponses.Path, `{"model":"api/gpt-test","stream":true,"input":"hi"}`, "response.completed", responses("response.completed")},
		{"response.incomplete", KindResponses.Path, `{"model":"api/gpt-test","stream":true,"input":"hi"}`, "response.incomplete", responses("response.incomplete")},
		{"response.failed", KindResponses.Path, `{"model":"api/gpt-test","stream":true,"input":"hi"}`, "response.failed", responses("response.failed")},
	} {
		t.Run(c.name, func(t *testing.T) {
			h, u := newOpenAIHarness(t, opts{})
			gone := make(chan struct{})
			u.script(keyA, c.path, upReply{status: 200, events: c.events, release: make(chan struct{}), gone: gone})
			// Bounded: without rotor's own bound the caller would wait for good.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp := h.open(ctx, c.path, c.body)
			defer resp.Body.Close()
			br := bufio.NewReader(resp.Body)
			got := readThrough(t, br, c.terminal)
			h.waitTimers(2) // the idle watch and the wait for the stream's end
			h.clk.Advance(drainWait)
			rest, err := io.ReadAll(br)
			if err != nil || len(rest) != 0 {
				t.Errorf("after the terminal event the caller read %q, %v", rest, err)
			}
			if want := strings.Join(c.events, ""); got != want {
				t.Errorf("caller saw\n%q\nwant\n%q", got, want)
			}
			<-gone // the provider call was cancelled
			if row := h.row(resp.Header.Get("X-Request-ID")); row.ErrorCode != "" || row.Status != 200 || !row.InputTokens.Known {
				t.Errorf("row %+v, want a complete stream with its usage", row)
			}
		})
	}
}

// An event that arrived complete reaches the caller at once, even when the
// start of the next block came with it and holds a comment line after a
// field line: that comment is part of an unfinished block, not an event
// the proxy may wait for before it flushes. The provider holds the rest of
// its stream until the caller has the first event.
func TestStreamEventNotHeldBehindACommentInTheNextBlock(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	release := make(chan struct{})
	first := chatEvents[0]
	u.script(keyA, KindChat.Path, upReply{status: 200, release: release,
		events: []string{first + "data: {\"id\":\"c1\",\"choices\":[],\"usage\":null}\n: note\n"}})
	got := make(chan string, 1)
	go func() {
		// Not h.open: a goroutine must not call t.Fatal.
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+KindChat.Path,
			strings.NewReader(`{"model":"api/gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[]}`))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		buf := make([]byte, len(first))
		n, _ := io.ReadFull(resp.Body, buf)
		got <- string(buf[:n])
		_, _ = io.Copy(io.Discard, resp.Body)
	}()
	select {
	case s := <-got:
		if s != first {
			t.Errorf("caller read %q, want the first event %q", s, first)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("the first event never reached the caller while the next block was unfinished")
	}
	close(release)
}

// A provider ending lines with "\r\n" whose blank line after the stop
// chunk is split across reads between "\r" and "\n": the "\n" arrives
// with the usage chunk rotor injected and drops, and still reaches the
// caller, whose stream stays byte for byte the provider's (a reader that
// splits lines on "\n" would otherwise read "\rdata: [DONE]").
func TestDroppedUsageChunkKeepsTheSplitCRLF(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{})
	role := "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"he\"}}],\"usage\":null}\r\n\r\n"
	stopHead := "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\r\n\r"
	usage := "\ndata: {\"id\":\"c1\",\"choices\":[],\"usage\":{\"prompt_tokens\":12,\"completion_tokens\":4,\"total_tokens\":16}}\r\n\r\n"
	done := "data: [DONE]\r\n\r\n"
	u.script(keyA, KindChat.Path, upReply{status: 200, every: 50 * time.Millisecond, events: []string{role, stopHead, usage, done}})
	resp := h.open(context.Background(), KindChat.Path, `{"model":"api/gpt-test","stream":true,"messages":[]}`)
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := role + stopHead + "\n" + done; string(got) != want {
		t.Errorf("caller saw\n%q\nwant\n%q", got, want)
	}
	if row := h.row(resp.Header.Get("X-Request-ID")); row.InputTokens != ledger.Known(12) || row.OutputTokens != ledger.Known(4) {
		t.Errorf("row %+v, want the usage chunk's 12 and 4 tokens", row)
	}
}

// A provider ending lines with "\r\n" whose terminal event's last "\r\n"
// is split across reads between "\r" and "\n": the terminal event goes
// out held at its "\r", and the "\n" that arrives after it still reaches
// the caller, whose stream stays byte for byte the provider's (a reader
// that splits lines on "\n" would otherwise be left with a last line that
// never ends).
func TestHeldTerminalKeepsItsSplitCRLF(t *testing.T) {
	for _, c := range []struct {
		kind        *Kind
		body        string
		first, last string
	}{
		{KindChat, `{"model":"api/gpt-test","stream":true,"messages":[]}`,
			"data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"he\"}}],\"usage\":null}\r\n\r\n",
			"data: [DONE]\r\n\r"},
		{KindResponses, `{"model":"api/gpt-test","stream":true,"input":"x"}`,
			"event: response.created\r\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_s\"}}\r\n\r\n",
			"event: response.completed\r\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_s\",\"usage\":{\"input_tokens\":8,\"output_tokens\":3,\"total_tokens\":11}}}\r\n\r"},
	} {
		t.Run(c.kind.Path, func(t *testing.T) {
			h, u := newOpenAIHarness(t, opts{})
			release := make(chan struct{})
			u.script(keyA, c.kind.Path, upReply{status: 200, events: []string{c.first, c.last}, release: release, tail: "\n"})
			resp := h.open(context.Background(), c.kind.Path, c.body)
			defer resp.Body.Close()
			head := make([]byte, len(c.first)+len(c.last))
			if _, err := io.ReadFull(resp.Body, head); err != nil || string(head) != c.first+c.last {
				t.Fatalf("caller read %q, %v; want %q", head, err, c.first+c.last)
			}
			close(release) // the provider sends the "\n" and ends its stream
			rest, err := io.ReadAll(resp.Body)
			if err != nil || string(rest) != "\n" {
				t.Errorf("after the terminal event the caller read %q, %v; want the provider's \"\\n\"", rest, err)
			}
		})
	}
}

// The "\n" ending the event before the terminal one, split from its "\r"
// and arriving with the terminal event, belongs to that event: it reaches
// the caller at once, not held back with the terminal event until the row
// commits, nor lost with it when the row cannot commit (a reader that
// splits lines on "\n" would never see the event before end).
func TestHeldTerminalDoesNotHoldTheSplitCRLFBeforeIt(t *testing.T) {
	h, u := newOpenAIHarness(t, opts{wrapLedger: func(l Ledger) Ledger { return settleFails{l} }})
	release := make(chan struct{})
	stopHead := "data: {\"id\":\"c1\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":null}\r\n\r"
	u.script(keyA, KindChat.Path, upReply{status: 200, events: []string{stopHead}, release: release, tail: "\ndata: [DONE]\r\n\r\n"})
	resp := h.open(context.Background(), KindChat.Path, `{"model":"api/gpt-test","stream":true,"stream_options":{"include_usage":true},"messages":[]}`)
	defer resp.Body.Close()
	head := make([]byte, len(stopHead))
	if _, err := io.ReadFull(resp.Body, head); err != nil || string(head) != stopHead {
		t.Fatalf("caller read %q, %v; want %q", head, err, stopHead)
	}
	close(release)                   // the provider sends the "\n", [DONE] and ends its stream
	rest, _ := io.ReadAll(resp.Body) // the row does not commit: the stream breaks off
	if string(rest) != "\n" {
		t.Errorf("after the stop chunk the caller read %q; want the \"\\n\" that ends it", rest)
	}
}

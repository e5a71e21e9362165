package fakeprovider

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/sse"
)

const (
	chatModel  = "gpt-4o-mini"
	embedModel = "text-embedding-3-small"
	chatBody   = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello."}]}`
	respBody   = `{"model":"gpt-4o-mini","input":"Say hello."}`
	embedBody  = `{"model":"text-embedding-3-small","input":["one","two","three"]}`
)

// startRoutes starts a fake whose keyA serves the chat and embedding models.
func startRoutes(t *testing.T, opts Options) (*Server, *http.Client) {
	t.Helper()
	s := startFake(t, opts)
	s.AddKey(keyA, chatModel, embedModel)
	return s, newClient(t)
}

func post(t *testing.T, c *http.Client, s *Server, path, body string) (*http.Response, []byte) {
	t.Helper()
	return do(t, c, http.MethodPost, s.URL()+path, keyA, []byte(body))
}

func streamBody(path string, includeUsage bool) string {
	b := chatBody
	if path == PathResponses {
		b = respBody
	}
	b = strings.TrimSuffix(b, "}") + `,"stream":true`
	if includeUsage {
		b += `,"stream_options":{"include_usage":true}`
	}
	return b + "}"
}

// decodeStrict decodes b into v, failing on trailing data.
func decodeStrict(t *testing.T, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		t.Fatalf("decode: %v: %q", err, b)
	}
	if dec.More() {
		t.Fatalf("trailing data after the JSON value: %q", b)
	}
}

type chatUsage struct {
	PromptTokens        int64 `json:"prompt_tokens"`
	CompletionTokens    int64 `json:"completion_tokens"`
	TotalTokens         int64 `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
	CompletionTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"completion_tokens_details"`
}

func (u chatUsage) route() RouteUsage {
	return RouteUsage{u.PromptTokens, u.CompletionTokens, u.TotalTokens, u.PromptTokensDetails.CachedTokens, u.CompletionTokensDetails.ReasoningTokens}
}

type respUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	OutputTokens       int64 `json:"output_tokens"`
	TotalTokens        int64 `json:"total_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
}

func (u respUsage) route() RouteUsage {
	return RouteUsage{u.InputTokens, u.OutputTokens, u.TotalTokens, u.InputTokensDetails.CachedTokens, u.OutputTokensDetails.ReasoningTokens}
}

func TestChatCompletionAnswer(t *testing.T) {
	s, c := startRoutes(t, Options{})
	resp, b := post(t, c, s, PathChat, chatBody)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, Content-Type %q: %s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	var got struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		Model   string `json:"model"`
		Choices []struct {
			Index   *int `json:"index"`
			Message struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage chatUsage `json:"usage"`
	}
	decodeStrict(t, b, &got)
	if !strings.HasPrefix(got.ID, "chatcmpl-") || got.Object != "chat.completion" || got.Created == 0 || got.Model != chatModel {
		t.Errorf("answer head = %q %q %d %q", got.ID, got.Object, got.Created, got.Model)
	}
	if len(got.Choices) != 1 || got.Choices[0].Index == nil || *got.Choices[0].Index != 0 ||
		got.Choices[0].Message.Role != "assistant" || got.Choices[0].Message.Content != "Hello from the" ||
		got.Choices[0].FinishReason != "stop" {
		t.Errorf("choices = %+v", got.Choices)
	}
	want := ExpectedRouteUsage([]byte(chatBody), OutputTokens)
	if got.Usage.route() != want {
		t.Errorf("usage = %+v, want %+v", got.Usage.route(), want)
	}
	if want.Cached == 0 || want.Reasoning == 0 {
		t.Errorf("ExpectedRouteUsage = %+v: cached and reasoning should be non-zero so that tests see them", want)
	}
}

func TestResponsesAnswer(t *testing.T) {
	s, c := startRoutes(t, Options{})
	resp, b := post(t, c, s, PathResponses, respBody)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var got struct {
		ID     string `json:"id"`
		Object string `json:"object"`
		Status string `json:"status"`
		Model  string `json:"model"`
		Output []struct {
			Type    string `json:"type"`
			Role    string `json:"role"`
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
		Usage respUsage `json:"usage"`
	}
	decodeStrict(t, b, &got)
	if !strings.HasPrefix(got.ID, "resp_") || got.Object != "response" || got.Status != "completed" || got.Model != chatModel {
		t.Errorf("answer head = %q %q %q %q", got.ID, got.Object, got.Status, got.Model)
	}
	if len(got.Output) != 1 || got.Output[0].Type != "message" || len(got.Output[0].Content) != 1 ||
		got.Output[0].Content[0].Type != "output_text" || got.Output[0].Content[0].Text != "Hello from the" {
		t.Errorf("output = %+v", got.Output)
	}
	if want := ExpectedRouteUsage([]byte(respBody), OutputTokens); got.Usage.route() != want {
		t.Errorf("usage = %+v, want %+v", got.Usage.route(), want)
	}
}

func TestEmbeddingsAnswer(t *testing.T) {
	s, c := startRoutes(t, Options{})
	type answer struct {
		Object string `json:"object"`
		Model  string `json:"model"`
		Data   []struct {
			Object    string          `json:"object"`
			Index     int             `json:"index"`
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int64 `json:"prompt_tokens"`
			TotalTokens  int64 `json:"total_tokens"`
		} `json:"usage"`
	}
	tests := []struct {
		name   string
		body   string
		inputs int
		base64 bool
	}{
		{"three strings", embedBody, 3, false},
		{"one string", `{"model":"text-embedding-3-small","input":"one"}`, 1, false},
		{"one token array", `{"model":"text-embedding-3-small","input":[1,2,3]}`, 1, false},
		{"two token arrays", `{"model":"text-embedding-3-small","input":[[1],[2]]}`, 2, false},
		{"base64", `{"model":"text-embedding-3-small","input":"one","encoding_format":"base64"}`, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := post(t, c, s, PathEmbeddings, tt.body)
			if resp.StatusCode != 200 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
			var got answer
			decodeStrict(t, b, &got)
			if bytes.Contains(b, []byte("padding")) {
				t.Errorf("a normal answer has HugeAnswer's padding member: %s", b)
			}
			if got.Object != "list" || got.Model != embedModel || len(got.Data) != tt.inputs {
				t.Fatalf("answer = %s", b)
			}
			for i, d := range got.Data {
				var vec []float32
				if tt.base64 {
					var s string
					decodeStrict(t, d.Embedding, &s)
					raw, err := base64.StdEncoding.DecodeString(s)
					if err != nil || len(raw) != 4*EmbeddingDims {
						t.Fatalf("base64 embedding %q: %v", s, err)
					}
					for j := range EmbeddingDims {
						vec = append(vec, math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:])))
					}
				} else {
					decodeStrict(t, d.Embedding, &vec)
				}
				if d.Object != "embedding" || d.Index != i || len(vec) != EmbeddingDims || vec[1] != EmbeddingValue(i, 1) {
					t.Errorf("data[%d] = %s %d %v", i, d.Object, d.Index, vec)
				}
			}
			want := ExpectedRouteUsage([]byte(tt.body), 0).Input
			if got.Usage.PromptTokens != want || got.Usage.TotalTokens != want {
				t.Errorf("usage = %+v, want prompt = total = %d", got.Usage, want)
			}
		})
	}
}

func TestRouteBadRequests(t *testing.T) {
	s, c := startRoutes(t, Options{})
	tests := []struct {
		path, body string
		status     int
		code       string
		param      string
	}{
		{PathChat, `{`, 400, "", ""},
		{PathChat, `{"messages":[]}`, 400, "", "model"},
		{PathChat, `{"model":"gpt-4o-mini"}`, 400, "missing_required_parameter", "messages"},
		{PathChat, `{"model":"nope","messages":[]}`, 404, "model_not_found", "model"},
		{PathResponses, `{"model":"gpt-4o-mini"}`, 400, "missing_required_parameter", "input"},
		{PathResponses, `{"model":"gpt-4o-mini","input":"x","stream":"yes"}`, 400, "", ""},
		{PathEmbeddings, `{"model":"text-embedding-3-small"}`, 400, "missing_required_parameter", "input"},
	}
	for _, tt := range tests {
		resp, b := post(t, c, s, tt.path, tt.body)
		_, _, code, param := parseError(t, b)
		if resp.StatusCode != tt.status || code != tt.code || param != tt.param {
			t.Errorf("%s %s: %d code %q param %q, want %d %q %q", tt.path, tt.body, resp.StatusCode, code, param, tt.status, tt.code, tt.param)
		}
	}
}

// readStream reads a streamed answer event by event.
func readStream(t *testing.T, resp *http.Response) ([]sse.Event, error) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type = %q, want text/event-stream", ct)
	}
	sc := sse.NewScanner(resp.Body)
	var evs []sse.Event
	for {
		ev, err := sc.Next()
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return evs, err
		}
		ev.Raw = bytes.Clone(ev.Raw)
		ev.Data = bytes.Clone(ev.Data)
		evs = append(evs, ev)
	}
}

func openStream(t *testing.T, c *http.Client, s *Server, path, body string) *http.Response {
	t.Helper()
	resp, err := c.Do(newRequest(t, waitCtx(t), http.MethodPost, s.URL()+path, keyA, []byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	return resp
}

type chatChunk struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
}

// TestChatStreamUsageChunk: with include_usage, every chunk carries
// "usage": null and a final chunk with "choices": [] carries the usage,
// then data: [DONE]; without it no chunk has a usage member at all.
func TestChatStreamUsageChunk(t *testing.T) {
	for _, include := range []bool{true, false} {
		s, c := startRoutes(t, Options{})
		body := streamBody(PathChat, include)
		evs, err := readStream(t, openStream(t, c, s, PathChat, body))
		if err != nil {
			t.Fatal(err)
		}
		want := 1 + DefaultStreamEvents + 1 + 1 // role, deltas, finish, [DONE]
		if include {
			want++
		}
		if len(evs) != want {
			t.Fatalf("include_usage %v: %d events, want %d", include, len(evs), want)
		}
		if !sse.IsDone(evs[len(evs)-1]) {
			t.Errorf("last event = %q, want data: [DONE]", evs[len(evs)-1].Raw)
		}
		var text strings.Builder
		for i, ev := range evs[:len(evs)-1] {
			var m map[string]json.RawMessage
			decodeStrict(t, ev.Data, &m)
			u, hasUsage := m["usage"]
			var ch chatChunk
			decodeStrict(t, ev.Data, &ch)
			if ch.Object != "chat.completion.chunk" || !strings.HasPrefix(ch.ID, "chatcmpl-") || ch.Model != chatModel || ch.Created == 0 {
				t.Errorf("event %d head: %s", i, ev.Data)
			}
			isUsageChunk := include && i == len(evs)-2
			switch {
			case isUsageChunk:
				var cu chatUsage
				decodeStrict(t, u, &cu)
				if len(ch.Choices) != 0 || string(m["choices"]) != "[]" || cu.route() != ExpectedRouteUsage([]byte(body), DefaultStreamEvents) {
					t.Errorf("usage chunk = %s", ev.Data)
				}
			case include && (!hasUsage || string(u) != "null"):
				t.Errorf("event %d: usage = %s, want null", i, u)
			case !include && hasUsage:
				t.Errorf("event %d has usage without include_usage: %s", i, ev.Data)
			}
			if len(ch.Choices) == 1 {
				text.WriteString(ch.Choices[0].Delta.Content)
				if i == 0 && ch.Choices[0].Delta.Role != "assistant" {
					t.Errorf("first chunk role = %q", ch.Choices[0].Delta.Role)
				}
			}
		}
		if text.String() != "Hello from the" {
			t.Errorf("streamed text = %q", text.String())
		}
	}
}

func TestResponsesStream(t *testing.T) {
	s, c := startRoutes(t, Options{})
	body := streamBody(PathResponses, false)
	evs, err := readStream(t, openStream(t, c, s, PathResponses, body))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var text strings.Builder
	for i, ev := range evs {
		names = append(names, ev.Name)
		var e struct {
			Type  string `json:"type"`
			Seq   *int   `json:"sequence_number"`
			Delta string `json:"delta"`
		}
		decodeStrict(t, ev.Data, &e)
		if e.Type != ev.Name || e.Seq == nil || *e.Seq != i {
			t.Errorf("event %d: name %q, data %s", i, ev.Name, ev.Data)
		}
		text.WriteString(e.Delta)
	}
	wantNames := "response.created response.in_progress response.output_item.added response.content_part.added " +
		"response.output_text.delta response.output_text.delta response.output_text.delta " +
		"response.output_text.done response.content_part.done response.output_item.done response.completed"
	if strings.Join(names, " ") != wantNames {
		t.Errorf("events = %v", names)
	}
	if text.String() != "Hello from the" {
		t.Errorf("deltas = %q", text.String())
	}
	typ, u, ok := sse.ResponsesUsage(evs[len(evs)-1])
	var ru respUsage
	decodeStrict(t, u, &ru)
	if typ != sse.ResponseCompleted || !ok || ru.route() != ExpectedRouteUsage([]byte(body), DefaultStreamEvents) {
		t.Errorf("completed usage = %q %s %v", typ, u, ok)
	}
	if _, u, _ := sse.ResponsesUsage(evs[0]); u != nil {
		t.Errorf("response.created has usage %s, want null", u)
	}
}

// TestStreamRateLimitedBeforeStream: a 429 with Retry-After instead of the
// stream, before any event.
func TestStreamRateLimitedBeforeStream(t *testing.T) {
	s, c := startRoutes(t, Options{})
	s.Script(keyA, chatModel, RateLimited("7"))
	resp, b := post(t, c, s, PathChat, streamBody(PathChat, true))
	_, _, code, _ := parseError(t, b)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "7" || code != "rate_limit_exceeded" {
		t.Errorf("got %d Retry-After %q code %q", resp.StatusCode, resp.Header.Get("Retry-After"), code)
	}
	if evs, err := readStream(t, openStream(t, c, s, PathChat, streamBody(PathChat, true))); err != nil || !sse.IsDone(evs[len(evs)-1]) {
		t.Errorf("after the script: %d events, %v", len(evs), err)
	}
}

// TestStreamCutAfterEvents: the connection closes after N events, without
// data: [DONE] or response.completed.
func TestStreamCutAfterEvents(t *testing.T) {
	for _, path := range []string{PathChat, PathResponses} {
		s, c := startRoutes(t, Options{})
		s.Script(keyA, chatModel, StreamCut(2))
		evs, err := readStream(t, openStream(t, c, s, path, streamBody(path, true)))
		if !errors.Is(err, io.ErrUnexpectedEOF) || len(evs) != 2 {
			t.Errorf("%s: %d events, %v; want 2 and the body cut", path, len(evs), err)
		}
		reqs := s.RequestsFor(keyA, path)
		if len(reqs) != 1 || reqs[0].Status != 200 || reqs[0].Step != "Streamed(0, cut after 2)" || reqs[0].Canceled {
			t.Errorf("%s: recorded %+v", path, reqs)
		}
	}
}

// TestStreamStallAfterEvents: N events, then silence until the client goes
// away, which the fake records as a cancellation.
func TestStreamStallAfterEvents(t *testing.T) {
	s, c := startRoutes(t, Options{})
	s.Script(keyA, chatModel, StreamStall(3))
	ctx, cancel := context.WithCancel(waitCtx(t))
	defer cancel()
	resp, err := c.Do(newRequest(t, ctx, http.MethodPost, s.URL()+PathChat, keyA, []byte(streamBody(PathChat, false))))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := sse.NewScanner(resp.Body)
	for i := range 3 {
		if _, err := sc.Next(); err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
	}
	cancel()
	r, err := s.WaitCanceled(waitCtx(t))
	if err != nil || r.Path != PathChat || r.Status != 200 {
		t.Errorf("WaitCanceled = %+v, %v", r, err)
	}
}

// TestStreamEventCount: Options.StreamEvents and StreamEvents set the number
// of deltas, which usage counts as output tokens.
func TestStreamEventCount(t *testing.T) {
	s, c := startRoutes(t, Options{StreamEvents: 7})
	s.Script(keyA, chatModel, StreamEvents(200))
	for _, n := range []int{200, 7} {
		body := streamBody(PathChat, true)
		evs, err := readStream(t, openStream(t, c, s, PathChat, body))
		if err != nil || len(evs) != n+4 {
			t.Fatalf("%d events, %v; want %d", len(evs), err, n+4)
		}
		var ch struct {
			Usage chatUsage `json:"usage"`
		}
		decodeStrict(t, evs[len(evs)-2].Data, &ch)
		if ch.Usage.route() != ExpectedRouteUsage([]byte(body), n) {
			t.Errorf("usage = %+v, want %d output tokens", ch.Usage.route(), n)
		}
	}
}

// TestStreamKeepAliveComments: an SSE comment before every event.
func TestStreamKeepAliveComments(t *testing.T) {
	s, c := startRoutes(t, Options{})
	s.Script(keyA, chatModel, Streamed(Stream{KeepAlive: true}))
	evs, err := readStream(t, openStream(t, c, s, PathChat, streamBody(PathChat, false)))
	if err != nil {
		t.Fatal(err)
	}
	var comments, events int
	for _, ev := range evs {
		if ev.Kind == sse.KindComment {
			comments++
		} else {
			events++
		}
	}
	if events != DefaultStreamEvents+3 || comments != 2*events || string(evs[0].Raw) != ": keep-alive\n" {
		t.Errorf("%d events, %d comment lines; first %q", events, comments, evs[0].Raw)
	}
}

// TestStreamEventOverCap: a delta of 17 MiB makes one event larger than
// the 16 MiB an SSE reader accepts; the rest of the stream is intact.
func TestStreamEventOverCap(t *testing.T) {
	if testing.Short() {
		t.Skip("17 MiB transfer")
	}
	s, c := startRoutes(t, Options{})
	s.Script(keyA, chatModel, Streamed(Stream{Events: 1, DeltaSize: 17 << 20}))
	resp := openStream(t, c, s, PathChat, streamBody(PathChat, false))
	sc := sse.NewScanner(resp.Body)
	if _, err := sc.Next(); err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Next(); !errors.Is(err, sse.ErrEventTooLarge) {
		t.Fatalf("second event: %v, want ErrEventTooLarge", err)
	}
	// Read as plain JSON lines, the same stream is valid.
	s.Script(keyA, chatModel, Streamed(Stream{Events: 2, DeltaSize: 100 << 10}))
	evs, err := readStream(t, openStream(t, c, s, PathChat, streamBody(PathChat, false)))
	if err != nil || len(evs) != 5 {
		t.Fatalf("%d events, %v", len(evs), err)
	}
	var ch chatChunk
	decodeStrict(t, evs[1].Data, &ch)
	if len(ch.Choices[0].Delta.Content) != 100<<10 {
		t.Errorf("padded delta is %d bytes", len(ch.Choices[0].Delta.Content))
	}
}

// TestHugeAnswerRoutes: HugeAnswer pads each route's own answer, valid
// JSON of the exact size.
func TestHugeAnswerRoutes(t *testing.T) {
	s, c := startRoutes(t, Options{})
	for _, tt := range []struct{ path, body string }{{PathChat, chatBody}, {PathResponses, respBody}, {PathEmbeddings, embedBody}, {PathChat, streamBody(PathChat, true)}} {
		const size = 200 << 10
		s.Script(keyA, "", HugeAnswer(size))
		resp, b := post(t, c, s, tt.path, tt.body)
		if resp.StatusCode != 200 || len(b) != size || !json.Valid(b) {
			t.Errorf("%s: status %d, %d bytes, valid JSON %v", tt.path, resp.StatusCode, len(b), json.Valid(b))
		}
		var u struct {
			Usage map[string]any `json:"usage"`
		}
		decodeStrict(t, b, &u)
		if len(u.Usage) == 0 {
			t.Errorf("%s: no usage in %.200s", tt.path, b)
		}
	}
}

// TestRouteRecording: the fake records each route's request body, headers
// and model, so tests can check what rotor forwarded.
func TestRouteRecording(t *testing.T) {
	s, c := startRoutes(t, Options{})
	req := newRequest(t, waitCtx(t), http.MethodPost, s.URL()+PathChat, keyA, []byte(streamBody(PathChat, true)))
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("OpenAI-Beta", "assistants=v2")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	post(t, c, s, PathEmbeddings, embedBody)
	got := s.Requests()
	if len(got) != 2 {
		t.Fatalf("%d requests recorded", len(got))
	}
	r := got[0]
	if r.Path != PathChat || r.Key != keyA || r.Model != chatModel || string(r.Body) != streamBody(PathChat, true) ||
		r.Header.Get("Accept") != "text/event-stream" || r.Header.Get("OpenAI-Beta") != "assistants=v2" || r.Status != 200 || r.Step != "OK" {
		t.Errorf("chat record = %+v", r)
	}
	if got[1].Model != embedModel || s.HitsFor(keyA, PathEmbeddings) != 1 {
		t.Errorf("embeddings record = %+v", got[1])
	}
}

// TestRouteQuota: a quota counts streamed and non-streamed successes and
// refuses beyond it before any event.
func TestRouteQuota(t *testing.T) {
	s, c := startRoutes(t, Options{Now: (&testClock{now: time.Unix(1_700_000_000, 0)}).Now})
	s.SetQuota(keyA, "", Quota{Requests: 2, Window: time.Minute, SendRetryAfter: true})
	post(t, c, s, PathChat, chatBody)
	readStream(t, openStream(t, c, s, PathResponses, streamBody(PathResponses, false)))
	resp, b := post(t, c, s, PathChat, streamBody(PathChat, true))
	if _, _, code, _ := parseError(t, b); resp.StatusCode != 429 || code != "rate_limit_exceeded" || resp.Header.Get("Retry-After") == "" {
		t.Errorf("third request: %d %q Retry-After %q", resp.StatusCode, code, resp.Header.Get("Retry-After"))
	}
}

// TestStreamOver64MiB: a stream may carry more than 64 MiB in events under
// the 16 MiB event cap, and a non-streamed answer may exceed 64 MiB, on the
// OpenAI routes too.
func TestStreamOver64MiB(t *testing.T) {
	if testing.Short() {
		t.Skip("150 MiB transfer")
	}
	s, c := startRoutes(t, Options{})
	s.Script(keyA, chatModel, Streamed(Stream{Events: 5, DeltaSize: 15 << 20}))
	sc := sse.NewScanner(openStream(t, c, s, PathChat, streamBody(PathChat, false)).Body)
	var total, events int
	var last sse.Event
	for {
		ev, err := sc.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d events, %d bytes: %v", events, total, err)
		}
		total += len(ev.Raw)
		events++
		last = ev
	}
	if total <= 64<<20 || events != 5+3 || !sse.IsDone(last) {
		t.Errorf("stream: %d events, %d bytes, last %q", events, total, last.Raw)
	}

	const size = 64<<20 + 1
	s.Script(keyA, chatModel, HugeAnswer(size))
	resp, err := c.Do(newRequest(t, waitCtx(t), http.MethodPost, s.URL()+PathChat, keyA, []byte(chatBody)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if n, err := io.Copy(io.Discard, resp.Body); err != nil || n != size || resp.ContentLength != size {
		t.Errorf("HugeAnswer on chat: %d bytes (Content-Length %d), %v; want %d", n, resp.ContentLength, err, size)
	}
}

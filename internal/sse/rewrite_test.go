package sse

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"
)

// A chat stream as OpenAI sends it with stream_options.include_usage.
const (
	chunkRole  = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":null}` + "\n\n"
	chunkText  = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":null}],"usage":null}` + "\n\n"
	chunkStop  = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}` + "\n\n"
	usageJSON  = `{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11,"prompt_tokens_details":{"cached_tokens":4},"completion_tokens_details":{"reasoning_tokens":1}}`
	chunkUsage = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"gpt-4o-mini","choices":[],"usage":` + usageJSON + "}\n\n"
	done       = "data: [DONE]\n\n"
)

// rewrite runs a stream through a ChatRewriter and returns what the caller
// sees and the usage.
func rewrite(t testing.TB, in string, injected bool) (string, string, bool) {
	t.Helper()
	s := NewScanner(strings.NewReader(in))
	r := NewChatRewriter(injected)
	var out strings.Builder
	for {
		ev, err := s.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if r.Pass(ev) {
			out.Write(ev.Raw)
		}
	}
	return out.String(), string(r.Usage()), r.Done()
}

func TestChatRewriter(t *testing.T) {
	full := chunkRole + chunkText + ": keep-alive\n\n" + chunkStop + chunkUsage + done
	without := chunkRole + chunkText + ": keep-alive\n\n" + chunkStop + done
	tests := []struct {
		name      string
		in        string
		injected  bool
		wantOut   string
		wantUsage string
		wantDone  bool
	}{
		{"injected: the usage chunk is dropped, the rest byte for byte", full, true, without, usageJSON, true},
		{"caller asked: nothing dropped", full, false, full, usageJSON, true},
		{"no include_usage: nothing to drop", without, true, without, "", true},
		{"cut before the usage chunk", chunkRole + chunkText, true, chunkRole + chunkText, "", false},
		{"crlf endings", strings.ReplaceAll(full, "\n", "\r\n"), true, strings.ReplaceAll(without, "\n", "\r\n"), usageJSON, true},
		{"usage null with empty choices stays", `data: {"choices":[],"usage":null}` + "\n\n", true, `data: {"choices":[],"usage":null}` + "\n\n", "", false},
		{"usage beside non-empty choices stays and counts", `data: {"choices":[{"index":0}],"usage":{"total_tokens":1}}` + "\n\n", true, `data: {"choices":[{"index":0}],"usage":{"total_tokens":1}}` + "\n\n", `{"total_tokens":1}`, false},
		{"usage without choices stays and counts", `data: {"usage":{"total_tokens":1}}` + "\n\n", true, `data: {"usage":{"total_tokens":1}}` + "\n\n", `{"total_tokens":1}`, false},
		{"nested usage is not the chunk's", `data: {"choices":[],"x":{"usage":{"total_tokens":1}}}` + "\n\n", true, `data: {"choices":[],"x":{"usage":{"total_tokens":1}}}` + "\n\n", "", false},
		{"usage in content text", chunkText[:len(chunkText)-2] + "\n\n" + `data: {"choices":[{"delta":{"content":"\"choices\":[],\"usage\":{}"}}],"usage":null}` + "\n\n", true,
			chunkText[:len(chunkText)-2] + "\n\n" + `data: {"choices":[{"delta":{"content":"\"choices\":[],\"usage\":{}"}}],"usage":null}` + "\n\n", "", false},
		{"spaces in the usage chunk", "data: { \"choices\" : [ ] , \"usage\" : {\"total_tokens\":1} }\n\n", true, "", `{"total_tokens":1}`, false},
		{"invalid JSON is not dropped", `data: {"choices":[],"usage":{"total_tokens":1}` + "\n\n", true, `data: {"choices":[],"usage":{"total_tokens":1}` + "\n\n", "", false},
		{"invalid usage value is not dropped", `data: {"choices":[],"usage":{"total_tokens":1,}}` + "\n\n", true, `data: {"choices":[],"usage":{"total_tokens":1,}}` + "\n\n", "", false},
		{"invalid number is not dropped", `data: {"choices":[],"usage":{"total_tokens":01}}` + "\n\n", true, `data: {"choices":[],"usage":{"total_tokens":01}}` + "\n\n", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, usage, isDone := rewrite(t, tt.in, tt.injected)
			if out != tt.wantOut {
				t.Errorf("caller sees\n%q\nwant\n%q", out, tt.wantOut)
			}
			if usage != tt.wantUsage {
				t.Errorf("Usage() = %s, want %s", usage, tt.wantUsage)
			}
			if isDone != tt.wantDone {
				t.Errorf("Done() = %v, want %v", isDone, tt.wantDone)
			}
		})
	}
}

// A terminal Responses event is read as providers send it (nested
// objects and arrays that end in strings, strings holding escaped quotes,
// braces and backslashes), refused when its JSON is invalid anywhere (as
// the chat rewriter refuses one), and taken by its event name when its
// data is an empty object.
func TestResponsesUsage(t *testing.T) {
	u := `{"input_tokens":9,"input_tokens_details":{"cached_tokens":0},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":12}`
	const u2 = `{"input_tokens":9,"output_tokens":3,"total_tokens":12}`
	realEvent := `{"type":"response.completed","sequence_number":9,"response":{"id":"resp_1","object":"response","status":"completed",` +
		`"instructions":"say \"{hi}\" \\ then [stop]","output":[{"id":"msg_1","type":"message","status":"completed",` +
		`"content":[{"type":"output_text","text":"He said \"}]\" and left","annotations":[]}],"role":"assistant"}],"usage":` + u2 + `,"user":null}}`
	tests := []struct {
		name      string
		in        string
		wantType  string
		wantUsage string
		wantOK    bool
	}{
		{"completed", "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":5,\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"usage\":" + u + "}}\n\n", ResponseCompleted, u, true},
		{"incomplete", "event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"usage\":" + u + "}}\n\n", ResponseIncomplete, u, true},
		{"failed without usage", "event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"usage\":null}}\n\n", ResponseFailed, "", true},
		{"type from the event name", "event: response.completed\ndata: {\"response\":{\"usage\":" + u + "}}\n\n", ResponseCompleted, u, true},
		{"escaped type", "data: {\"type\":\"response\\u002ecompleted\",\"response\":{\"usage\":" + u + "}}\n\n", ResponseCompleted, u, true},
		{"delta", "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\"}\n\n", "", "", false},
		{"created", "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"usage\":null}}\n\n", "", "", false},
		{"data type wins over the name", "event: response.completed\ndata: {\"type\":\"response.in_progress\",\"response\":{}}\n\n", "", "", false},
		{"invalid JSON", "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\n\n", "", "", false},
		{"comment", ": response.completed\n", "", "", false},
		{"a full response.completed", "event: response.completed\ndata: " + realEvent + "\n\n", ResponseCompleted, u2, true},
		{"named by the event, data an empty object", "event: response.completed\ndata: {}\n\n", ResponseCompleted, "", true},
		{"invalid number inside the response", "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":{\"input_tokens\":01}}}\n\n", "", "", false},
		{"trailing comma inside the response", "event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"usage\":" + u2 + ",}}\n\n", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev, err := NewScanner(strings.NewReader(tt.in)).Next()
			if err != nil {
				t.Fatal(err)
			}
			typ, usage, ok := ResponsesUsage(ev)
			if typ != tt.wantType || string(usage) != tt.wantUsage || ok != tt.wantOK {
				t.Errorf("ResponsesUsage = %q, %s, %v; want %q, %s, %v", typ, usage, ok, tt.wantType, tt.wantUsage, tt.wantOK)
			}
		})
	}
}

// FuzzChatRewriter checks on any stream that the caller sees the stream
// minus exactly the events a JSON decoder calls usage-only chunks (top-level
// "choices" an empty array, "usage" not null) when rotor injected
// include_usage, the whole stream otherwise, and that Usage is the last
// non-null top-level usage of any chunk (some providers put it beside the
// last chunk's choices).
func FuzzChatRewriter(f *testing.F) {
	f.Add([]byte(chunkRole+chunkText+chunkStop+chunkUsage+done), true)
	f.Add([]byte(chunkRole+chunkUsage+done), false)
	f.Add([]byte(`data: {"choices":[],"usage":null}`+"\n\n"+`data: {"choices":[ ],"usage":{"a":1},"usage":null}`+"\n\n"), true)
	f.Add([]byte(`data: {"choices":[],"\u0075sage":{"total_tokens":1}}`+"\r\n\r\n: x\r\n"), true)
	f.Fuzz(func(t *testing.T, in []byte, injected bool) {
		s := NewScanner(bytes.NewReader(in))
		r := NewChatRewriter(injected)
		var out, want bytes.Buffer
		var wantUsage []byte
		for {
			ev, err := s.Next()
			if err != nil {
				break // the unfinished tail is not the rewriter's
			}
			keep := r.Pass(ev)
			if keep {
				out.Write(ev.Raw)
			}
			isUsage := false
			if ev.Kind == KindEvent && ev.Data != nil {
				var m map[string]json.RawMessage
				if json.Unmarshal(ev.Data, &m) == nil {
					var choices []json.RawMessage
					c, hasC := m["choices"]
					u, hasU := m["usage"]
					if hasU && string(u) != "null" {
						wantUsage = append([]byte(nil), u...)
						isUsage = hasC && json.Unmarshal(c, &choices) == nil && choices != nil && len(choices) == 0
					}
				}
			}
			if !isUsage || !injected {
				want.Write(ev.Raw)
			}
		}
		if !bytes.Equal(out.Bytes(), want.Bytes()) {
			t.Fatalf("caller sees\n%q\nwant\n%q", out.Bytes(), want.Bytes())
		}
		if got := r.Usage(); !bytes.Equal(compact(got), compact(wantUsage)) {
			t.Fatalf("Usage() = %s, want %s", got, wantUsage)
		}
	})
}

func compact(b []byte) []byte {
	if b == nil {
		return nil
	}
	var buf bytes.Buffer
	if json.Compact(&buf, b) != nil {
		return b
	}
	return buf.Bytes()
}

// TestNoAllocationsPerEvent: in a long stream, scanning an event and passing
// it through the chat rewriter, or reading a Responses event, allocates
// nothing; memory stays that of one event.
func TestNoAllocationsPerEvent(t *testing.T) {
	for _, tt := range []struct{ name, ev string }{
		{"chat", chunkText},
		{"responses", "event: response.output_text.delta\n" + `data: {"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":"word "}` + "\n\n"},
	} {
		s := NewScanner(repeat(tt.ev))
		r := NewChatRewriter(true)
		allocs := testing.AllocsPerRun(1000, func() {
			ev, err := s.Next()
			if err != nil {
				t.Fatal(err)
			}
			if !r.Pass(ev) {
				t.Fatal("a text chunk was dropped")
			}
			if _, _, ok := ResponsesUsage(ev); ok {
				t.Fatal("a delta read as terminal")
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per event, want 0", tt.name, allocs)
		}
	}
}

func TestUsageNotNull(t *testing.T) {
	for _, tt := range []struct {
		data string
		want bool
	}{
		{`{"choices":[],"usage":{"total_tokens":1}}`, true},
		{`{"choices":[{"index":0}],"usage" :` + "\n\t" + ` {"total_tokens":1}}`, true},
		{`{"choices":[{"index":0}],"usage":null}`, false},
		{`{"choices":[{"index":0}],"usage" : null}`, false},
		{`{"x":{"usage":null},"usage":{}}`, true},
		{`{"choices":[{"delta":{"content":"\"usage\":{}"}}],"usage":null}`, false},
		{`{"usage"}`, false},
		{`"usage"`, false},
		{`{"\u0075sage":{}}`, true},
		{``, false},
	} {
		if got := usageNotNull([]byte(tt.data)); got != tt.want {
			t.Errorf("usageNotNull(%q) = %v, want %v", tt.data, got, tt.want)
		}
	}
}

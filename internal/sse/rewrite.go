package sse

import (
	"bytes"
	"encoding/json"
)

// ChatRewriter follows a chat completion stream (POST /v1/chat/completions
// with "stream": true) event by event: it decides which events reach the
// caller and remembers the usage the provider reported.
//
// With stream_options.include_usage the provider adds "usage": null to
// every chunk and, before data: [DONE], one final chunk with "choices": []
// and a non-null usage. When rotor injected include_usage on the caller's
// behalf (NewChatRewriter(true)), that final chunk is dropped: the caller
// did not ask for it. Every other event passes byte for byte, the
// "usage": null members included. When the caller asked for include_usage
// itself (NewChatRewriter(false)), nothing is dropped. Either way Usage
// returns the usage object seen.
type ChatRewriter struct {
	drop  bool
	usage []byte
	done  bool
}

// NewChatRewriter returns a rewriter; injected says whether rotor added
// include_usage, so that the usage-only chunk must not reach the caller.
func NewChatRewriter(injected bool) *ChatRewriter { return &ChatRewriter{drop: injected} }

// Pass records what ev says and reports whether it goes to the caller.
// Comments, unparseable events and events without data always pass.
func (r *ChatRewriter) Pass(ev Event) bool {
	if ev.Kind != KindEvent || ev.Data == nil {
		return true
	}
	if IsDone(ev) {
		r.done = true
		return true
	}
	u, usageOnly, ok := chatUsage(ev.Data)
	if !ok {
		return true
	}
	// The usage counts wherever the provider put it (some servers put it
	// on the last content chunk, beside its choices); only the usage-only
	// chunk is dropped.
	r.usage = append(r.usage[:0], u...)
	return !r.drop || !usageOnly
}

// Usage returns the raw JSON of the latest non-null usage object seen (the
// usage-only chunk's, or one a provider put beside a chunk's choices), or
// nil when none was seen. The slice stays valid; the caller must not
// change it.
func (r *ChatRewriter) Usage() []byte { return r.usage }

// Done reports whether data: [DONE] was seen.
func (r *ChatRewriter) Done() bool { return r.done }

// IsDone reports whether ev is a chat stream's terminal data: [DONE].
func IsDone(ev Event) bool {
	return ev.Kind == KindEvent && string(ev.Data) == "[DONE]"
}

// chatUsage returns the top-level "usage" of a chat.completion.chunk
// when it is not null (keys matched exactly, the last of duplicates
// winning, as for a JSON object decoded into a map), and whether the
// chunk is the usage-only one: its top-level "choices" an empty array.
func chatUsage(data []byte) (usage []byte, usageOnly, ok bool) {
	// With include_usage every chunk carries "usage": null; a chunk whose
	// every "usage" in its bytes is followed by null has none, and the walk
	// over its members is skipped.
	if !usageNotNull(data) {
		return nil, false, false
	}
	var choices []byte
	if !members(data, func(key, value []byte) bool {
		switch string(key) {
		case "choices":
			choices = value
		case "usage":
			usage = value
		}
		return true
	}) {
		return nil, false, false
	}
	if usage == nil || isNull(usage) || !json.Valid(data) {
		return nil, false, false
	}
	return usage, isEmptyArray(choices), true
}

var (
	usageKey = []byte(`usage"`)
	jsonNull = []byte("null")
	// unicodeEscape starts a \uXXXX escape.
	unicodeEscape = []byte(`\u`)
)

// jsonSpace is JSON's white space.
const jsonSpace = " \t\r\n"

// usageNotNull reports whether data holds "usage" followed by a colon and
// a value other than null, or any \u escape: a cheap test that a chunk
// may carry usage.
func usageNotNull(data []byte) bool {
	if bytes.Contains(data, unicodeEscape) {
		return true // a key may be spelled with escapes ("\u0075sage")
	}
	for rest := data; ; {
		// Searched without its opening quote: JSON is full of quotes, and
		// a search led by one is several times slower.
		i := bytes.Index(rest, usageKey)
		if i < 0 {
			return false
		}
		quoted := i > 0 && rest[i-1] == '"'
		rest = bytes.TrimLeft(rest[i+len(usageKey):], jsonSpace)
		if quoted && len(rest) > 0 && rest[0] == ':' {
			if !bytes.HasPrefix(bytes.TrimLeft(rest[1:], jsonSpace), jsonNull) {
				return true
			}
		}
	}
}

// Terminal event types of a Responses stream, whose response object
// carries the usage.
const (
	ResponseCompleted  = "response.completed"
	ResponseIncomplete = "response.incomplete"
	ResponseFailed     = "response.failed"
)

// ResponsesUsage reads a Responses stream event. For a terminal event
// (response.completed, response.incomplete or response.failed, by its
// data's "type", or by its event name when the data has no type) it returns
// the type, the raw JSON of response.usage (nil when absent or null) and
// ok; for any other event ok is false. usage aliases ev's bytes: copy it to
// keep it past the next Scanner.Next.
func ResponsesUsage(ev Event) (typ string, usage []byte, ok bool) {
	if ev.Kind != KindEvent || ev.Data == nil {
		return "", nil, false
	}
	var t, resp []byte
	if !members(ev.Data, func(key, value []byte) bool {
		switch string(key) {
		case "type":
			t = value
		case "response":
			resp = value
		}
		return true
	}) {
		return "", nil, false
	}
	name := ev.Name
	if t != nil {
		if bytes.IndexByte(t, '\\') >= 0 { // escaped: rare, decode it
			var unescaped string
			if json.Unmarshal(t, &unescaped) != nil {
				return "", nil, false
			}
			name = unescaped
		} else if len(t) >= 2 && t[0] == '"' && t[len(t)-1] == '"' {
			t = t[1 : len(t)-1]
			switch string(t) { // no allocation
			case ResponseCompleted, ResponseIncomplete, ResponseFailed:
				name = string(t)
			default:
				return "", nil, false
			}
		} else {
			return "", nil, false
		}
	}
	switch name {
	case ResponseCompleted, ResponseIncomplete, ResponseFailed:
		typ = name
	default:
		return "", nil, false
	}
	if !json.Valid(ev.Data) {
		return "", nil, false
	}
	if resp != nil {
		members(resp, func(key, value []byte) bool {
			if string(key) == "usage" {
				usage = value
			}
			return true
		})
	}
	if isNull(usage) {
		usage = nil
	}
	return typ, usage, true
}

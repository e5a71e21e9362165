// Package jsonobj reads and rewrites the top-level members of a JSON
// object in place, without decoding what it does not need: the model of a
// request (found, checked, and replaced with every other byte unchanged)
// and the token usage of a provider's answer.
//
// It imports no other rotor package: go test -fuzz instruments every
// package the fuzzed one imports, and its fuzz tests build without SQLite.
package jsonobj

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrBadJSON is a request body that is not a JSON object.
var ErrBadJSON = errors.New("request body is not a valid JSON object")

// Span is a value's byte range in a JSON document.
type Span struct{ Start, End int }

// TopLevel walks the members of a JSON object that json.Valid accepted and
// calls fn with each key (decoded) and its value's span. Only keys are
// decoded; values are skipped over, so the cost is one pass without
// allocation for bodies that need no rewrite.
func TopLevel(b []byte, fn func(key string, rawKey []byte, v Span) bool) error {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return ErrBadJSON
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for i < len(b) {
		if b[i] != '"' {
			return ErrBadJSON
		}
		kEnd := skipString(b, i)
		rawKey := b[i:kEnd]
		key, ok := Unquote(rawKey)
		if !ok {
			return ErrBadJSON
		}
		i = skipWS(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return ErrBadJSON
		}
		vStart := skipWS(b, i+1)
		vEnd := skipValue(b, vStart)
		if vEnd <= vStart {
			return ErrBadJSON
		}
		if !fn(key, rawKey, Span{vStart, vEnd}) {
			return nil
		}
		i = skipWS(b, vEnd)
		if i < len(b) && b[i] == ',' {
			i = skipWS(b, i+1)
			continue
		}
		if i < len(b) && b[i] == '}' {
			return nil
		}
		return ErrBadJSON
	}
	return ErrBadJSON
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index after the string starting at b[i] == '"'.
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// skipValue returns the index after the value starting at i.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = skipString(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	default:
		j := i
		for j < len(b) {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j
			}
			j++
		}
		return j
	}
}

// Unquote decodes a JSON string token, fast when it has no escapes.
func Unquote(tok []byte) (string, bool) {
	if len(tok) < 2 || tok[0] != '"' || tok[len(tok)-1] != '"' {
		return "", false
	}
	inner := tok[1 : len(tok)-1]
	if bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner) {
		return string(inner), true
	}
	var s string
	if err := json.Unmarshal(tok, &s); err != nil {
		return "", false
	}
	return s, true
}

// Member is the raw value of a top-level member of a JSON object (the
// last one, as encoding/json reads duplicates).
func Member(body []byte, name string) ([]byte, bool) {
	var out []byte
	_ = TopLevel(body, func(key string, _ []byte, v Span) bool {
		if key == name {
			out = body[v.Start:v.End]
		}
		return true
	})
	return out, out != nil
}

// Request is what rotor reads of a Decisions request: the model and where
// it is, and nothing else.
type Request struct {
	// Body is the body as the caller sent it.
	Body []byte
	// Model is the model asked for, decoded.
	Model string
	// at is where the model's value is in Body.
	at Span
}

// ParseRequest validates the body as a JSON object and finds its model.
// A second key that a lenient decoder might also read as "model" (a
// duplicate or a case variant) is refused: rotor and the provider must
// agree on which model is asked for.
func ParseRequest(body []byte) (Request, error) {
	if !json.Valid(body) {
		return Request{}, ErrBadJSON
	}
	r := Request{Body: body, at: Span{-1, -1}}
	var dup bool
	err := TopLevel(body, func(key string, _ []byte, v Span) bool {
		if !strings.EqualFold(key, "model") {
			return true
		}
		if r.at.Start >= 0 || key != "model" {
			dup = true
			return false
		}
		r.at = v
		return true
	})
	if err != nil {
		return Request{}, err
	}
	if dup {
		return Request{}, ErrDuplicateModel
	}
	if r.at.Start < 0 {
		return Request{}, ErrNoModel
	}
	m, ok := Unquote(body[r.at.Start:r.at.End])
	if !ok {
		return Request{}, ErrModelNotString
	}
	r.Model = m
	return r, nil
}

var (
	ErrDuplicateModel = errors.New(`request has more than one "model" field`)
	ErrNoModel        = errors.New(`request has no "model" field`)
	ErrModelNotString = errors.New(`"model" must be a string`)
)

// WithModel returns the body with the model value replaced by upstream and
// every other byte unchanged.
func (r Request) WithModel(upstream string) []byte {
	q := strconv.Quote(upstream)
	if !isPlainJSONString(upstream) {
		b, _ := json.Marshal(upstream)
		q = string(b)
	}
	out := make([]byte, 0, len(r.Body)-(r.at.End-r.at.Start)+len(q))
	out = append(out, r.Body[:r.at.Start]...)
	out = append(out, q...)
	return append(out, r.Body[r.at.End:]...)
}

// isPlainJSONString reports whether strconv.Quote yields valid JSON for s:
// printable ASCII without characters Quote would escape differently.
func isPlainJSONString(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// Usage is the provider's token counts; a nil field is unknown.
type Usage struct {
	Input, Output, Total *int64
	// Cached is the input served from the provider's cache; Reasoning
	// the output spent on reasoning (OpenAI routes only).
	Cached, Reasoning *int64
}

// usageNames are the member names one route's usage object uses.
type usageNames struct {
	input, output string
	// inputDetails and outputDetails hold cached_tokens and
	// reasoning_tokens; empty when the route has none.
	inputDetails, outputDetails string
}

// The usage objects of the routes: decisionsUsage is the Decisions API's;
// responsesUsage and chatUsage are those of the OpenAI Responses and chat
// (and embeddings) answers.
var (
	decisionsUsage = usageNames{input: "input_tokens", output: "output_tokens"}
	responsesUsage = usageNames{input: "input_tokens", output: "output_tokens", inputDetails: "input_tokens_details", outputDetails: "output_tokens_details"}
	chatUsage      = usageNames{input: "prompt_tokens", output: "completion_tokens", inputDetails: "prompt_tokens_details", outputDetails: "completion_tokens_details"}
)

// ReadUsage reads a Decisions answer's usage.
func ReadUsage(body []byte) Usage { return decisionsUsage.read(topUsage(body)) }

// ReadResponsesUsage reads a Responses answer's usage.
func ReadResponsesUsage(body []byte) Usage { return responsesUsage.read(topUsage(body)) }

// ResponsesUsageObject reads a Responses usage object itself (a stream's
// terminal event carries one).
func ResponsesUsageObject(obj []byte) Usage { return responsesUsage.read(obj) }

// ReadChatUsage reads a chat completion's usage.
func ReadChatUsage(body []byte) Usage { return chatUsage.read(topUsage(body)) }

// ChatUsageObject reads a chat usage object itself (a stream's final
// chunk carries one).
func ChatUsageObject(obj []byte) Usage { return chatUsage.read(obj) }

// ReadEmbeddingsUsage reads an embeddings answer's usage: prompt_tokens and
// total_tokens in chat's names. An embedding generates nothing, so output
// is a known 0 once the input is known: else every embeddings row would
// hold unknown tokens and cost, and close every cost budget. The total,
// when the answer leaves it out, is then the input, as read derives it
// for the other routes: else no tokens budget would count the row.
func ReadEmbeddingsUsage(body []byte) Usage {
	u := chatUsage.read(topUsage(body))
	if u.Input != nil && u.Output == nil {
		zero := int64(0)
		u.Output = &zero
		if u.Total == nil || *u.Total < *u.Input {
			t := *u.Input
			u.Total = &t
		}
	}
	return u
}

// topUsage is the answer's top-level usage object, the rest of the answer
// untouched and undecoded. The answer is not validated first: a malformed
// one yields no usage.
func topUsage(body []byte) []byte {
	raw, _ := Member(body, "usage")
	return raw
}

// read reads the token counts of a usage object.
func (n usageNames) read(raw []byte) Usage {
	var u Usage
	if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
		return u
	}
	_ = TopLevel(raw, func(key string, _ []byte, v Span) bool {
		var p **int64
		switch key {
		case n.input:
			p = &u.Input
		case n.output:
			p = &u.Output
		case "total_tokens":
			p = &u.Total
		case "":
			return true
		case n.inputDetails:
			u.Cached = detail(raw[v.Start:v.End], "cached_tokens")
			return true
		case n.outputDetails:
			u.Reasoning = detail(raw[v.Start:v.End], "reasoning_tokens")
			return true
		default:
			return true
		}
		*p = nil
		if n, ok := parseCount(raw[v.Start:v.End]); ok {
			*p = &n
		}
		return true
	})
	if u.Input != nil && u.Output != nil && (u.Total == nil || *u.Total < *u.Input+*u.Output) {
		// Missing, unreadable or below its parts (a total_tokens of 0
		// beside real counts would make every tokens budget count
		// nothing): the sum of the parts.
		t := *u.Input + *u.Output
		u.Total = &t
	}
	return u
}

// detail reads one count of a *_details object; nil when absent.
func detail(obj []byte, name string) *int64 {
	raw, _ := Member(obj, name)
	if n, ok := parseCount(raw); ok {
		return &n
	}
	return nil
}

// parseCount reads a nonnegative JSON integer without allocating.
func parseCount(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

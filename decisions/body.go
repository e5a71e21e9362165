package decisions

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"unicode/utf8"
)

// errBadJSON is a request body that is not a JSON object.
var errBadJSON = errors.New("request body is not a valid JSON object")

// span is a value's byte range in a JSON document.
type span struct{ start, end int }

// topLevel walks the members of a JSON object that json.Valid accepted and
// calls fn with each key (decoded) and its value's span. Only keys are
// decoded; values are skipped over, so the cost is one pass without
// allocation for bodies that need no rewrite.
func topLevel(b []byte, fn func(key string, rawKey []byte, v span) bool) error {
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errBadJSON
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for i < len(b) {
		if b[i] != '"' {
			return errBadJSON
		}
		kEnd := skipString(b, i)
		rawKey := b[i:kEnd]
		key, ok := unquote(rawKey)
		if !ok {
			return errBadJSON
		}
		i = skipWS(b, kEnd)
		if i >= len(b) || b[i] != ':' {
			return errBadJSON
		}
		vStart := skipWS(b, i+1)
		vEnd := skipValue(b, vStart)
		if vEnd <= vStart {
			return errBadJSON
		}
		if !fn(key, rawKey, span{vStart, vEnd}) {
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
		return errBadJSON
	}
	return errBadJSON
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

// unquote decodes a JSON string token, fast when it has no escapes.
func unquote(tok []byte) (string, bool) {
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

// request is what rotor reads of a Decisions request: the model and where
// it is, and nothing else.
type request struct {
	body  []byte
	model string
	span  span
}

// parseRequest validates the body as a JSON object and finds its model.
// A second key that a lenient decoder might also read as "model" (a
// duplicate or a case variant) is refused: rotor and the provider must
// agree on which model is asked for.
func parseRequest(body []byte) (request, error) {
	if !json.Valid(body) {
		return request{}, errBadJSON
	}
	r := request{body: body, span: span{-1, -1}}
	var dup bool
	err := topLevel(body, func(key string, _ []byte, v span) bool {
		if !strings.EqualFold(key, "model") {
			return true
		}
		if r.span.start >= 0 || key != "model" {
			dup = true
			return false
		}
		r.span = v
		return true
	})
	if err != nil {
		return request{}, err
	}
	if dup {
		return request{}, errDuplicateModel
	}
	if r.span.start < 0 {
		return request{}, errNoModel
	}
	m, ok := unquote(body[r.span.start:r.span.end])
	if !ok {
		return request{}, errModelNotString
	}
	r.model = m
	return r, nil
}

var (
	errDuplicateModel = errors.New(`request has more than one "model" field`)
	errNoModel        = errors.New(`request has no "model" field`)
	errModelNotString = errors.New(`"model" must be a string`)
)

// withModel returns the body with the model value replaced by upstream and
// every other byte unchanged.
func (r request) withModel(upstream string) []byte {
	q := strconv.Quote(upstream)
	if !isPlainJSONString(upstream) {
		b, _ := json.Marshal(upstream)
		q = string(b)
	}
	out := make([]byte, 0, len(r.body)-(r.span.end-r.span.start)+len(q))
	out = append(out, r.body[:r.span.start]...)
	out = append(out, q...)
	return append(out, r.body[r.span.end:]...)
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

var (
	decisionsUsage = usageNames{input: "input_tokens", output: "output_tokens"}
	responsesUsage = usageNames{input: "input_tokens", output: "output_tokens", inputDetails: "input_tokens_details", outputDetails: "output_tokens_details"}
	chatUsage      = usageNames{input: "prompt_tokens", output: "completion_tokens", inputDetails: "prompt_tokens_details", outputDetails: "completion_tokens_details"}
)

func readUsage(body []byte) Usage          { return decisionsUsage.read(topUsage(body)) }
func readResponsesUsage(body []byte) Usage { return responsesUsage.read(topUsage(body)) }

// readChatUsage reads a chat completion's usage.
func readChatUsage(body []byte) Usage { return chatUsage.read(topUsage(body)) }

// readEmbeddingsUsage reads an embeddings answer's usage: prompt_tokens and
// total_tokens in chat's names. An embedding generates nothing, so output
// is a known 0 once the input is known: else every embeddings row would
// hold unknown tokens and cost, and close every cost budget.
func readEmbeddingsUsage(body []byte) Usage {
	u := chatUsage.read(topUsage(body))
	if u.Input != nil && u.Output == nil {
		zero := int64(0)
		u.Output = &zero
	}
	return u
}

// topUsage is the answer's top-level usage object, the rest of the answer
// untouched and undecoded. The answer is not validated first: a malformed
// one yields no usage.
func topUsage(body []byte) []byte {
	raw, _ := member(body, "usage")
	return raw
}

// read reads the token counts of a usage object.
func (n usageNames) read(raw []byte) Usage {
	var u Usage
	if len(raw) == 0 || raw[0] != '{' || !json.Valid(raw) {
		return u
	}
	_ = topLevel(raw, func(key string, _ []byte, v span) bool {
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
			u.Cached = detail(raw[v.start:v.end], "cached_tokens")
			return true
		case n.outputDetails:
			u.Reasoning = detail(raw[v.start:v.end], "reasoning_tokens")
			return true
		default:
			return true
		}
		*p = nil
		if n, ok := parseCount(raw[v.start:v.end]); ok {
			*p = &n
		}
		return true
	})
	if u.Total == nil && u.Input != nil && u.Output != nil {
		t := *u.Input + *u.Output
		u.Total = &t
	}
	return u
}

// detail reads one count of a *_details object; nil when absent.
func detail(obj []byte, name string) *int64 {
	raw, _ := member(obj, name)
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

// providerError is the structured error of a provider answer.
type providerError struct {
	Message, Type, Code, Param string
	structured                 bool
}

func parseProviderError(body []byte) providerError {
	var e struct {
		Error *struct {
			Message any `json:"message"`
			Type    any `json:"type"`
			Code    any `json:"code"`
			Param   any `json:"param"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error == nil {
		return providerError{}
	}
	str := func(v any) string {
		switch x := v.(type) {
		case string:
			return x
		case float64:
			return strconv.FormatFloat(x, 'f', -1, 64)
		}
		return ""
	}
	return providerError{Message: str(e.Error.Message), Type: str(e.Error.Type), Code: str(e.Error.Code), Param: str(e.Error.Param), structured: true}
}

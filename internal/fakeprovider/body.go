package fakeprovider

import (
	"bytes"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"unicode/utf8"
)

// Token accounting. Usage is a pure function of the request body so that
// tests can predict the ledger's numbers: see ExpectedUsage.
const (
	// OutputTokens is output_tokens of every 200 answer, refusals included.
	OutputTokens = 3
)

// ExpectedUsage returns the usage numbers the fake reports for a 200 answer
// to a request with this body: input_tokens = len(body)/4 + 1,
// output_tokens = OutputTokens, total_tokens = their sum. cached_tokens is
// always 0.
func ExpectedUsage(body []byte) (input, output, total int64) {
	return usageFor(len(body))
}

func usageFor(bodyLen int) (input, output, total int64) {
	input = int64(bodyLen)/4 + 1
	return input, OutputTokens, input + OutputTokens
}

// Refusal is the refusal text of a 200 refusal answer (input containing
// "refuse").
const Refusal = "I can't help with that."

// decisionRequest is what the fake reads of a POST /v1/decisions body.
// Unknown fields (cache, safety, metadata, ...) are accepted and ignored.
type decisionRequest struct {
	Model    *string       `json:"model"`
	Input    inputField    `json:"input"`
	Question *questionSpec `json:"question"`
}

type questionSpec struct {
	Type    string            `json:"type"`
	Choices []json.RawMessage `json:"choices"`
	Min     *float64          `json:"min"`
	Max     *float64          `json:"max"`
}

// inputField records whether input is present and whether it contains the
// word "refuse", without copying a possibly huge input.
type inputField struct {
	present bool
	refuse  bool
}

// UnmarshalJSON implements json.Unmarshaler; b is not retained.
func (f *inputField) UnmarshalJSON(b []byte) error {
	f.present = !bytes.Equal(b, []byte("null"))
	f.refuse = bytes.Contains(b, []byte("refuse"))
	return nil
}

// errorSpec is one structured error body.
type errorSpec struct {
	message string
	typ     string
	code    string // "" = null
	param   string // "" = null
}

func (e errorSpec) body() []byte {
	b := make([]byte, 0, 96+len(e.message))
	b = append(b, `{"error":{"message":`...)
	b = appendJSONString(b, e.message)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, e.typ)
	b = append(b, `,"code":`...)
	b = appendNullable(b, e.code)
	b = append(b, `,"param":`...)
	b = appendNullable(b, e.param)
	b = append(b, "}}\n"...)
	return b
}

func appendNullable(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendJSONString(b, s)
}

// The provider's error bodies.
var (
	errInvalidKey = errorSpec{"Incorrect API key provided", "invalid_request_error", "invalid_api_key", ""}
	errForbidden  = errorSpec{"You are not allowed to sample from this model.", "permission_error", "permission_denied", ""}
	errRateLimit  = errorSpec{"Rate limit reached for requests. Please try again later.", "requests", "rate_limit_exceeded", ""}
	errQuota      = errorSpec{"You exceeded your current quota, please check your plan and billing details.", "insufficient_quota", "insufficient_quota", ""}
	errServer     = errorSpec{"The server had an error while processing your request. Sorry about that!", "server_error", "", ""}
	errNotImpl    = errorSpec{"This operation is not implemented.", "server_error", "not_implemented", ""}
	errMethod     = errorSpec{"Method not allowed.", "invalid_request_error", "method_not_allowed", ""}
	errOverloaded = errorSpec{"The server is currently overloaded, please try again later.", "server_error", "overloaded", ""}
	errBadJSON    = errorSpec{"We could not parse the JSON body of your request. The body must be a valid JSON object.", "invalid_request_error", "", ""}
	errNoModel    = errorSpec{"You must provide a model parameter.", "invalid_request_error", "", "model"}
	errContent    = errorSpec{"No such file: file-abc", "invalid_request_error", "file_not_found", "input_file_id"}
	errTooLarge   = errorSpec{"Request body too large.", "invalid_request_error", "request_too_large", ""}
	errBadRequest = errorSpec{"Invalid request.", "invalid_request_error", "invalid_request", ""}
)

func errModelNotFound(model string) errorSpec {
	return errorSpec{"The model `" + model + "` does not exist or you do not have access to it.", "invalid_request_error", "model_not_found", "model"}
}

func errEndpoint(method, path string) errorSpec {
	return errorSpec{"This model does not support the " + path + " endpoint (" + method + ").", "invalid_request_error", "unknown_url", ""}
}

func errMissing(param string) errorSpec {
	return errorSpec{"Missing required parameter: '" + param + "'.", "invalid_request_error", "missing_required_parameter", param}
}

func errInvalidValue(param, msg string) errorSpec {
	return errorSpec{msg, "invalid_request_error", "invalid_value", param}
}

// canonicalError is the error body the fake uses for a bare status (the
// slow and stalled error bodies, EchoSecretsAs).
func canonicalError(status int) errorSpec {
	switch status {
	case http.StatusBadRequest:
		return errBadRequest
	case http.StatusUnauthorized:
		return errInvalidKey
	case http.StatusForbidden:
		return errForbidden
	case http.StatusNotFound:
		return errModelNotFound("decide-mini")
	case http.StatusMethodNotAllowed:
		return errMethod
	case http.StatusTooManyRequests:
		return errRateLimit
	case http.StatusInternalServerError:
		return errServer
	case http.StatusNotImplemented:
		return errNotImpl
	case http.StatusServiceUnavailable:
		return errOverloaded
	}
	return errorSpec{"HTTP " + strconv.Itoa(status) + " " + http.StatusText(status), "api_error", "", ""}
}

// ErrorBody returns the structured error body the fake sends for a bare
// status: 400 invalid_request, 401 invalid_api_key, 403 permission_denied,
// 404 model_not_found (model decide-mini), 405 method_not_allowed, 429
// rate_limit_exceeded (type requests), 500 server_error, 501
// not_implemented, 503 overloaded, anything else type api_error with a null
// code. StallErrorBody and Drip send it (Drip padded).
func ErrorBody(status int) string { return string(canonicalError(status).body()) }

// paddedErrorBody returns the canonical error body for status with its
// message padded so that the whole body is total bytes (when total is larger
// than the unpadded body).
func paddedErrorBody(status, total int) []byte {
	e := canonicalError(status)
	n := total - len(e.body())
	if n > 0 {
		e.message += " " + string(padding(n-1))
	}
	return e.body()
}

// padText fills explanations and padded messages: printable ASCII that
// needs no JSON escaping.
const padText = "The fake provider decided this deterministically; this sentence only pads the answer. "

var padBlock = func() []byte {
	b := make([]byte, 0, 64<<10)
	for len(b)+len(padText) <= cap(b) {
		b = append(b, padText...)
	}
	for len(b) < cap(b) {
		b = append(b, '.')
	}
	return b
}()

// padding returns n bytes of padding text (n <= 64 KiB shares one block).
func padding(n int) []byte {
	if n <= 0 {
		return nil
	}
	if n <= len(padBlock) {
		return padBlock[:n]
	}
	return bytes.Repeat([]byte{'.'}, n)
}

// appendJSONString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD,
// so the result is valid JSON whatever s holds.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// appendOutput appends the output object of a 200 answer (without the
// closing brace, so the caller may add an explanation).
func appendOutput(b []byte, q *questionSpec) []byte {
	switch {
	case q == nil || q.Type == "predicate":
		return append(b, `{"type":"predicate","value":true`...)
	case q.Type == "choice":
		b = append(b, `{"type":"choice","value":`...)
		if len(q.Choices) == 0 {
			return append(b, "null"...)
		}
		return append(b, q.Choices[0]...)
	default: // score
		lo, hi := 0.0, 1.0
		if q.Min != nil {
			lo = *q.Min
		}
		if q.Max != nil {
			hi = *q.Max
		}
		v := lo/2 + hi/2
		if math.IsNaN(v) || math.IsInf(v, 0) {
			v = 0
		}
		b = append(b, `{"type":"score","value":`...)
		return strconv.AppendFloat(b, v, 'g', -1, 64)
	}
}

// validate checks a parsed decision request the way the provider does,
// after the model was found in the catalog. It returns the error to send, or
// ok.
func (q *decisionRequest) validate() (errorSpec, bool) {
	if !q.Input.present {
		return errMissing("input"), false
	}
	if q.Question == nil {
		return errMissing("question"), false
	}
	switch q.Question.Type {
	case "predicate":
	case "choice":
		if len(q.Question.Choices) == 0 {
			return errInvalidValue("question.choices", "A choice question needs at least one choice."), false
		}
	case "score":
		if q.Question.Min != nil && q.Question.Max != nil && *q.Question.Min > *q.Question.Max {
			return errInvalidValue("question.max", "question.max must not be less than question.min."), false
		}
	case "":
		return errMissing("question.type"), false
	default:
		return errInvalidValue("question.type", "Invalid value for 'question.type': expected predicate, choice or score."), false
	}
	return errorSpec{}, true
}

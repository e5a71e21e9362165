package fakeprovider

// The OpenAI-compatible routes: chat completions, Responses and embeddings,
// answered as OpenAI answers them (shared/DESIGN.md, "OpenAI-compatible
// routes"), non-streamed here and streamed in stream.go.

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"net/http"
	"strconv"
)

// Paths of the OpenAI-compatible routes.
const (
	PathChat       = "/v1/chat/completions"
	PathResponses  = "/v1/responses"
	PathEmbeddings = "/v1/embeddings"
)

// EmbeddingDims is the length of every embedding the fake returns.
const EmbeddingDims = 8

// RouteUsage is the usage the fake reports on the OpenAI-compatible routes,
// in rotor's terms: Input is prompt_tokens (chat, embeddings) or
// input_tokens (Responses), Output completion_tokens or output_tokens,
// Cached the cached_tokens and Reasoning the reasoning_tokens details.
// Embeddings report Input and Total only.
type RouteUsage struct {
	Input, Output, Total, Cached, Reasoning int64
}

// ExpectedRouteUsage returns the usage the fake reports for a request with
// this body on chat or Responses, for an answer of outputTokens tokens:
// OutputTokens for a non-streamed answer, the number of text deltas for a
// stream (Options.StreamEvents or Stream.Events). Input is len(body)/4 + 1
// as on Decisions, Cached is Input/2, Reasoning is outputTokens/3, Total is
// Input + Output. On embeddings Output, Cached and Reasoning are 0 and
// Total is Input.
func ExpectedRouteUsage(body []byte, outputTokens int) RouteUsage {
	in, _, _ := usageFor(len(body))
	out := int64(max(outputTokens, 0))
	return RouteUsage{Input: in, Output: out, Total: in + out, Cached: in / 2, Reasoning: out / 3}
}

// routeRequest is what the fake reads of a chat, Responses or embeddings
// body. Unknown fields are accepted and ignored.
type routeRequest struct {
	Model         *string        `json:"model"`
	Stream        bool           `json:"stream"`
	StreamOptions *streamOptions `json:"stream_options"`
	Messages      inputField     `json:"messages"`
	Input         countedInput   `json:"input"`
	Format        string         `json:"encoding_format"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// includeUsage reports whether a chat stream ends with a usage chunk.
func (q *routeRequest) includeUsage() bool {
	return q.StreamOptions != nil && q.StreamOptions.IncludeUsage
}

// countedInput records whether input is present and how many embedding
// inputs it holds: 1 for a string or a token array, the length of an array
// of strings or of token arrays.
type countedInput struct {
	present bool
	n       int
}

// UnmarshalJSON implements json.Unmarshaler; b is not retained.
func (f *countedInput) UnmarshalJSON(b []byte) error {
	f.present = !bytes.Equal(b, []byte("null"))
	f.n = 1
	if len(b) > 0 && b[0] == '[' {
		var items []json.RawMessage
		if err := json.Unmarshal(b, &items); err != nil {
			return err
		}
		if len(items) > 0 && items[0][0] != '"' && items[0][0] != '[' {
			return nil // one input given as tokens
		}
		f.n = len(items)
	}
	return nil
}

// answerText is the text of answers on chat and Responses: word i of an
// answer is answerWords[i % len].
var answerWords = [...]string{"Hello", " from", " the", " fake", " provider", "."}

func appendText(b []byte, words int) []byte {
	for i := range words {
		b = append(b, answerWords[i%len(answerWords)]...)
	}
	return b
}

func (ex *exchange) usage(outputTokens int) RouteUsage {
	if ex.ep == epEmbeddings {
		in, _, _ := usageFor(len(ex.body))
		return RouteUsage{Input: in, Total: in}
	}
	return ExpectedRouteUsage(ex.body, outputTokens)
}

func appendChatUsage(b []byte, u RouteUsage) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, u.Input, 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, u.Output, 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, u.Total, 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, u.Cached, 10)
	b = append(b, `,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, u.Reasoning, 10)
	return append(b, `,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`...)
}

func appendResponsesUsage(b []byte, u RouteUsage) []byte {
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, u.Input, 10)
	b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, u.Cached, 10)
	b = append(b, `},"output_tokens":`...)
	b = strconv.AppendInt(b, u.Output, 10)
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, u.Reasoning, 10)
	b = append(b, `},"total_tokens":`...)
	b = strconv.AppendInt(b, u.Total, 10)
	return append(b, '}')
}

// answerParts returns a complete non-streamed 200 answer for the exchange's
// route as a prefix, the text of a normal answer and a suffix. With padded,
// the slot between prefix and suffix is a JSON string that HugeAnswer fills:
// the text (chat, Responses), the explanation (Decisions), a "padding"
// member (embeddings, which have no text).
func (ex *exchange) answerParts(id uint64, created int64, padded bool) (prefix []byte, text []byte, suffix []byte) {
	switch ex.ep {
	case epChat:
		prefix = append(prefix, `{"id":"chatcmpl-`...)
		prefix = strconv.AppendUint(prefix, id, 10)
		prefix = append(prefix, `","object":"chat.completion","created":`...)
		prefix = strconv.AppendInt(prefix, created, 10)
		prefix = append(prefix, `,"model":`...)
		prefix = appendJSONString(prefix, ex.model)
		prefix = append(prefix, `,"choices":[{"index":0,"message":{"role":"assistant","content":"`...)
		suffix = append(suffix, `","refusal":null,"annotations":[]},"logprobs":null,"finish_reason":"stop"}],"usage":`...)
		suffix = appendChatUsage(suffix, ex.usage(OutputTokens))
		suffix = append(suffix, `,"service_tier":"default","system_fingerprint":"fp_fake"}`+"\n"...)
		return prefix, appendText(nil, OutputTokens), suffix
	case epResponses:
		prefix = appendResponseHead(prefix, id, created, ex.model, "completed")
		prefix = append(prefix, `"output":[`...)
		prefix = appendMessageItemHead(prefix, id, "completed")
		prefix = append(prefix, `,"content":[{"type":"output_text","annotations":[],"logprobs":[],"text":"`...)
		suffix = append(suffix, `"}]}],`...)
		u := ex.usage(OutputTokens)
		suffix = appendResponseTail(suffix, &u)
		suffix = append(suffix, '\n')
		return prefix, appendText(nil, OutputTokens), suffix
	case epEmbeddings:
		prefix = append(prefix, `{"object":"list","data":[`...)
		for i := range max(ex.rreq.Input.n, 1) {
			if i > 0 {
				prefix = append(prefix, ',')
			}
			prefix = append(prefix, `{"object":"embedding","index":`...)
			prefix = strconv.AppendInt(prefix, int64(i), 10)
			prefix = append(prefix, `,"embedding":`...)
			prefix = appendEmbedding(prefix, i, ex.rreq.Format == "base64")
			prefix = append(prefix, '}')
		}
		prefix = append(prefix, `],"model":`...)
		prefix = appendJSONString(prefix, ex.model)
		prefix = append(prefix, `,"usage":{"prompt_tokens":`...)
		u := ex.usage(0)
		prefix = strconv.AppendInt(prefix, u.Input, 10)
		prefix = append(prefix, `,"total_tokens":`...)
		prefix = strconv.AppendInt(prefix, u.Total, 10)
		if !padded {
			return append(prefix, '}'), nil, []byte("}\n")
		}
		return append(prefix, `},"padding":"`...), nil, []byte(`"}` + "\n")
	default: // decisions
		prefix, suffix = hugeAnswerParts(id, ex.model, created, len(ex.body))
		return prefix, nil, suffix
	}
}

// appendOK appends the 200 non-streamed answer of the exchange's route.
func (ex *exchange) appendOK(b []byte) []byte {
	if ex.ep == epDecisions {
		return appendAnswer(b, ex.s.ids.Add(1), ex.model, ex.s.now().Unix(), &ex.req, len(ex.body), ex.s.answerSize)
	}
	prefix, text, suffix := ex.answerParts(ex.s.ids.Add(1), ex.s.now().Unix(), false)
	return append(append(append(b, prefix...), text...), suffix...)
}

// appendEmbedding appends embedding i: EmbeddingDims floats, as a JSON
// array or, for encoding_format "base64", as base64 of little-endian
// float32s (what the OpenAI SDKs ask for).
func appendEmbedding(b []byte, i int, b64 bool) []byte {
	var raw [EmbeddingDims * 4]byte
	if b64 {
		for d := range EmbeddingDims {
			binary.LittleEndian.PutUint32(raw[d*4:], math.Float32bits(embeddingValue(i, d)))
		}
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, raw[:])
		return append(b, '"')
	}
	b = append(b, '[')
	for d := range EmbeddingDims {
		if d > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64(embeddingValue(i, d)), 'g', -1, 32)
	}
	return append(b, ']')
}

// embeddingValue is component d of embedding i: deterministic, exact in
// float32.
func embeddingValue(i, d int) float32 { return float32(i+1) / float32(d+2) }

// EmbeddingValue returns component d of the embedding of input i, as the
// fake computes it: (i+1)/(d+2) in float32.
func EmbeddingValue(i, d int) float32 { return embeddingValue(i, d) }

// appendResponseHead appends the start of a response object up to the
// "output" member.
func appendResponseHead(b []byte, id uint64, created int64, model, status string) []byte {
	b = append(b, `{"id":"resp_`...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, `","object":"response","created_at":`...)
	b = strconv.AppendInt(b, created, 10)
	b = append(b, `,"status":"`...)
	b = append(b, status...)
	b = append(b, `","background":false,"error":null,"incomplete_details":null,"instructions":null,"max_output_tokens":null,"model":`...)
	b = appendJSONString(b, model)
	return append(b, ',')
}

// appendResponseTail appends the members after "output", usage included
// (null when u is nil), and closes the response object.
func appendResponseTail(b []byte, u *RouteUsage) []byte {
	b = append(b, `"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"service_tier":"default","store":true,"temperature":1.0,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1.0,"truncation":"disabled","usage":`...)
	if u == nil {
		b = append(b, "null"...)
	} else {
		b = appendResponsesUsage(b, *u)
	}
	return append(b, `,"user":null,"metadata":{}}`...)
}

// appendMessageItemHead appends an output message item up to (not
// including) its content.
func appendMessageItemHead(b []byte, id uint64, status string) []byte {
	b = append(b, `{"id":"msg_`...)
	b = strconv.AppendUint(b, id, 10)
	b = append(b, `","type":"message","status":"`...)
	b = append(b, status...)
	return append(b, `","role":"assistant"`...)
}

// answerRoute is OK on chat, Responses and embeddings.
func (ex *exchange) answerRoute() {
	if !ex.checkModel() {
		return
	}
	switch {
	case ex.ep == epChat && !ex.rreq.Messages.present:
		ex.writeError(http.StatusBadRequest, errMissing("messages"), nil)
		return
	case ex.ep != epChat && !ex.rreq.Input.present:
		ex.writeError(http.StatusBadRequest, errMissing("input"), nil)
		return
	}
	extra, ok := ex.admitQuota()
	switch {
	case !ok:
	case ex.streamed():
		ex.stream(extra)
	default:
		ex.writeOK(extra)
	}
}

// admitQuota takes one success from the quotas that apply; on a blocking
// quota it answers 429 and reports false.
func (ex *exchange) admitQuota() (http.Header, bool) {
	if !ex.quota {
		return nil, true
	}
	res := ex.s.takeQuota(ex.key, ex.model)
	if !res.applies {
		return nil, true
	}
	if !res.ok {
		ex.writeError(http.StatusTooManyRequests, errRateLimit, res.headers())
		return nil, false
	}
	return res.headers(), true
}

// streamed reports whether the request asks for a stream on a route that
// streams.
func (ex *exchange) streamed() bool {
	return (ex.ep == epChat || ex.ep == epResponses) && ex.rreq.Stream
}

package fakeprovider

// Streamed answers ("stream": true on chat and Responses), as OpenAI sends
// them: text/event-stream, one event per data line, each flushed.

import (
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// DefaultStreamEvents is the number of text deltas of a streamed answer when
// Options.StreamEvents is zero: OutputTokens, so that a stream reports the
// same usage as the non-streamed answer.
const DefaultStreamEvents = OutputTokens

// StreamEnd says how a scripted stream ends.
type StreamEnd int

const (
	// EndComplete sends the whole stream: data: [DONE] last on chat,
	// response.completed last on Responses.
	EndComplete StreamEnd = iota
	// EndCut closes the connection after Stream.After events, without the
	// rest (no [DONE], no response.completed): the client sees the body end
	// early.
	EndCut
	// EndStall sends Stream.After events, then nothing until the client goes
	// away (Received.Canceled) or the server closes.
	EndStall
)

// Stream scripts a streamed answer; see Streamed.
type Stream struct {
	// Events is the number of text deltas; zero means Options.StreamEvents.
	// Usage reports them as output tokens (ExpectedRouteUsage).
	Events int
	// DeltaSize, when positive, pads each delta's text to DeltaSize bytes
	// (the final Responses events repeat the text unpadded):
	// with 17 << 20 one event is larger than rotor's 16 MiB event cap; with
	// Events 5 and 15 << 20 the stream exceeds 64 MiB in events under it.
	DeltaSize int
	// KeepAlive sends an SSE comment, ": keep-alive\n\n", before every
	// event.
	KeepAlive bool
	// Every is the pause before each event after the first.
	Every time.Duration
	// End says how the stream ends; After is the number of events sent
	// before a cut or a stall (every event counts: chat's first chunk, which
	// carries the role, is event 1; Responses' response.created is event 1).
	End   StreamEnd
	After int
}

// Streamed answers a request with "stream": true on chat or Responses as
// the healthy provider does, shaped by st: the checks of OK first (400,
// 404 model_not_found, a quota's 429), then 200 text/event-stream. A
// request without "stream": true, or on another route, gets OK's answer.
//
// Chat events, each "data: {chat.completion.chunk}\n\n": a first chunk with
// the role, one chunk per delta, a chunk with finish_reason "stop"; when the
// request sets stream_options.include_usage, every chunk has "usage": null
// and a last chunk has "choices": [] and the usage; then data: [DONE].
// Responses events, each "event: <type>\ndata: {...}\n\n": response.created,
// response.in_progress, response.output_item.added,
// response.content_part.added, one response.output_text.delta per delta,
// response.output_text.done, response.content_part.done,
// response.output_item.done and response.completed with the usage.
func Streamed(st Stream) Step {
	name := fmt.Sprintf("Streamed(%d", st.Events)
	switch st.End {
	case EndCut:
		name += ", cut after " + strconv.Itoa(st.After)
	case EndStall:
		name += ", stall after " + strconv.Itoa(st.After)
	}
	if st.KeepAlive {
		name += ", keep-alive"
	}
	if st.DeltaSize > 0 {
		name += ", delta " + strconv.Itoa(st.DeltaSize)
	}
	return Step{name + ")", func(ex *exchange) {
		if !ex.streamed() {
			ex.answerOK()
			return
		}
		ex.streamChecked(st)
	}}
}

// StreamEvents is Streamed with n text deltas: for benchmarks, 200.
func StreamEvents(n int) Step { return Streamed(Stream{Events: n}) }

// StreamCut is Streamed cut after n events: the connection closes with no
// [DONE] (chat) or response.completed (Responses).
func StreamCut(n int) Step { return Streamed(Stream{End: EndCut, After: n}) }

// StreamStall is Streamed stalled after n events, until the client goes
// away.
func StreamStall(n int) Step { return Streamed(Stream{End: EndStall, After: n}) }

// streamChecked runs OK's checks, then the scripted stream.
func (ex *exchange) streamChecked(st Stream) {
	ex.script = &st
	ex.answerRoute()
}

var (
	ctSSE     = []string{"text/event-stream; charset=utf-8"}
	keepAlive = []byte(": keep-alive\n\n")
)

// stream sends a 200 event stream for the exchange's route, as scripted by
// ex.script (nil: the default stream).
func (ex *exchange) stream(extra http.Header) {
	var st Stream
	if ex.script != nil {
		st = *ex.script
	}
	deltas := st.Events
	if deltas <= 0 {
		deltas = ex.s.streamEvents
	}
	g := &streamGen{
		chat:   ex.ep == epChat,
		usage:  ex.rreq.includeUsage(),
		id:     ex.s.ids.Add(1),
		model:  ex.model,
		at:     ex.s.now().Unix(),
		deltas: deltas,
		size:   st.DeltaSize,
		u:      ex.usage(deltas),
	}
	h := ex.w.Header()
	for k, v := range extra {
		h[k] = v
	}
	h["Content-Type"] = ctSSE
	h["Cache-Control"] = []string{"no-cache"}
	ex.w.WriteHeader(http.StatusOK)
	ex.status = http.StatusOK
	if !ex.flush() {
		return
	}
	total := g.events()
	buf := make([]byte, 0, 1024)
	for i := range total {
		if (st.End == EndCut || st.End == EndStall) && i >= st.After {
			break
		}
		if i > 0 && !ex.wait(st.Every) {
			return
		}
		if st.KeepAlive {
			if _, err := ex.w.Write(keepAlive); ex.writeErr(err) {
				return
			}
		}
		buf = g.appendEvent(buf[:0], i)
		if _, err := ex.w.Write(buf); ex.writeErr(err) {
			return
		}
		if g.isDelta(i) && g.size > 0 {
			if !ex.writePadding(g.size) {
				return
			}
			buf = g.appendDeltaTail(buf[:0], i)
			if _, err := ex.w.Write(buf); ex.writeErr(err) {
				return
			}
		}
		if !ex.flush() {
			return
		}
	}
	switch st.End {
	case EndCut:
		ex.cut = true
	case EndStall:
		<-ex.r.Context().Done()
		ex.gone()
	}
}

// writePadding writes n bytes of padding text without allocating them.
func (ex *exchange) writePadding(n int) bool {
	for n > 0 {
		k := min(n, len(padBlock))
		if _, err := ex.w.Write(padBlock[:k]); ex.writeErr(err) {
			return false
		}
		n -= k
	}
	return true
}

// streamGen builds the events of one stream.
type streamGen struct {
	chat   bool
	usage  bool // chat: stream_options.include_usage
	id     uint64
	model  string
	at     int64
	deltas int
	size   int // pad each delta's text to this many bytes
	u      RouteUsage
}

// Responses events before the first delta and after the last.
const (
	respHead = 4 // created, in_progress, output_item.added, content_part.added
	respTail = 4 // output_text.done, content_part.done, output_item.done, completed
)

func (g *streamGen) events() int {
	if g.chat {
		n := 1 + g.deltas + 1 + 1 // role, deltas, finish, [DONE]
		if g.usage {
			n++
		}
		return n
	}
	return respHead + g.deltas + respTail
}

func (g *streamGen) first() int {
	if g.chat {
		return 1
	}
	return respHead
}

func (g *streamGen) isDelta(i int) bool { return i >= g.first() && i < g.first()+g.deltas }

// word returns delta i's text when it is not padded.
func (g *streamGen) word(i int) string {
	return answerWords[(i-g.first())%len(answerWords)]
}

// text is the whole answer text as the final Responses events carry it:
// the deltas unpadded (with DeltaSize they do not repeat the padding).
func (g *streamGen) text(b []byte) []byte { return appendText(b, g.deltas) }

// appendEvent appends event i; for a padded delta only up to its text (the
// caller writes the padding and appendDeltaTail).
func (g *streamGen) appendEvent(b []byte, i int) []byte {
	if g.chat {
		return g.appendChat(b, i)
	}
	return g.appendResponses(b, i)
}

func (g *streamGen) chunkHead(b []byte) []byte {
	b = append(b, `data: {"id":"chatcmpl-`...)
	b = strconv.AppendUint(b, g.id, 10)
	b = append(b, `","object":"chat.completion.chunk","created":`...)
	b = strconv.AppendInt(b, g.at, 10)
	b = append(b, `,"model":`...)
	b = appendJSONString(b, g.model)
	return append(b, `,"service_tier":"default","system_fingerprint":"fp_fake","choices":`...)
}

func (g *streamGen) chunkTail(b []byte) []byte {
	if g.usage {
		b = append(b, `,"usage":null`...)
	}
	return append(b, "}\n\n"...)
}

func (g *streamGen) appendChat(b []byte, i int) []byte {
	n := g.events()
	switch {
	case i == n-1:
		return append(b, "data: [DONE]\n\n"...)
	case i == 0:
		b = g.chunkHead(b)
		b = append(b, `[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}]`...)
		return g.chunkTail(b)
	case g.isDelta(i):
		b = g.chunkHead(b)
		b = append(b, `[{"index":0,"delta":{"content":"`...)
		if g.size > 0 {
			return b
		}
		b = append(b, g.word(i)...)
		return g.appendDeltaTail(b, i)
	case i == g.first()+g.deltas:
		b = g.chunkHead(b)
		b = append(b, `[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}]`...)
		return g.chunkTail(b)
	default: // the usage chunk
		b = g.chunkHead(b)
		b = append(b, `[],"usage":`...)
		b = appendChatUsage(b, g.u)
		return append(b, "}\n\n"...)
	}
}

func (g *streamGen) appendDeltaTail(b []byte, i int) []byte {
	if g.chat {
		b = append(b, `"},"logprobs":null,"finish_reason":null}]`...)
		return g.chunkTail(b)
	}
	return append(b, `","logprobs":[]}`+"\n\n"...)
}

func (g *streamGen) respEvent(b []byte, typ string, i int) []byte {
	b = append(b, "event: "...)
	b = append(b, typ...)
	b = append(b, "\ndata: {\"type\":\""...)
	b = append(b, typ...)
	b = append(b, `","sequence_number":`...)
	b = strconv.AppendInt(b, int64(i), 10)
	return append(b, ',')
}

func (g *streamGen) response(b []byte, status string, output bool) []byte {
	b = appendResponseHead(b, g.id, g.at, g.model, status)
	b = append(b, `"output":[`...)
	if output {
		b = appendMessageItemHead(b, g.id, "completed")
		b = append(b, `,"content":[`...)
		b = g.textPart(b)
		b = append(b, "]}"...)
	}
	b = append(b, "],"...)
	if output {
		return appendResponseTail(b, &g.u)
	}
	return appendResponseTail(b, nil) // in progress: usage null
}

func (g *streamGen) textPart(b []byte) []byte {
	b = append(b, `{"type":"output_text","annotations":[],"logprobs":[],"text":"`...)
	b = g.text(b)
	return append(b, `"}`...)
}

func (g *streamGen) itemRef(b []byte) []byte {
	b = append(b, `"item_id":"msg_`...)
	b = strconv.AppendUint(b, g.id, 10)
	return append(b, `","output_index":0,"content_index":0,`...)
}

func (g *streamGen) appendResponses(b []byte, i int) []byte {
	last := g.first() + g.deltas
	switch {
	case i == 0:
		b = g.respEvent(b, "response.created", i)
		b = append(b, `"response":`...)
		b = g.response(b, "in_progress", false)
	case i == 1:
		b = g.respEvent(b, "response.in_progress", i)
		b = append(b, `"response":`...)
		b = g.response(b, "in_progress", false)
	case i == 2:
		b = g.respEvent(b, "response.output_item.added", i)
		b = append(b, `"output_index":0,"item":`...)
		b = appendMessageItemHead(b, g.id, "in_progress")
		b = append(b, `,"content":[]}`...)
	case i == 3:
		b = g.respEvent(b, "response.content_part.added", i)
		b = g.itemRef(b)
		b = append(b, `"part":{"type":"output_text","annotations":[],"logprobs":[],"text":""}`...)
	case g.isDelta(i):
		b = g.respEvent(b, "response.output_text.delta", i)
		b = g.itemRef(b)
		b = append(b, `"delta":"`...)
		if g.size > 0 {
			return b
		}
		b = append(b, g.word(i)...)
		b = append(b, `","logprobs":[]}`+"\n\n"...)
		return b
	case i == last:
		b = g.respEvent(b, "response.output_text.done", i)
		b = g.itemRef(b)
		b = append(b, `"logprobs":[],"text":"`...)
		b = g.text(b)
		b = append(b, '"')
	case i == last+1:
		b = g.respEvent(b, "response.content_part.done", i)
		b = g.itemRef(b)
		b = append(b, `"part":`...)
		b = g.textPart(b)
	case i == last+2:
		b = g.respEvent(b, "response.output_item.done", i)
		b = append(b, `"output_index":0,"item":`...)
		b = appendMessageItemHead(b, g.id, "completed")
		b = append(b, `,"content":[`...)
		b = g.textPart(b)
		b = append(b, "]}"...)
	default:
		b = g.respEvent(b, "response.completed", i)
		b = append(b, `"response":`...)
		b = g.response(b, "completed", true)
	}
	return append(b, "}\n\n"...)
}

package decisions

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/internal/jsonobj"
	"github.com/rotorhq/rotor/internal/sse"
	"github.com/rotorhq/rotor/ledger"
)

// How a stream ended, as its row's error code (DESIGN, "OpenAI-compatible
// routes"); a complete stream has none.
const (
	endCut          = "upstream_stream_cut"
	endIdle         = "stream_idle_timeout"
	endDeadline     = httpx.CodeDeadlineExceeded
	endClientClosed = httpx.CodeClientClosedRequest
	endShutdown     = httpx.CodeServerShutdown
)

// errStreamIdle is the cause a silent stream's provider call is
// cancelled with.
var errStreamIdle = errors.New("provider stream silent past stream_idle_timeout")

func isEventStream(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "text/event-stream"
}

// streamRequest reads "stream": true and, for chat, asks the provider for
// the usage chunk (stream_options.include_usage) when the caller did not:
// injected says rotor added it, so the caller must not see that chunk.
func streamRequest(k *Kind, req jsonobj.Request) (out jsonobj.Request, stream, injected bool, err error) {
	if !k.streams {
		return req, false, false, nil
	}
	var streamRaw, optsRaw []byte
	optsAt := jsonobj.Span{Start: -1, End: -1}
	_ = jsonobj.TopLevel(req.Body, func(key string, _ []byte, v jsonobj.Span) bool {
		switch key {
		case "stream":
			streamRaw = req.Body[v.Start:v.End]
		case "stream_options":
			optsRaw, optsAt = req.Body[v.Start:v.End], v
		}
		return true
	})
	if string(streamRaw) != "true" {
		return req, false, false, nil
	}
	if k != KindChat {
		return req, true, false, nil
	}
	opts := map[string]json.RawMessage{}
	if len(optsRaw) > 0 && optsRaw[0] == '{' {
		if err := json.Unmarshal(optsRaw, &opts); err != nil {
			return req, false, false, err
		}
	}
	if string(opts["include_usage"]) == "true" {
		return req, true, false, nil
	}
	opts["include_usage"] = json.RawMessage("true")
	enc, _ := json.Marshal(opts)
	var body []byte
	if optsAt.Start >= 0 {
		body = append(append(append(body, req.Body[:optsAt.Start]...), enc...), req.Body[optsAt.End:]...)
	} else {
		// Appended as the last member: every byte the caller sent stays
		// where it was.
		end := len(req.Body) - 1
		for end > 0 && req.Body[end] != '}' {
			end--
		}
		body = append(body, req.Body[:end]...)
		body = append(body, `,"stream_options":`...)
		body = append(body, enc...)
		body = append(body, req.Body[end:]...)
	}
	out, err = jsonobj.ParseRequest(body)
	return out, true, true, err
}

// streamAnswer pumps a provider's event stream to the caller, event by
// event and flushed, then settles the row, then writes the held-back
// terminal event ([DONE] or response.completed) only once the row has
// committed. Nothing is replayed: the first byte already went out.
func (rt *Route) streamAnswer(ctx context.Context, caller context.Context, k *Kind, w http.ResponseWriter, wk *walk, out *answer,
	injected bool, start time.Time, info *httpx.AccessInfo) {
	defer out.stream.Close()
	defer out.cancel(nil)
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", out.header.Get("Content-Type"))
	// no-store, as every answer (httpx.SecurityHeaders): it is no weaker
	// than no-cache for an event stream, and keeps the completion out of
	// any cache.
	h.Set("Cache-Control", "no-store")
	h.Set("X-Rotor-Credential", wk.lastCred)
	h.Set("X-Rotor-Attempts", strconv.Itoa(wk.sent))
	// Streams are not bound by the server's write timeout: each write
	// gets its own deadline, extended as bytes flow.
	window := rt.cfg.StreamIdleTimeout
	_ = rc.SetWriteDeadline(time.Now().Add(window))
	w.WriteHeader(out.status)
	_ = rc.Flush()

	var last atomic.Int64
	last.Store(rt.cfg.Clock.Now().UnixNano())
	stopIdle := rt.watchIdle(out.cancel, &last)
	defer stopIdle()
	body := &activity{r: out.stream, clk: rt.cfg.Clock, last: &last}

	buf := streamBufs.Get().(*streamBuf)
	defer buf.put()
	sc := buf.sc
	sc.Reset(body)
	var chat *sse.ChatRewriter
	if k == KindChat {
		chat = sse.NewChatRewriter(injected)
	}
	var usage jsonobj.Usage
	var terminal []byte
	ended := false // a Responses stream's final event was seen
	respID := ""   // its response's id
	writeErr := false
	pending := false // events taken and not flushed yet
	// Events that pass are gathered and leave in one write at each
	// flush: written one by one, ~250-byte events fill the server's 2 KiB
	// and 4 KiB buffers, each a system call, several per upstream read.
	gather := buf.out[:0]
	defer func() { buf.out = gather }()
	send := func() bool {
		if len(gather) == 0 {
			return true
		}
		_ = rc.SetWriteDeadline(time.Now().Add(window))
		_, werr := w.Write(gather)
		gather = gather[:0]
		return werr == nil
	}
	var scanErr error
	for {
		ev, err := sc.Next()
		if err != nil && len(ev.Raw) == 0 {
			scanErr = err
			break
		}
		pass, held := true, false
		switch {
		case err != nil:
			// An unfinished block: the caller would discard it anyway.
			pass = false
		case chat != nil:
			pass = chat.Pass(ev)
			held = sse.IsDone(ev)
		default:
			if _, u, ok := sse.ResponsesUsage(ev); ok {
				// response.completed, .incomplete and .failed each end
				// the stream: held until the row commits, then the body
				// is drained (a provider that lingers loses the
				// connection drainWait later, not the caller's stream
				// at stream_idle_timeout).
				usage, ended, held = jsonobj.ResponsesUsageObject(u), true, true
				if obj, ok := jsonobj.Member(ev.Data, "response"); ok {
					respID = responseID(obj)
				}
			}
		}
		if (held || !pass) && ev.Carry > 0 {
			// The "\n" ending the event before stays with it.
			gather = append(gather, ev.Raw[:ev.Carry]...)
			pending = true
		}
		if held {
			terminal = append([]byte(nil), ev.Raw[ev.Carry:]...)
			break
		}
		if pass {
			if len(gather)+len(ev.Raw) > maxGather && !send() {
				writeErr = true
				break
			}
			if len(ev.Raw) > maxGather {
				// One large event: written as it is, not copied.
				_ = rc.SetWriteDeadline(time.Now().Add(window))
				if _, werr := w.Write(ev.Raw); werr != nil {
					writeErr = true
					break
				}
			} else {
				gather = append(gather, ev.Raw...)
			}
			pending = true
		}
		// Flush unless the next event already arrived with this one:
		// events that came in one read leave in one write, and none
		// waits for an event still on its way.
		if pending && (err != nil || !sc.EventReady()) {
			pending = false
			if !send() || rc.Flush() != nil {
				writeErr = true
				break
			}
		}
		if err != nil {
			scanErr = err
			break
		}
	}
	if pending && !writeErr && (!send() || rc.Flush() != nil) {
		writeErr = true
	}
	if chat != nil {
		usage = jsonobj.ChatUsageObject(chat.Usage())
	}
	end := ""
	switch {
	case terminal != nil:
	case errors.Is(context.Cause(caller), httpx.ErrServerShutdown):
		end = endShutdown
	case writeErr || caller.Err() != nil:
		end = endClientClosed
	case errors.Is(context.Cause(out.streamCtx), errStreamIdle):
		end = endIdle
	case ctx.Err() != nil:
		end = endDeadline
	case scanErr == io.EOF && k == KindResponses:
		// A Responses stream that ended cleanly on response.incomplete
		// or response.failed was complete as the provider sent it.
		if !ended {
			end = endCut
		}
	default:
		end = endCut
	}
	if end != "" {
		out.cancel(nil)
	}
	st := ledger.Settlement{RequestID: wk.id, Model: wk.upstream, Credential: wk.lastCred, Region: wk.region, Attempts: wk.sent,
		Status: out.status, ErrorCode: end, Latency: rt.cfg.Clock.Now().Sub(start)}
	settleUsage(&st, usage)
	info.Code = end
	if err := rt.cfg.Ledger.Settle(context.WithoutCancel(ctx), st); err != nil {
		// No durable row: the caller's stream closes without its
		// terminal event, so it reads as incomplete.
		rt.log.Error("usage row not settled; the stream closes without its terminal event", "request_id", wk.id, "error", err)
		abortStream()
	}
	info.Recorded = true
	noteTokens(info, st)
	rt.affinity.remember(respID, wk.lastCred)
	if end != "" {
		abortStream()
	}
	if terminal != nil {
		_ = rc.SetWriteDeadline(time.Now().Add(window))
		if _, err := w.Write(terminal); err == nil {
			_ = rc.Flush()
		}
		if !body.eof {
			rt.finishBody(out, func() {
				// The "\n" of a "\r\n" split after the terminal event
				// is still the caller's.
				if sc.EndLF() {
					_ = rc.SetWriteDeadline(time.Now().Add(window))
					if _, err := w.Write([]byte{'\n'}); err == nil {
						_ = rc.Flush()
					}
				}
			})
		}
	}
}

// abortStream ends a broken stream's answer without the end of its
// chunked body (http.ErrAbortHandler: net/http closes the connection), so
// that the caller reads an unexpected end, an error, and not a clean end
// without the terminal event, which SDKs take for success (openai-go's
// stream.Err() is nil then). The row is settled first; the access log
// records the request all the same.
func abortStream() { panic(http.ErrAbortHandler) }

// drainWait and maxDrain bound what finishBody reads after a stream's
// terminal event.
const (
	drainWait = 250 * time.Millisecond
	maxDrain  = 64 << 10
)

// errDrainWait is the cause a provider call is cancelled with when its
// stream did not end within drainWait of its terminal event.
var errDrainWait = errors.New("provider stream did not end after its terminal event")

// finishBody reads a complete stream's body to its end, so that the
// provider connection goes back to the pool: the pump stops at the
// terminal event, and a body closed before its end (the chunked encoding's
// last chunk usually arrives just after that event) closes the connection,
// so that the next request dials anew (on a real provider, a TLS
// handshake before its first byte). A provider that sends more than
// maxDrain bytes, or does not end the stream within drainWait, loses the
// connection instead.
func (rt *Route) finishBody(out *answer, first func()) {
	stop := clock.AfterFunc(rt.cfg.Clock, drainWait, func() { out.cancel(errDrainWait) })
	first()
	_, _ = io.CopyN(io.Discard, out.stream, maxDrain)
	stop()
}

// maxGather bounds the bytes of events gathered for one write; a larger
// event is written on its own.
const maxGather = 64 << 10

// streamBuf is a stream's scanner and write buffer, pooled: without it
// each stream allocates a 32 KiB read buffer and its event buffers.
type streamBuf struct {
	sc  *sse.Scanner
	out []byte
}

var streamBufs = sync.Pool{New: func() any { return &streamBuf{sc: sse.NewScanner(nil)} }}

func (b *streamBuf) put() {
	b.sc.Reset(nil) // drops the provider's body and a large event's buffer
	if cap(b.out) > maxGather {
		b.out = nil
	}
	b.out = b.out[:0]
	streamBufs.Put(b)
}

// watchIdle cancels the stream's provider call once last (on the route's
// clock) is StreamIdleTimeout old. stop ends the watch. It holds a timer,
// not a goroutine: each stream in flight has one.
func (rt *Route) watchIdle(cancel context.CancelCauseFunc, last *atomic.Int64) (stop func()) {
	idle := rt.cfg.StreamIdleTimeout
	var (
		mu      sync.Mutex
		stopped bool
		stopT   func() bool
		check   func()
	)
	check = func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		since := rt.cfg.Clock.Now().Sub(time.Unix(0, last.Load()))
		if since >= idle {
			cancel(errStreamIdle)
			return
		}
		stopT = clock.AfterFunc(rt.cfg.Clock, idle-since, check)
	}
	mu.Lock()
	stopT = clock.AfterFunc(rt.cfg.Clock, idle, check)
	mu.Unlock()
	return func() {
		mu.Lock()
		defer mu.Unlock()
		stopped = true
		stopT()
	}
}

// activity notes, on the route's clock, when the provider last sent
// bytes (SSE comments too), and whether its body reached its end.
type activity struct {
	r    io.Reader
	clk  clock.Clock
	last *atomic.Int64
	eof  bool
}

func (a *activity) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if n > 0 {
		a.last.Store(a.clk.Now().UnixNano())
	}
	if err == io.EOF {
		a.eof = true
	}
	return n, err
}

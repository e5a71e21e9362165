package fakeprovider

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Step is one behaviour of the provider for one request: an answer, an
// error, a fault. Build steps with the constructors below and pass them to
// Script, SetDefault, ScriptCatalog or SetCatalogDefault. The zero Step
// behaves as OK. Steps are values and may be reused.
type Step struct {
	name string
	run  func(*exchange)
}

// String returns the step's name as recorded in Received.Step, e.g.
// "RateLimited(30)".
func (st Step) String() string {
	if st.run == nil {
		return "OK"
	}
	return st.name
}

// OK behaves as the healthy provider. For POST /v1/decisions: 400 for a
// body that is not a JSON object or lacks model, input or a valid question;
// 404 model_not_found for a model not in the key's catalog; 429 when a
// quota (SetQuota) is used up; else 200 with the decision, a refusal when
// the input contains "refuse", and usage per ExpectedUsage. For chat
// completions, Responses and embeddings: the same 400 (no messages, no
// input), 404 and 429 checks, then 200 with the route's answer in OpenAI's
// shape and usage per ExpectedRouteUsage, streamed (Options.StreamEvents
// deltas, see Streamed) when the body sets "stream": true. For GET
// /v1/models: the key's catalog.
func OK() Step { return Step{"OK", (*exchange).answerOK} }

func errorStep(name string, status int, e errorSpec, h http.Header) Step {
	body := e.body()
	return Step{name, func(ex *exchange) { ex.write(status, ctJSON, body, h) }}
}

func retryHeader(retryAfter string) http.Header {
	if retryAfter == "" {
		return nil
	}
	return http.Header{"Retry-After": {retryAfter}}
}

// RateLimited answers 429 with code rate_limit_exceeded and type requests,
// a temporary rate limit. retryAfter is sent verbatim as Retry-After
// (seconds, an HTTP date, or garbage); "" sends no Retry-After.
func RateLimited(retryAfter string) Step {
	return errorStep("RateLimited("+retryAfter+")", http.StatusTooManyRequests, errRateLimit, retryHeader(retryAfter))
}

// InsufficientQuota answers 429 with code and type insufficient_quota: a
// permanent quota rejection, no Retry-After.
func InsufficientQuota() Step {
	return errorStep("InsufficientQuota", http.StatusTooManyRequests, errQuota, nil)
}

// Unclassified429 answers 429 with a plain-text body and no structured
// error, so the rejection cannot be classified.
func Unclassified429() Step {
	return Status(http.StatusTooManyRequests, "Too Many Requests\n", http.Header{"Content-Type": ctText}).named("Unclassified429")
}

// Unauthorized answers 401 invalid_api_key, as for an unknown key.
func Unauthorized() Step {
	return errorStep("Unauthorized", http.StatusUnauthorized, errInvalidKey, nil)
}

// Forbidden answers 403 with code permission_denied.
func Forbidden() Step {
	return errorStep("Forbidden", http.StatusForbidden, errForbidden, nil)
}

// NotFoundModel answers 404 naming the request's model: code
// model_not_found, param model.
func NotFoundModel() Step {
	return Step{"NotFoundModel", func(ex *exchange) {
		ex.writeError(http.StatusNotFound, errModelNotFound(ex.model), nil)
	}}
}

// NotFoundEndpoint answers 404 naming the endpoint: code unknown_url, the
// message names the request's path (/v1/decisions).
func NotFoundEndpoint() Step {
	return Step{"NotFoundEndpoint", func(ex *exchange) {
		ex.writeError(http.StatusNotFound, errEndpoint(ex.r.Method, ex.r.URL.Path), nil)
	}}
}

// NotFoundContent answers 404 about the request's content, not the model
// or endpoint: code file_not_found, param input_file_id, message "No such
// file: file-abc". rotor must return it without failover.
func NotFoundContent() Step {
	return errorStep("NotFoundContent", http.StatusNotFound, errContent, nil)
}

// NotFoundBare answers 404 with an HTML body and no structured error.
func NotFoundBare() Step {
	return Status(http.StatusNotFound, "<html><head><title>404 Not Found</title></head><body><h1>404 Not Found</h1></body></html>\n",
		http.Header{"Content-Type": ctHTML}).named("NotFoundBare")
}

// MethodNotAllowed answers 405 with code method_not_allowed.
func MethodNotAllowed() Step {
	return errorStep("MethodNotAllowed", http.StatusMethodNotAllowed, errMethod, http.Header{"Allow": {"GET"}})
}

// NotImplemented answers 501 with code not_implemented.
func NotImplemented() Step {
	return errorStep("NotImplemented", http.StatusNotImplemented, errNotImpl, nil)
}

// ServerError answers 500 with type server_error and a null code.
func ServerError() Step {
	return errorStep("ServerError", http.StatusInternalServerError, errServer, nil)
}

// Overloaded answers 503 with code overloaded; retryAfter as in
// RateLimited.
func Overloaded(retryAfter string) Step {
	return errorStep("Overloaded("+retryAfter+")", http.StatusServiceUnavailable, errOverloaded, retryHeader(retryAfter))
}

// Status answers code with body and the given headers (copied), verbatim:
// anything the other constructors do not cover. Without a Content-Type in
// header none is sent beyond what net/http sniffs; 204 and 304 send no
// body. It panics if code is not a final status (200 to 999), a programmer
// error.
func Status(code int, body string, header http.Header) Step {
	if code < 200 || code > 999 {
		panic("fakeprovider: invalid status " + strconv.Itoa(code))
	}
	h := header.Clone()
	b := []byte(body)
	return Step{"Status(" + strconv.Itoa(code) + ")", func(ex *exchange) { ex.write(code, nil, b, h) }}
}

func (st Step) named(name string) Step {
	st.name = name
	return st
}

// ResetAfterRead reads the whole request, then resets the connection (TCP
// RST) without answering: the provider may have run the request, the
// client cannot know.
func ResetAfterRead() Step {
	return Step{"ResetAfterRead", func(ex *exchange) {
		if conn := ex.hijack(); conn != nil {
			reset(conn)
		}
	}}
}

// ResetMidAnswer starts the 200 non-streamed answer OK would give (status line, headers
// with the full Content-Length, then the first n bytes of the body) and
// resets the connection. n is clamped so that at least one byte is missing.
func ResetMidAnswer(n int) Step {
	return Step{"ResetMidAnswer(" + strconv.Itoa(n) + ")", func(ex *exchange) {
		body := ex.appendOK(nil)
		n := min(max(n, 0), len(body)-1)
		conn := ex.hijack()
		if conn == nil {
			return
		}
		head := "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
		_ = conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		_, _ = conn.Write(append([]byte(head), body[:n]...))
		ex.status = http.StatusOK
		reset(conn)
	}}
}

// hijack takes the connection over; nil (and the handler aborts) if that is
// impossible.
func (ex *exchange) hijack() net.Conn {
	conn, _, err := http.NewResponseController(ex.w).Hijack()
	if err != nil {
		ex.abort = true
		return nil
	}
	ex.hijacked = true
	return conn
}

// reset closes conn with a TCP RST rather than a FIN.
func reset(conn net.Conn) {
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// Stall accepts the request and never answers, until the client goes away
// (Received.Canceled) or the server closes (the connection is dropped).
func Stall() Step {
	return Step{"Stall", func(ex *exchange) {
		<-ex.r.Context().Done()
		ex.gone()
	}}
}

// StallErrorBody sends status and the first bytes of the error body
// (ErrorBody(status)), flushes, waits stall (less if the client goes away
// or the server closes), then sends the rest of the body. firstBytes ""
// means the first 10 bytes of ErrorBody(status); when firstBytes is not a
// prefix of it, firstBytes is the whole body.
func StallErrorBody(status int, firstBytes string, stall time.Duration) Step {
	full := ErrorBody(status)
	if firstBytes == "" {
		firstBytes = full[:10]
	}
	rest := ""
	if strings.HasPrefix(full, firstBytes) {
		rest = full[len(firstBytes):]
	}
	name := fmt.Sprintf("StallErrorBody(%d, %q, %s)", status, firstBytes, stall)
	return Step{name, func(ex *exchange) {
		ex.w.Header()["Content-Type"] = ctJSON
		ex.w.WriteHeader(status)
		ex.status = status
		if _, err := io.WriteString(ex.w, firstBytes); ex.writeErr(err) || !ex.flush() {
			return
		}
		if !ex.wait(stall) {
			return
		}
		_, err := io.WriteString(ex.w, rest)
		ex.writeErr(err)
	}}
}

// DripErrorBody streams a structured error body (ErrorBody(status), its
// message padded) of total bytes, in 4 KiB chunks 1 ms apart: with total
// over 64 KiB, rotor must stop reading at its error-body cap.
func DripErrorBody(status int, total int) Step {
	return Drip(status, total, 4<<10, time.Millisecond).named(fmt.Sprintf("DripErrorBody(%d, %d)", status, total))
}

// Drip streams a structured error body (ErrorBody(status), its message
// padded) of total bytes, chunk bytes at a time with a pause of every
// between chunks, flushing each (no Content-Length). The body is exactly
// total bytes when total exceeds the unpadded body (about 150 bytes), else
// the unpadded body. Drip(400, 64, 1, time.Second) drips a byte a second.
func Drip(status, total, chunk int, every time.Duration) Step {
	body := paddedErrorBody(status, total)
	chunk = max(chunk, 1)
	name := fmt.Sprintf("Drip(%d, %d, %d, %s)", status, total, chunk, every)
	return Step{name, func(ex *exchange) {
		ex.w.Header()["Content-Type"] = ctJSON
		ex.w.WriteHeader(status)
		ex.status = status
		for off := 0; off < len(body); off += chunk {
			if off > 0 && !ex.wait(every) {
				return
			}
			end := min(off+chunk, len(body))
			if _, err := ex.w.Write(body[off:end]); ex.writeErr(err) || !ex.flush() {
				return
			}
		}
	}}
}

// HugeAnswer answers 200 with a body of exactly size bytes and a matching
// Content-Length: the route's non-streamed answer (a decision whose
// explanation is padded; a chat completion or a response whose text is; an
// embeddings list with a padding member), written in chunks without
// allocating it (use 64 MiB + 1 for rotor's cap), even to a request that
// asked for a stream. The body is valid JSON when size is at least about
// 1 KiB.
func HugeAnswer(size int64) Step {
	return Step{"HugeAnswer(" + strconv.FormatInt(size, 10) + ")", func(ex *exchange) { ex.huge(size, true) }}
}

// HugeAnswerChunked is HugeAnswer without Content-Length (chunked transfer
// encoding), so the client learns the size only by reading.
func HugeAnswerChunked(size int64) Step {
	return Step{"HugeAnswerChunked(" + strconv.FormatInt(size, 10) + ")", func(ex *exchange) { ex.huge(size, false) }}
}

func (ex *exchange) huge(size int64, withLength bool) {
	size = max(size, 0)
	prefix, _, suffix := ex.answerParts(ex.s.ids.Add(1), ex.s.now().Unix(), true)
	h := ex.w.Header()
	h["Content-Type"] = ctJSON
	if withLength {
		h["Content-Length"] = []string{strconv.FormatInt(size, 10)}
	}
	ex.w.WriteHeader(http.StatusOK)
	ex.status = http.StatusOK
	if !withLength && !ex.flush() { // send the headers now: chunked, whatever the size
		return
	}

	pad := size - int64(len(prefix)) - int64(len(suffix))
	if pad < 0 {
		all := append(prefix, suffix...)
		_, err := ex.w.Write(all[:size])
		ex.writeErr(err)
		return
	}
	if _, err := ex.w.Write(prefix); ex.writeErr(err) {
		return
	}
	for pad > 0 {
		n := min(pad, int64(len(padBlock)))
		if _, err := ex.w.Write(padBlock[:n]); ex.writeErr(err) {
			return
		}
		pad -= n
	}
	_, err := ex.w.Write(suffix)
	ex.writeErr(err)
}

// Redirect answers code (e.g. 307 or 302) with Location: location. rotor
// must not follow it.
func Redirect(location string, code int) Step {
	return Status(code, http.StatusText(code)+"\n", http.Header{
		"Location":     {location},
		"Content-Type": ctText,
	}).named(fmt.Sprintf("Redirect(%q, %d)", location, code))
}

// EchoSecrets answers 400 whose error message echoes the request's
// Authorization header (so the raw key) and body: rotor must never pass
// the message on. See EchoSecretsAs.
func EchoSecrets() Step { return EchoSecretsAs(http.StatusBadRequest).named("EchoSecrets") }

// maxEcho bounds how much of the body an echo repeats.
const maxEcho = 16 << 10

// EchoSecretsAs answers status with the structured error of ErrorBody
// (status), its message replaced by one that echoes the Authorization
// header and the first 16 KiB of the request body; code, type and param
// stay safe to pass on. With 401 or 429 it tests sanitization on the
// failover and rate-limit paths too.
func EchoSecretsAs(status int) Step {
	e := canonicalError(status)
	return Step{"EchoSecretsAs(" + strconv.Itoa(status) + ")", func(ex *exchange) {
		body := ex.body
		if len(body) > maxEcho {
			body = body[:maxEcho]
		}
		e := e
		e.message = "Invalid request. Authorization: " + ex.r.Header.Get("Authorization") +
			" (key " + ex.key + "); body: " + string(body)
		ex.writeError(status, e, nil)
	}}
}

// Delay waits d (less if the client goes away or the server closes, and
// then nothing is answered), then behaves as then.
func Delay(d time.Duration, then Step) Step {
	return Step{"Delay(" + d.String() + ", " + then.String() + ")", func(ex *exchange) {
		if !ex.wait(d) {
			return
		}
		if then.run == nil {
			ex.answerOK()
			return
		}
		then.run(ex)
	}}
}

// Await waits until ready is closed (nothing is answered if the client
// goes away or the server closes first), then behaves as then: a call a
// test holds in flight for as long as it needs, on no clock.
func Await(ready <-chan struct{}, then Step) Step {
	return Step{"Await(" + then.String() + ")", func(ex *exchange) {
		select {
		case <-ready:
		case <-ex.r.Context().Done():
			ex.gone()
			return
		}
		then.run(ex)
	}}
}

// SlowCatalog, for ScriptCatalog, answers the catalog after d, or nothing
// if the client goes away first.
func SlowCatalog(d time.Duration) Step {
	return Delay(d, OK()).named("SlowCatalog(" + d.String() + ")")
}

// Handle answers with h: the escape hatch for behaviours no constructor
// covers. The request body has been read already; h gets a fresh reader
// over it. The recorded Status is what h passes to WriteHeader (200 if it
// only writes).
func Handle(h http.HandlerFunc) Step {
	return Step{"Handle", func(ex *exchange) {
		ex.r.Body = io.NopCloser(bytes.NewReader(ex.body))
		sw := &statusWriter{ResponseWriter: ex.w}
		h(sw, ex.r)
		ex.status = sw.status
	}}
}

// statusWriter records the status a Handle step sends.
type statusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader records the first status.
func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write records an implicit 200.
func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

package fakeprovider

// How the fake answers one HTTP exchange: the endpoint, the scripted step,
// and the writes that put it on the wire.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rotorhq/rotor/internal/secret"
)

type endpoint int

const (
	epOther endpoint = iota
	epDecisions
	epModels
	epChat
	epResponses
	epEmbeddings
)

// inference reports whether the endpoint is a POST with a model that
// scripts (Script, SetDefault) and quotas apply to.
func (ep endpoint) inference() bool { return ep >= epDecisions && ep != epModels }

// exchange is one request being answered.
type exchange struct {
	s        *Server
	w        http.ResponseWriter
	r        *http.Request
	ep       endpoint
	key      string
	body     []byte
	req      decisionRequest // Decisions
	rreq     routeRequest    // chat, Responses, embeddings
	parseErr error
	model    string
	cat      *catalog
	quota    bool // some quota is set: check it before a 200
	info     Received
	rec      *Received // the stored record, nil when not recording

	status   int
	stepName string
	canceled bool // the client went away before the answer was complete
	abort    bool // the server is closing: drop the connection
	hijacked bool
	cut      bool    // end a stream early: drop the connection
	script   *Stream // the scripted stream, nil for the default one
}

func bearer(r *http.Request) string {
	v := r.Header.Get("Authorization")
	if len(v) > 7 && strings.EqualFold(v[:7], "bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return ""
}

func (s *Server) getBuf() *bytes.Buffer {
	if b, ok := s.bufs.Get().(*bytes.Buffer); ok {
		b.Reset()
		return b
	}
	return new(bytes.Buffer)
}

func (s *Server) putBuf(b *bytes.Buffer) {
	if b.Cap() <= 256<<10 { // do not keep huge bodies alive
		s.bufs.Put(b)
	}
}

func (s *Server) getAnswerBuf() *[]byte {
	if p, ok := s.answers.Get().(*[]byte); ok {
		return p
	}
	b := make([]byte, 0, 2048)
	return &b
}

func (s *Server) putAnswerBuf(p *[]byte) {
	if cap(*p) <= 256<<10 {
		s.answers.Put(p)
	}
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		panic(http.ErrAbortHandler)
	}
	s.handlers.Add(1)
	s.mu.Unlock()
	defer s.handlers.Done()

	ex := &exchange{s: s, w: w, r: r, key: bearer(r)}
	switch r.URL.Path {
	case PathDecisions:
		ex.ep = epDecisions
	case PathModels:
		ex.ep = epModels
	case PathChat:
		ex.ep = epChat
	case PathResponses:
		ex.ep = epResponses
	case PathEmbeddings:
		ex.ep = epEmbeddings
	}

	buf := s.getBuf()
	defer s.putBuf(buf)
	if cl := r.ContentLength; cl > 0 && cl <= s.maxBody {
		buf.Grow(int(cl))
	}
	_, readErr := buf.ReadFrom(io.LimitReader(r.Body, s.maxBody+1))
	tooLarge := int64(buf.Len()) > s.maxBody
	ex.body = buf.Bytes()
	if readErr == nil && !tooLarge {
		switch {
		case ex.ep == epDecisions:
			if err := json.Unmarshal(ex.body, &ex.req); err != nil {
				ex.parseErr = err
			} else if ex.req.Model != nil {
				ex.model = *ex.req.Model
			}
		case ex.ep.inference():
			if err := json.Unmarshal(ex.body, &ex.rreq); err != nil {
				ex.parseErr = err
			} else if ex.rreq.Model != nil {
				ex.model = *ex.rreq.Model
			}
		}
	}

	step, known := s.begin(ex)

	switch {
	case readErr != nil:
		ex.gone() // the client went away while sending
	case tooLarge:
		ex.writeError(http.StatusRequestEntityTooLarge, errTooLarge, nil)
	case !known:
		ex.writeError(http.StatusUnauthorized, errInvalidKey, nil)
	case ex.ep == epOther:
		ex.writeError(http.StatusNotFound, errorSpec{"Invalid URL (" + r.Method + " " + r.URL.Path + ")", "invalid_request_error", "", ""}, nil)
	case ex.ep.inference() && r.Method != http.MethodPost,
		ex.ep == epModels && r.Method != http.MethodGet:
		ex.writeError(http.StatusMethodNotAllowed, errMethod, nil)
	default:
		ex.stepName = step.String()
		if step.run == nil {
			ex.answerOK()
		} else {
			step.run(ex)
		}
	}
	s.finish(ex)
	if ex.abort || ex.cut {
		panic(http.ErrAbortHandler) // drop the connection, the answer unfinished
	}
}

// begin counts and records the request and picks its step.
func (s *Server) begin(ex *exchange) (step Step, known bool) {
	r := ex.r
	recording := s.recording.Load()
	ex.info = Received{
		Method:  r.Method,
		Path:    r.URL.Path,
		Key:     ex.key,
		Model:   ex.model,
		BodyLen: int64(len(ex.body)),
		At:      s.now(),
	}
	if recording {
		ex.info.Header = r.Header.Clone()
		ex.info.BodySHA256 = sha256.Sum256(ex.body)
		if len(ex.body) <= MaxRecordedBody {
			ex.info.Body = bytes.Clone(ex.body)
			if ex.info.Body == nil {
				ex.info.Body = []byte{}
			}
		}
	}

	s.mu.Lock()
	s.hits[ex.info.Path]++
	s.keyHits[hitKey{ex.key, ex.info.Path}]++
	ex.cat, known = s.keys[ex.key]
	if known {
		switch {
		case ex.ep.inference():
			step, _ = s.nextStep(ex.key, ex.model)
			ex.quota = len(s.quotas) > 0
		case ex.ep == epModels:
			step, _ = s.nextCatalogStep(ex.key)
		}
	}
	if recording {
		rec := ex.info
		ex.rec = &rec
		s.received = append(s.received, ex.rec)
	}
	s.wakeLocked()
	hook := s.onRequest
	s.mu.Unlock()

	if hook != nil {
		hook(ex.info)
	}
	return step, known
}

// finish completes the record of a request.
func (s *Server) finish(ex *exchange) {
	if !ex.canceled && !ex.abort && !ex.hijacked && ex.r.Context().Err() != nil && s.ctx.Err() == nil {
		ex.canceled = true
	}
	ex.info.Status = ex.status
	ex.info.Step = ex.stepName
	ex.info.Canceled = ex.canceled
	s.mu.Lock()
	if ex.rec != nil {
		ex.rec.Status, ex.rec.Step, ex.rec.Canceled = ex.status, ex.stepName, ex.canceled
	}
	if ex.canceled {
		s.cancels = append(s.cancels, ex.info)
		s.wakeLocked()
	}
	s.mu.Unlock()

	if l := s.logger; l != nil && l.Enabled(context.Background(), slog.LevelDebug) {
		l.LogAttrs(context.Background(), slog.LevelDebug, "fake provider request",
			slog.String("method", ex.info.Method),
			slog.String("path", ex.info.Path),
			slog.String("credential", secret.New(ex.key).Fingerprint()),
			slog.String("model", ex.model),
			slog.Int("status", ex.status),
			slog.String("step", ex.stepName),
			slog.Bool("canceled", ex.canceled),
		)
	}
}

// gone notes that the request context ended: the client went away, or the
// server is closing.
func (ex *exchange) gone() {
	if ex.s.ctx.Err() != nil {
		ex.abort = true
	} else {
		ex.canceled = true
	}
}

// wait sleeps d, or less if the request ends; it reports whether the whole
// d passed.
func (ex *exchange) wait(d time.Duration) bool {
	if d <= 0 {
		if ex.r.Context().Err() != nil {
			ex.gone()
			return false
		}
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ex.r.Context().Done():
		ex.gone()
		return false
	}
}

// writeErr notes a failed write: the client is gone (or the server closing).
func (ex *exchange) writeErr(err error) bool {
	if err == nil {
		return false
	}
	ex.gone()
	return true
}

func (ex *exchange) flush() bool {
	return !ex.writeErr(http.NewResponseController(ex.w).Flush())
}

var (
	ctJSON = []string{"application/json"}
	ctText = []string{"text/plain; charset=utf-8"}
	ctHTML = []string{"text/html; charset=utf-8"}
)

// write sends a complete answer.
func (ex *exchange) write(status int, contentType []string, body []byte, extra http.Header) {
	h := ex.w.Header()
	if contentType != nil {
		h["Content-Type"] = contentType
	}
	for k, v := range extra {
		h[k] = v
	}
	noBody := status == http.StatusNoContent || status == http.StatusNotModified
	if !noBody {
		h["Content-Length"] = []string{strconv.Itoa(len(body))}
	}
	ex.w.WriteHeader(status)
	ex.status = status
	if !noBody {
		_, err := ex.w.Write(body)
		ex.writeErr(err)
	}
}

func (ex *exchange) writeError(status int, e errorSpec, extra http.Header) {
	ex.write(status, ctJSON, e.body(), extra)
}

// answerOK is the healthy provider's behaviour for the endpoint.
func (ex *exchange) answerOK() {
	switch ex.ep {
	case epModels:
		ex.write(http.StatusOK, ctJSON, ex.cat.json, nil)
	case epDecisions:
		ex.decide()
	case epChat, epResponses, epEmbeddings:
		ex.answerRoute()
	}
}

func (ex *exchange) decide() {
	if !ex.checkModel() {
		return
	}
	if e, ok := ex.req.validate(); !ok {
		ex.writeError(http.StatusBadRequest, e, nil)
		return
	}
	if extra, ok := ex.admitQuota(); ok {
		ex.writeOK(extra)
	}
}

// checkModel answers the provider's errors about the body and its model (400
// not JSON, 400 no model, 404 not in the key's catalog) and reports whether
// the request passed.
func (ex *exchange) checkModel() bool {
	switch {
	case ex.parseErr != nil:
		ex.writeError(http.StatusBadRequest, errBadJSON, nil)
	case ex.model == "":
		ex.writeError(http.StatusBadRequest, errNoModel, nil)
	case !ex.cat.has(ex.model):
		ex.writeError(http.StatusNotFound, errModelNotFound(ex.model), nil)
	default:
		return true
	}
	return false
}

// writeOK sends the route's 200 non-streamed answer.
func (ex *exchange) writeOK(extra http.Header) {
	p := ex.s.getAnswerBuf()
	b := ex.appendOK((*p)[:0])
	ex.write(http.StatusOK, ctJSON, b, extra)
	*p = b[:0]
	ex.s.putAnswerBuf(p)
}

package fakeprovider

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rotorhq/rotor/internal/secret"
)

// Paths the fake serves.
const (
	PathDecisions = "/v1/decisions"
	PathModels    = "/v1/models"
)

// Size limits.
const (
	// DefaultMaxBodyBytes bounds request bodies when Options.MaxBodyBytes is
	// zero: above rotor's 64 MiB cap, so that the fake never refuses what
	// rotor forwards. Larger bodies get 413.
	DefaultMaxBodyBytes = 70 << 20
	// MaxRecordedBody is the largest body Received.Body holds; larger ones
	// are recorded by length and SHA-256 only.
	MaxRecordedBody = 1 << 20
)

// shutdownGrace is how long Close lets in-flight answers finish before it
// closes their connections. Stalls end at once (the server context is
// cancelled first), so only answers already being written use it.
const shutdownGrace = 500 * time.Millisecond

// Options configure Start. The zero value is ready to use.
type Options struct {
	// Addr is the listen address; default 127.0.0.1:0 (a free loopback
	// port).
	Addr string
	// Logger, when set, gets one debug line per request (method, path,
	// credential fingerprint, model, status, step). Keys are never logged.
	Logger *slog.Logger
	// AnswerSize is the approximate size in bytes of a 200 decision answer;
	// output.explanation pads it. Zero means DefaultAnswerSize; negative
	// means no explanation field at all.
	AnswerSize int
	// Now is the clock for quota windows, Received.At and "created";
	// default time.Now. Tests pass a fake clock's Now so that quota windows
	// pass without sleeping. Step durations (Delay, Stall...) always use
	// real time.
	Now func() time.Time
	// DisableRecording starts the fake with recording off (see
	// SetRecording): for long benchmark runs whose memory must stay flat.
	DisableRecording bool
	// MaxBodyBytes bounds request bodies; zero means DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

// Server is a running fake provider. Its methods are safe for concurrent
// use; scripting while requests are in flight is fine.
type Server struct {
	url        string
	ln         net.Listener
	srv        *http.Server
	logger     *slog.Logger
	now        func() time.Time
	answerSize int
	maxBody    int64

	ctx       context.Context // cancelled by Close: ends every stall
	cancel    context.CancelFunc
	serveDone chan struct{}
	closeOnce sync.Once
	closeErr  error

	ids       atomic.Uint64 // answer ids: dec_<n>
	recording atomic.Bool
	bufs      sync.Pool // *bytes.Buffer for request bodies
	answers   sync.Pool // *[]byte for 200 answers

	mu          sync.Mutex
	closed      bool
	handlers    sync.WaitGroup // Add only under mu while !closed
	keys        map[string]*catalog
	queues      map[scope][]Step
	defaults    map[scope]Step
	catQueues   map[string][]Step
	catDefaults map[string]Step
	quotas      map[scope]*quotaState
	received    []*Received
	hits        map[string]int
	keyHits     map[hitKey]int
	cancels     []Received
	cancelNext  int
	notify      chan struct{} // closed and cleared on each hit or cancellation, when someone waits
	onRequest   func(Received)
}

// scope is a (key, model) pair; "" is a wildcard in scripts.
type scope struct{ key, model string }

type hitKey struct{ key, path string }

// catalog is one key's model list. It is never changed in place (copy on
// write), so a request may keep the pointer it saw on arrival.
type catalog struct {
	models []string
	set    map[string]struct{}
	json   []byte
}

func newCatalog(models []string) *catalog {
	c := &catalog{set: make(map[string]struct{}, len(models))}
	b := []byte(`{"object":"list","data":[`)
	for _, m := range models {
		if _, dup := c.set[m]; dup {
			continue
		}
		if len(c.models) > 0 {
			b = append(b, ',')
		}
		c.set[m] = struct{}{}
		c.models = append(c.models, m)
		b = append(b, `{"id":`...)
		b = appendJSONString(b, m)
		b = append(b, `,"object":"model","created":1700000000,"owned_by":"fakeprovider"}`...)
	}
	c.json = append(b, "]}\n"...)
	return c
}

func (c *catalog) has(model string) bool {
	_, ok := c.set[model]
	return ok
}

// Start listens on opts.Addr (default 127.0.0.1:0) and serves until Close.
func Start(opts Options) (*Server, error) {
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fake provider listen: %w", err)
	}
	s := &Server{
		url:         "http://" + ln.Addr().String(),
		ln:          ln,
		logger:      opts.Logger,
		now:         opts.Now,
		answerSize:  opts.AnswerSize,
		maxBody:     opts.MaxBodyBytes,
		serveDone:   make(chan struct{}),
		keys:        make(map[string]*catalog),
		queues:      make(map[scope][]Step),
		defaults:    make(map[scope]Step),
		catQueues:   make(map[string][]Step),
		catDefaults: make(map[string]Step),
		quotas:      make(map[scope]*quotaState),
		hits:        make(map[string]int),
		keyHits:     make(map[hitKey]int),
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.answerSize == 0 {
		s.answerSize = DefaultAnswerSize
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	s.recording.Store(!opts.DisableRecording)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	errLog := log.New(io.Discard, "", 0)
	if s.logger != nil {
		errLog = slog.NewLogLogger(s.logger.Handler(), slog.LevelDebug)
	}
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serveHTTP),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       60 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
		ErrorLog:          errLog,
	}
	go func() {
		defer close(s.serveDone)
		_ = s.srv.Serve(ln)
	}()
	return s, nil
}

// URL returns the base URL, http://127.0.0.1:PORT (no trailing slash);
// rotor appends /v1/models and /v1/decisions.
func (s *Server) URL() string { return s.url }

// Addr returns the listen address, 127.0.0.1:PORT.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server: stalled and delayed handlers end at once (their
// connections are dropped without an answer), answers being written get a
// short grace period, then every connection is closed. Close waits for all
// handlers to return, so no goroutine outlives it. It is idempotent.
func (s *Server) Close() error {
	s.closeOnce.Do(func() {
		s.cancel()
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		err := s.srv.Shutdown(ctx)
		cancel()
		if err != nil {
			_ = s.srv.Close()
		}
		<-s.serveDone
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		s.handlers.Wait()
		if err != nil && !errors.Is(err, context.DeadlineExceeded) {
			s.closeErr = fmt.Errorf("fake provider close: %w", err)
		}
	})
	return s.closeErr
}

// AddKey registers key as a valid API key (if it is not yet) and adds models
// to its catalog.
func (s *Server) AddKey(key string, models ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []string
	if c := s.keys[key]; c != nil {
		all = append(all, c.models...)
	}
	s.keys[key] = newCatalog(append(all, models...))
}

// SetCatalog registers key (if it is not yet) and replaces its catalog with
// exactly models; no models means an empty catalog.
func (s *Server) SetCatalog(key string, models ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[key] = newCatalog(models)
}

// RemoveKey revokes key: from now on it gets 401 like any unknown key.
func (s *Server) RemoveKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.keys, key)
}

// Catalog returns key's catalog and whether the key is known.
func (s *Server) Catalog(key string) ([]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.keys[key]
	if !ok {
		return nil, false
	}
	return append([]string(nil), c.models...), true
}

// Script queues steps for POST /v1/decisions with key and upstream model
// (the model field of the body, as rotor sends it). Either may be "" for
// any. Steps are consumed one per request, in order, after those already
// queued. A request takes the first non-empty queue of (key, model),
// (key, ""), ("", model), ("", ""); when all are empty, the first default
// (SetDefault) in the same order; else OK. Unknown keys always get 401:
// scripts apply only to known keys.
func (s *Server) Script(key, model string, steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := scope{key, model}
	s.queues[sc] = append(s.queues[sc], steps...)
}

// SetDefault sets the persistent behaviour for POST /v1/decisions with key
// and model ("" = any) once their queue is empty, instead of OK. The zero
// Step removes it.
func (s *Server) SetDefault(key, model string, step Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := scope{key, model}
	if step.run == nil {
		delete(s.defaults, sc)
		return
	}
	s.defaults[sc] = step
}

// ScriptCatalog queues steps for GET /v1/models with key ("" = any key),
// consumed like Script's. OK answers the key's catalog; SlowCatalog delays
// it.
func (s *Server) ScriptCatalog(key string, steps ...Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.catQueues[key] = append(s.catQueues[key], steps...)
}

// SetCatalogDefault sets the persistent behaviour for GET /v1/models with
// key ("" = any key). The zero Step removes it.
func (s *Server) SetCatalogDefault(key string, step Step) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if step.run == nil {
		delete(s.catDefaults, key)
		return
	}
	s.catDefaults[key] = step
}

// Remaining returns how many scripted one-shot steps (decisions and catalog)
// have not been consumed yet. Tests check it is 0 to catch unused scripts.
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, q := range s.queues {
		n += len(q)
	}
	for _, q := range s.catQueues {
		n += len(q)
	}
	return n
}

// Reset clears scripts, defaults, quotas, recorded requests, hit counters
// and pending cancellations. Keys, catalogs, the OnRequest hook and the
// recording setting stay.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.queues)
	clear(s.defaults)
	clear(s.catQueues)
	clear(s.catDefaults)
	clear(s.quotas)
	clear(s.hits)
	clear(s.keyHits)
	s.received = nil
	s.cancels = nil
	s.cancelNext = 0
}

// nextStep pops the step for a decisions request; mu must be held.
func (s *Server) nextStep(key, model string) (Step, bool) {
	if len(s.queues) == 0 && len(s.defaults) == 0 {
		return Step{}, false
	}
	scopes := [4]scope{{key, model}, {key, ""}, {"", model}, {"", ""}}
	for _, sc := range scopes {
		if q := s.queues[sc]; len(q) > 0 {
			st := q[0]
			if len(q) == 1 {
				delete(s.queues, sc)
			} else {
				q[0] = Step{}
				s.queues[sc] = q[1:]
			}
			return st, true
		}
	}
	for _, sc := range scopes {
		if st, ok := s.defaults[sc]; ok {
			return st, true
		}
	}
	return Step{}, false
}

// nextCatalogStep pops the step for a catalog request; mu must be held.
func (s *Server) nextCatalogStep(key string) (Step, bool) {
	for _, k := range [2]string{key, ""} {
		if q := s.catQueues[k]; len(q) > 0 {
			st := q[0]
			if len(q) == 1 {
				delete(s.catQueues, k)
			} else {
				s.catQueues[k] = q[1:]
			}
			return st, true
		}
	}
	for _, k := range [2]string{key, ""} {
		if st, ok := s.catDefaults[k]; ok {
			return st, true
		}
	}
	return Step{}, false
}

type endpoint int

const (
	epOther endpoint = iota
	epDecisions
	epModels
)

// exchange is one request being answered.
type exchange struct {
	s        *Server
	w        http.ResponseWriter
	r        *http.Request
	ep       endpoint
	key      string
	body     []byte
	req      decisionRequest
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
	}

	buf := s.getBuf()
	defer s.putBuf(buf)
	if cl := r.ContentLength; cl > 0 && cl <= s.maxBody {
		buf.Grow(int(cl))
	}
	_, readErr := buf.ReadFrom(io.LimitReader(r.Body, s.maxBody+1))
	tooLarge := int64(buf.Len()) > s.maxBody
	ex.body = buf.Bytes()
	if ex.ep == epDecisions && readErr == nil && !tooLarge {
		if err := json.Unmarshal(ex.body, &ex.req); err != nil {
			ex.parseErr = err
		} else if ex.req.Model != nil {
			ex.model = *ex.req.Model
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
	case ex.ep == epDecisions && r.Method != http.MethodPost,
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
	if ex.abort {
		panic(http.ErrAbortHandler) // drop the connection without an answer
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
		switch ex.ep {
		case epDecisions:
			step, _ = s.nextStep(ex.key, ex.model)
			ex.quota = len(s.quotas) > 0
		case epModels:
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
	}
}

func (ex *exchange) decide() {
	switch {
	case ex.parseErr != nil:
		ex.writeError(http.StatusBadRequest, errBadJSON, nil)
		return
	case ex.model == "":
		ex.writeError(http.StatusBadRequest, errNoModel, nil)
		return
	case !ex.cat.has(ex.model):
		ex.writeError(http.StatusNotFound, errModelNotFound(ex.model), nil)
		return
	}
	if e, ok := ex.req.validate(); !ok {
		ex.writeError(http.StatusBadRequest, e, nil)
		return
	}
	var extra http.Header
	if ex.quota {
		res := ex.s.takeQuota(ex.key, ex.model)
		if res.applies {
			extra = res.headers()
			if !res.ok {
				ex.writeError(http.StatusTooManyRequests, errRateLimit, extra)
				return
			}
		}
	}
	p := ex.s.getAnswerBuf()
	b := appendAnswer((*p)[:0], ex.s.ids.Add(1), ex.model, ex.s.now().Unix(), &ex.req, len(ex.body), ex.s.answerSize)
	ex.write(http.StatusOK, ctJSON, b, extra)
	*p = b[:0]
	ex.s.putAnswerBuf(p)
}

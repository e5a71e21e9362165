package fakeprovider

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Paths the fake serves, beside the OpenAI-compatible routes (PathChat,
// PathResponses, PathEmbeddings).
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
	// Listener, when set, is served instead of listening on Addr (rotor
	// fake-provider binds it with rotor's own loopback checks).
	Listener net.Listener
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
	// StreamEvents is the number of text deltas of a streamed answer (chat
	// or Responses with "stream": true) that no Stream step shapes; zero
	// means DefaultStreamEvents. Benchmarks use 200.
	StreamEvents int
}

// Server is a running fake provider. Its methods are safe for concurrent
// use; scripting while requests are in flight is fine.
type Server struct {
	url          string
	ln           net.Listener
	srv          *http.Server
	logger       *slog.Logger
	now          func() time.Time
	answerSize   int
	maxBody      int64
	streamEvents int

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

// IdleTimeout is how long the fake keeps an idle connection: 60 s, as many
// providers' load balancers do.
const IdleTimeout = 60 * time.Second

// Start listens on opts.Addr (default 127.0.0.1:0) and serves until Close.
func Start(opts Options) (*Server, error) {
	addr := opts.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln := opts.Listener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			return nil, fmt.Errorf("fake provider listen: %w", err)
		}
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
	s.streamEvents = opts.StreamEvents
	if s.streamEvents <= 0 {
		s.streamEvents = DefaultStreamEvents
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
		IdleTimeout:       IdleTimeout,
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

// Script queues steps for the POST routes (Decisions, chat completions,
// Responses, embeddings) with key and upstream model (the model field of
// the body, as rotor sends it). Either may be "" for
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

// SetDefault sets the persistent behaviour for the POST routes with key
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

// nextStep pops the step for a POST route's request; mu must be held.
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

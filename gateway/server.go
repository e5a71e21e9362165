package gateway

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/internal/names"
	"github.com/rotorhq/rotor/internal/secret"
)

// DirectClient is the client label of requests sent to a standalone
// runtime without a bridge.
const DirectClient = "runtime"

// Config configures a Server. Decisions and Status are required.
type Config struct {
	// Decisions serves POST /v1/decisions and POST /decisions; it answers
	// other methods itself.
	Decisions http.Handler
	// OpenAI serves the OpenAI-compatible routes (names.OpenAIRoutes);
	// it answers other methods itself. Nil leaves them 404.
	OpenAI http.Handler
	// Status returns the GET /v1/status document, encoded as JSON.
	Status func(ctx context.Context) any
	// Token is the runtime's bearer token (required by Handler).
	Token   secret.Value
	Metrics *Metrics
	Logger  *slog.Logger
	Clock   clock.Clock
	// Port and ExtraHosts feed the Host check; AllowedOrigins the CORS
	// check.
	Port           int
	ExtraHosts     []string
	AllowedOrigins []string
}

// Server is the runtime.
type Server struct {
	cfg Config
	mux *http.ServeMux
}

// New returns a runtime server.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics()
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux()}
	// Known paths take every method, so that another method answers 405
	// with Allow rather than the catch-all 404; the Decisions route
	// answers it itself.
	s.mux.Handle("/v1/decisions", cfg.Decisions)
	s.mux.Handle("/decisions", cfg.Decisions)
	if cfg.OpenAI != nil {
		for p := range names.OpenAIRoutes {
			s.mux.Handle(p, cfg.OpenAI)
		}
	}
	s.mux.Handle("/healthz", httpx.OnlyMethod(http.MethodGet, http.HandlerFunc(httpx.Healthz)))
	s.mux.Handle("/metrics", httpx.OnlyMethod(http.MethodGet, cfg.Metrics.Handler()))
	s.mux.Handle("/v1/status", httpx.OnlyMethod(http.MethodGet, http.HandlerFunc(s.handleStatus)))
	s.mux.HandleFunc("/", notFound)
	return s
}

func notFound(w http.ResponseWriter, r *http.Request) {
	httpx.WriteError(w, httpx.NewError(httpx.CodeNotFound))
}

// InProcess is the runtime for an in-process bridge: no guard and no
// logging of its own (the bridge does both). It trusts the caller the
// bridge put in the request's context (httpx.WithCaller), so it must only
// ever be reached through the bridge. Never serve it on a socket.
func (s *Server) InProcess() http.Handler { return http.HandlerFunc(s.route) }

// route serves a request by its path as sent, as the bridge does: a path
// that is not one of the runtime's own byte for byte (a doubled slash, a
// dot segment) is 404 not_found, never the mux's redirect to the cleaned
// path nor its plain-text 404 (a CONNECT).
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	h, pattern := s.mux.Handler(r)
	switch {
	case r.Method == http.MethodConnect:
		h = http.HandlerFunc(notFound)
	case s.cfg.OpenAI != nil && pattern == "/v1/responses/" && strings.HasPrefix(r.URL.Path, pattern):
		// The stored responses, under any path the bridge forwards.
		h = s.cfg.OpenAI
	case pattern != r.URL.Path:
		h = http.HandlerFunc(notFound)
	}
	h.ServeHTTP(w, r)
}

// Handler is the runtime as a standalone server: request ids, the guard
// with the runtime token, the access log.
func (s *Server) Handler() http.Handler {
	g := &httpx.Guard{
		Port: s.cfg.Port, ExtraHosts: s.cfg.ExtraHosts, AllowedOrigins: s.cfg.AllowedOrigins,
		Open: map[string]bool{"/healthz": true},
		Authenticate: func(_ *http.Request, tok secret.Value) (string, bool, error) {
			return DirectClient, !s.cfg.Token.IsZero() && tok.Equal(s.cfg.Token), nil
		},
	}
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The bridge in front sends its caller's label; only holders of
		// the runtime token get this far.
		client := r.Header.Get(httpx.ClientHeader)
		if !httpx.SafeLabel(client) {
			s.route(w, r.WithContext(httpx.WithCaller(r.Context(), httpx.Caller{Label: DirectClient})))
			return
		}
		// A bridge: it gets what this request's access line says, for
		// its own (httpx.AccessHeader).
		ctx := httpx.WithCaller(r.Context(), httpx.Caller{Label: client})
		aw := &accessWriter{ResponseWriter: w, info: httpx.AccessInfoFrom(ctx)}
		func() {
			// A broken stream aborts its answer (http.ErrAbortHandler);
			// to a bridge it ends cleanly instead, so that the trailer
			// carries the record, marked Aborted: the bridge aborts its
			// own answer to the caller.
			defer func() {
				if p := recover(); p == http.ErrAbortHandler {
					aw.info.Aborted = true
				} else if p != nil {
					panic(p)
				}
			}()
			s.route(aw, r.WithContext(ctx))
		}()
		w.Header().Set(http.TrailerPrefix+httpx.AccessHeader, aw.info.Encode())
	})
	al := httpx.AccessLog{Server: "runtime", Logger: s.cfg.Logger, Metrics: s.cfg.Metrics, Clock: s.cfg.Clock, TrustRequestID: s.fromBridge}
	return al.Wrap(g.Wrap(inner))
}

// fromBridge reports whether r comes from a bridge in front: it sends the
// runtime token and its caller's label. Only then is its X-Request-ID kept,
// so that the two access lines share one id; a caller without the token
// (a 401) or one calling the runtime directly gets an id of the runtime's
// own, not one it chose.
func (s *Server) fromBridge(r *http.Request) bool {
	tok, ok := httpx.Bearer(r)
	return ok && !s.cfg.Token.IsZero() && tok.Equal(s.cfg.Token) && httpx.SafeLabel(r.Header.Get(httpx.ClientHeader))
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(s.cfg.Status(r.Context()))
}

// accessWriter sends the request's access record as a header when the
// answer starts; the handler adds it again as a trailer at the end, which
// only a chunked answer (a stream) carries.
type accessWriter struct {
	http.ResponseWriter
	info    *httpx.AccessInfo
	started bool
}

func (a *accessWriter) start() {
	if !a.started {
		a.started = true
		a.Header().Set(httpx.AccessHeader, a.info.Encode())
	}
}

func (a *accessWriter) WriteHeader(code int) {
	a.start()
	a.ResponseWriter.WriteHeader(code)
}

func (a *accessWriter) Write(b []byte) (int, error) {
	a.start()
	return a.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (flushes,
// write deadlines).
func (a *accessWriter) Unwrap() http.ResponseWriter { return a.ResponseWriter }

// Flush implements http.Flusher.
func (a *accessWriter) Flush() {
	a.start()
	if f, ok := a.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

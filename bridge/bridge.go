package bridge

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/internal/names"
	"github.com/rotorhq/rotor/internal/secret"
)

// MaxBody is the largest request body the bridge accepts (64 MiB).
const MaxBody = 64 << 20

// Tokens is what the bridge needs from the token store.
type Tokens interface {
	// LookupToken returns the label of the token whose SHA-256 is hash,
	// as the database has it now.
	LookupToken(ctx context.Context, hash [32]byte) (label string, ok bool, err error)
	// LookupTokenCached may answer from a list loaded a moment ago; the
	// in-process runtime re-checks the token at admission.
	LookupTokenCached(ctx context.Context, hash [32]byte) (label string, ok bool, err error)
	// TouchTokens records last-use times, coalesced by the bridge.
	TouchTokens(ctx context.Context, used map[string]time.Time) error
}

// Config configures a bridge. Tokens and one of Runtime or RuntimeURL are
// required.
type Config struct {
	// Runtime is the in-process runtime. It trusts the caller the bridge
	// puts in the request's context (httpx.WithCaller), so it must only
	// ever be reached through the bridge. With it, Decisions requests are
	// authenticated against the cached token list and the runtime's
	// admission re-checks the token (Caller.CheckToken) in the ledger
	// transaction, so a token revoked elsewhere still stops at its next
	// request; every other route checks the database.
	Runtime http.Handler
	// RuntimeURL is a standalone runtime; RuntimeToken authenticates to it.
	RuntimeURL   *url.URL
	RuntimeToken secret.Value
	Tokens       Tokens
	// Port, ExtraHosts and AllowedOrigins feed the guard.
	Port           int
	ExtraHosts     []string
	AllowedOrigins []string
	Logger         *slog.Logger
	// Metrics counts answered requests (may be nil); Clock times them and
	// stamps last-use times.
	Metrics httpx.RequestMetrics
	Clock   clock.Clock
	// TouchEvery is how often last-use times are written (default 30s).
	TouchEvery time.Duration
	// WriteIdle, with a standalone runtime, is how long one write to the
	// caller may block: the bridge pushes its connection's write deadline
	// out by it before each write and flush of a forwarded answer, since
	// the server's write timeout, set when the request arrived, fits the
	// Decisions deadline and would cut a longer answer (a stream, a long
	// generation) the runtime is still within its own deadlines to send.
	// Zero keeps the server's write timeout.
	WriteIdle time.Duration
	// Reload, when set, serves POST /v1/admin/reload: it applies the
	// configuration file again and returns the JSON answer, or an
	// *httpx.Error saying why the running configuration was kept.
	Reload func(ctx context.Context) (any, error)
	// AdminToken returns the SHA-256 of the one client token that may
	// call the admin routes: the home's bridge.token (label default),
	// read at each call, so that a token replaced by 'rotor init --force'
	// takes over without a restart. Nil: nobody may.
	AdminToken func() ([32]byte, error)
}

// AdminReloadPath is the route that reloads the configuration.
const AdminReloadPath = "/v1/admin/reload"

// Bridge is the bridge's handler and its background token bookkeeping.
type Bridge struct {
	cfg     Config
	forward http.Handler

	mu   sync.Mutex
	used map[string]time.Time
	stop chan struct{}
	done chan struct{}
}

// New returns a bridge and starts its last-use writer; Close stops it.
func New(cfg Config) *Bridge {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TouchEvery <= 0 {
		cfg.TouchEvery = 30 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	b := &Bridge{cfg: cfg, used: map[string]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	if cfg.RuntimeURL != nil {
		b.forward = b.proxy()
	} else {
		b.forward = cfg.Runtime
	}
	go b.touchLoop()
	return b
}

// forwarded are the routes the bridge forwards after authentication, with
// the method each takes.
var forwarded = map[string]string{"/v1/decisions": http.MethodPost, "/v1/status": http.MethodGet, "/metrics": http.MethodGet}

// Handler returns the bridge as a complete server: panic recovery, request
// ids and the access log, the guard, then forwarding.
func (b *Bridge) Handler() http.Handler {
	g := &httpx.Guard{
		Port: b.cfg.Port, ExtraHosts: b.cfg.ExtraHosts, AllowedOrigins: b.cfg.AllowedOrigins,
		Open:         map[string]bool{"/healthz": true},
		Authenticate: b.authenticate,
	}
	al := httpx.AccessLog{Server: "bridge", Logger: b.cfg.Logger, Metrics: b.cfg.Metrics, Clock: b.cfg.Clock}
	return al.Wrap(g.Wrap(http.HandlerFunc(b.serve)))
}

func (b *Bridge) authenticate(r *http.Request, tok secret.Value) (string, bool, error) {
	lookup := b.cfg.Tokens.LookupToken
	if b.cfg.RuntimeURL == nil && r.Method == http.MethodPost && (r.URL.Path == "/v1/decisions" || names.OpenAIMethods(r.URL.Path) == http.MethodPost) {
		lookup = b.cfg.Tokens.LookupTokenCached
	}
	label, ok, err := lookup(r.Context(), tok.Hash())
	if err != nil || !ok {
		return "", ok, err
	}
	b.mu.Lock()
	b.used[label] = b.cfg.Clock.Now()
	b.mu.Unlock()
	return label, true, nil
}

func (b *Bridge) serve(w http.ResponseWriter, r *http.Request) {
	tok, hasToken := httpx.Bearer(r)
	method, known := forwarded[r.URL.Path]
	if m := names.OpenAIMethods(r.URL.Path); m != "" {
		method, known = m, true
	}
	switch {
	case r.URL.Path == "/healthz":
		if !httpx.MethodAllowed(r.Method, http.MethodGet) {
			httpx.MethodNotAllowed(w, http.MethodGet)
			return
		}
		httpx.Healthz(w, r)
		return
	case r.URL.Path == AdminReloadPath && b.cfg.Reload != nil:
		b.handleReload(w, r, tok, hasToken)
		return
	case !known:
		httpx.WriteError(w, httpx.NewError(httpx.CodeNotFound))
		return
	case !slices.ContainsFunc(strings.Split(method, ", "), func(m string) bool { return httpx.MethodAllowed(r.Method, m) }):
		httpx.MethodNotAllowed(w, method)
		return
	case r.ContentLength > MaxBody:
		// Refused before any byte of the body is read (no 100 Continue),
		// whichever runtime is behind the bridge.
		httpx.RefuseTooLarge(w, r, MaxBody)
		return
	}
	// The request is the bridge's to change: it is forwarded as it is,
	// without a copy.
	h := r.Header
	// Nothing the caller sent may claim an identity downstream.
	for k := range h {
		switch {
		case k == "Authorization", k == "Proxy-Authorization", k == "Cookie",
			// The bridge has checked the browser headers; the runtime
			// behind it sees a plain local call.
			k == "Origin", k == "Referer", strings.HasPrefix(k, "Sec-Fetch-"),
			strings.HasPrefix(k, "X-Rotor-") && k != "X-Rotor-Region":
			delete(h, k)
		}
	}
	if b.cfg.RuntimeURL == nil && hasToken {
		// In-process, the caller travels in the context, with the token
		// for admission to re-check.
		c := httpx.CallerFrom(r.Context())
		c.TokenHash, c.CheckToken = tok.Hash(), true
		r = r.WithContext(httpx.WithCaller(r.Context(), c))
	}
	h.Set("X-Request-ID", httpx.RequestID(r.Context()))
	r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
	if b.cfg.RuntimeURL != nil && b.cfg.WriteIdle > 0 {
		// The runtime bounds the answer by its deadlines; the bridge
		// bounds each write to a caller that stopped reading.
		w = &idleWriter{ResponseWriter: w, rc: http.NewResponseController(w), idle: b.cfg.WriteIdle}
	}
	b.forward.ServeHTTP(w, r)
	if b.cfg.RuntimeURL != nil {
		// The runtime's closing record (httpx.AccessHeader) came as a
		// trailer: it goes into the access line, not to the caller.
		k := http.TrailerPrefix + httpx.AccessHeader
		info := httpx.AccessInfoFrom(r.Context())
		if v := w.Header().Get(k); v != "" {
			info.Merge(v)
		}
		w.Header().Del(k)
		if info.Aborted {
			// The runtime's answer broke off (a cut stream): the caller
			// gets it without the end of its body, as in-process.
			panic(http.ErrAbortHandler)
		}
	}
}

// handleReload serves POST /v1/admin/reload for the home's default token
// only: any other valid token gets 403 admin_only.
func (b *Bridge) handleReload(w http.ResponseWriter, r *http.Request, tok secret.Value, hasToken bool) {
	if !httpx.MethodAllowed(r.Method, http.MethodPost) {
		httpx.MethodNotAllowed(w, http.MethodPost)
		return
	}
	var admin [32]byte
	if b.cfg.AdminToken != nil {
		var err error
		if admin, err = b.cfg.AdminToken(); err != nil {
			b.cfg.Logger.Warn("cannot read the default token for an admin route", "request_id", httpx.RequestID(r.Context()), "error", err)
			admin = [32]byte{}
		}
	}
	h := tok.Hash()
	if !hasToken || admin == ([32]byte{}) || subtle.ConstantTimeCompare(h[:], admin[:]) != 1 {
		httpx.AccessInfoFrom(r.Context()).Code = httpx.CodeAdminOnly
		httpx.WriteError(w, httpx.NewError(httpx.CodeAdminOnly))
		return
	}
	out, err := b.cfg.Reload(r.Context())
	if err != nil {
		e, ok := errors.AsType[*httpx.Error](err)
		if !ok {
			b.cfg.Logger.Error("reload failed", "request_id", httpx.RequestID(r.Context()), "error", err)
			e = httpx.NewError(httpx.CodeInternal)
		}
		httpx.AccessInfoFrom(r.Context()).Code = e.Code
		httpx.WriteError(w, e)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// errRuntimeRefusedToken is a standalone runtime's 401: the bridge's
// runtime token is not the runtime's.
var errRuntimeRefusedToken = errors.New("the runtime refused the runtime token")

// proxy forwards to a standalone runtime with the runtime's token.
func (b *Bridge) proxy() http.Handler {
	target := b.cfg.RuntimeURL
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.MaxIdleConnsPerHost = 256
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.Out.Header.Set("Authorization", "Bearer "+b.cfg.RuntimeToken.Reveal())
			pr.Out.Header.Del("X-Forwarded-For")
			// The one hop where the caller travels on the wire. Set here,
			// after the proxy removed the hop-by-hop headers: a caller's
			// "Connection: X-Rotor-Client, X-Request-ID" would otherwise
			// strip them, and its rows would be the runtime's.
			pr.Out.Header.Set(httpx.ClientHeader, httpx.CallerFrom(pr.In.Context()).Label)
			pr.Out.Header.Set("X-Request-ID", httpx.RequestID(pr.In.Context()))
		},
		Transport: tr,
		// Stream events reach the caller as they arrive.
		FlushInterval: -1,
		// Its own complaints (a body copy that broke) go to rotor's log,
		// not to stderr past it.
		ErrorLog: slog.NewLogLogger(b.cfg.Logger.Handler(), slog.LevelWarn),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, errRuntimeRefusedToken) {
				// Nothing ran: the runtime refused before reading the body.
				b.cfg.Logger.Warn("the runtime refused the bridge's runtime token; ROTOR_RUNTIME_TOKEN or runtime.token_file must match the runtime's",
					"request_id", httpx.RequestID(r.Context()), "runtime", target.Redacted())
				httpx.AccessInfoFrom(r.Context()).Code = httpx.CodeRuntimeUnavailable
				httpx.WriteError(w, httpx.NewError(httpx.CodeRuntimeUnavailable))
				return
			}
			if errors.Is(context.Cause(r.Context()), httpx.ErrServerShutdown) {
				// The bridge's stop cut the request after its grace, as
				// the in-process route answers it; the runtime may have
				// made a provider call.
				e := httpx.NewError(httpx.CodeServerShutdown)
				e.NeverRetry = !httpx.NotSent(err)
				httpx.AccessInfoFrom(r.Context()).Code = e.Code
				httpx.WriteError(w, e)
				return
			}
			if r.Context().Err() != nil {
				httpx.WriteError(w, httpx.NewError(httpx.CodeClientClosedRequest))
				return
			}
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				// A chunked body past the cap, cut while the proxy
				// copied it: the caller's to fix, as in-process.
				httpx.AccessInfoFrom(r.Context()).Code = httpx.CodeRequestTooLarge
				httpx.WriteError(w, httpx.NewError(httpx.CodeRequestTooLarge))
				return
			}
			b.cfg.Logger.Warn("runtime unreachable", "request_id", httpx.RequestID(r.Context()), "runtime", target.Redacted())
			e := httpx.NewError(httpx.CodeRuntimeUnavailable)
			// Lost after the request went out, the runtime may have made
			// a provider call: a client retry could pay twice.
			e.NeverRetry = !httpx.NotSent(err)
			httpx.WriteError(w, e)
		},
		ModifyResponse: func(resp *http.Response) error {
			if resp.StatusCode == http.StatusUnauthorized {
				// Only the runtime's guard answers 401 (a provider's 401
				// rejects a credential, never passes through): it refused
				// the runtime token, not the caller's client token, which
				// the bridge already accepted.
				return errRuntimeRefusedToken
			}
			// What the runtime learned about the request, for the
			// bridge's access line; never for the caller.
			if v := resp.Header.Get(httpx.AccessHeader); v != "" {
				httpx.AccessInfoFrom(resp.Request.Context()).Merge(v)
			}
			resp.Header.Del(httpx.AccessHeader) // empty ones too
			// The bridge already set these on its answer; keep one copy.
			for _, h := range []string{"X-Content-Type-Options", "Content-Security-Policy", "Cache-Control", "X-Request-ID"} {
				resp.Header.Del(h)
			}
			return nil
		},
	}
}

func (b *Bridge) touchLoop() {
	defer close(b.done)
	t := time.NewTicker(b.cfg.TouchEvery)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			b.flush()
		case <-b.stop:
			b.flush()
			return
		}
	}
}

// flush writes the coalesced last-use times, off the request path.
func (b *Bridge) flush() {
	b.mu.Lock()
	used := b.used
	b.used = map[string]time.Time{}
	b.mu.Unlock()
	if len(used) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := b.cfg.Tokens.TouchTokens(ctx, used); err != nil {
		b.cfg.Logger.Warn("could not record token use", "error", err)
	}
}

// Close writes pending last-use times and stops the writer.
func (b *Bridge) Close() {
	select {
	case <-b.stop:
	default:
		close(b.stop)
	}
	<-b.done
}

// idleWriter pushes the connection's write deadline out by idle before
// each write and flush: an answer may take as long as the runtime's
// deadlines allow, while a write the caller does not take within idle
// fails, so a caller that stopped reading does not hold the bridge.
type idleWriter struct {
	http.ResponseWriter
	rc   *http.ResponseController
	idle time.Duration
}

func (w *idleWriter) push() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.idle)) }

func (w *idleWriter) WriteHeader(code int) {
	w.push()
	w.ResponseWriter.WriteHeader(code)
}

func (w *idleWriter) Write(p []byte) (int, error) {
	w.push()
	return w.ResponseWriter.Write(p)
}

// FlushError is what http.ResponseController (the reverse proxy's
// flushes) calls.
func (w *idleWriter) FlushError() error {
	w.push()
	return w.rc.Flush()
}

func (w *idleWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

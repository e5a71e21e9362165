package httpx

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
)

// AccessInfo is what the layers of one request learned about it, for its
// access log line: the caller (WithCaller) and what the route decided.
type AccessInfo struct {
	Client              string
	Pool, Model, Region string
	Credential          string
	CredentialDigest    string
	Attempts            int
	Code                string
	Recorded            bool
	// Ran says a provider call may have run the request: one that did
	// not end in a classified rejection (401, 403, a classified 429, an
	// unsupported endpoint), which no provider bills.
	Ran bool
}

type accessKey struct{}

// WithAccessInfo returns ctx carrying a fresh *AccessInfo for the layers
// inside to fill in.
func WithAccessInfo(ctx context.Context) (context.Context, *AccessInfo) {
	i := &AccessInfo{}
	return context.WithValue(ctx, accessKey{}, i), i
}

// AccessInfoFrom returns the request's *AccessInfo, or a fresh one nobody
// reads when ctx has none.
func AccessInfoFrom(ctx context.Context) *AccessInfo {
	if i, ok := ctx.Value(accessKey{}).(*AccessInfo); ok {
		return i
	}
	return &AccessInfo{}
}

// RequestMetrics counts answered requests.
type RequestMetrics interface {
	Request(server, route string, status int, code string, d time.Duration)
}

// Routes are the paths rotor's servers answer: the access log and the
// request metrics name them, and count any other path as "other".
var Routes = map[string]bool{"/v1/decisions": true, "/decisions": true, "/healthz": true, "/metrics": true, "/v1/status": true}

// quietRoutes are counted but not logged: probes and scrapes.
var quietRoutes = map[string]bool{"/healthz": true, "/metrics": true}

// AccessLog is the outer layers every rotor server shares: panic recovery,
// request ids and the access log (one line per request, never a key or
// token).
type AccessLog struct {
	// Server names the server in log lines and metrics ("bridge",
	// "runtime").
	Server string
	Logger *slog.Logger
	// Metrics may be nil.
	Metrics RequestMetrics
	Clock   clock.Clock
	// TrustRequestID keeps a well-formed incoming X-Request-ID (a server
	// behind an authenticated bridge).
	TrustRequestID bool
}

// Wrap returns h inside the outer layers.
func (a AccessLog) Wrap(h http.Handler) http.Handler {
	logged := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := a.Clock.Now()
		ctx, info := WithAccessInfo(r.Context())
		rec := &StatusRecorder{ResponseWriter: w}
		h.ServeHTTP(rec, r.WithContext(ctx))
		d := a.Clock.Now().Sub(start)
		status := rec.Status
		if status == 0 {
			status = http.StatusOK
		}
		route := r.URL.Path
		if !Routes[route] {
			route = "other"
		}
		if info.Code == "" {
			// An answer refused before the route (the guard's 401 and
			// 403s) names its code only in what WriteError wrote.
			info.Code = rec.Code
		}
		if a.Metrics != nil {
			a.Metrics.Request(a.Server, route, status, info.Code, d)
		}
		if quietRoutes[route] {
			return
		}
		a.Logger.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("server", a.Server),
			slog.String("request_id", RequestID(r.Context())),
			slog.String("method", r.Method),
			slog.String("route", route),
			slog.Int("status", status),
			slog.String("code", info.Code),
			slog.String("pool", info.Pool),
			slog.String("model", info.Model),
			slog.String("credential", info.Credential),
			slog.String("credential_digest", info.CredentialDigest),
			slog.Int("attempts", info.Attempts),
			slog.String("client", info.Client),
			slog.Int64("duration_ms", d.Milliseconds()),
		)
	})
	return Recover(RequestIDs(logged, a.TrustRequestID), a.Logger)
}

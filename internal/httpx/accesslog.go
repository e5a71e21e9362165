package httpx

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/names"
)

// AccessInfo is what the layers of one request learned about it, for its
// access log line: the caller (WithCaller) and what the route decided.
type AccessInfo struct {
	Client string
	// Operation is the route's ledger operation (decisions,
	// chat.completions, responses, embeddings).
	Operation           string
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
	// Tokens are the counts the request's usage row recorded (Recorded);
	// nil where unknown.
	InputTokens, OutputTokens, TotalTokens *int64
	// Aborted: the answer broke off (a cut stream) and must reach the
	// caller without the end of its body. A standalone runtime ends its
	// body to a bridge cleanly, so that the trailer carries this record,
	// and the bridge aborts its own answer.
	Aborted bool
}

// AccessHeader carries a standalone runtime's AccessInfo to the bridge in
// front of it, as a header when the answer starts and again as a trailer
// when it ends (a stream's code and tokens are known only then). The
// runtime sends it only to holders of its token that name a client (a
// bridge); the bridge reads it into its own access line and removes it.
const AccessHeader = "X-Rotor-Access"

// Encode is i as an AccessHeader value: URL query syntax, nothing secret
// (labels, names, counts).
func (i *AccessInfo) Encode() string {
	v := url.Values{}
	for k, s := range map[string]string{"op": i.Operation, "pool": i.Pool, "model": i.Model, "region": i.Region,
		"cred": i.Credential, "digest": i.CredentialDigest, "code": i.Code} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if i.Attempts > 0 {
		v.Set("attempts", strconv.Itoa(i.Attempts))
	}
	if i.Recorded {
		v.Set("recorded", "1")
	}
	if i.Aborted {
		v.Set("aborted", "1")
	}
	for k, n := range map[string]*int64{"in": i.InputTokens, "out": i.OutputTokens, "total": i.TotalTokens} {
		if n != nil {
			v.Set(k, strconv.FormatInt(*n, 10))
		}
	}
	return v.Encode()
}

// Merge fills i from an AccessHeader value; what it lacks or cannot read
// is left as it is.
func (i *AccessInfo) Merge(s string) {
	v, err := url.ParseQuery(s)
	if err != nil {
		return
	}
	for k, dst := range map[string]*string{"op": &i.Operation, "pool": &i.Pool, "model": &i.Model, "region": &i.Region,
		"cred": &i.Credential, "digest": &i.CredentialDigest, "code": &i.Code} {
		if x := v.Get(k); x != "" {
			*dst = x
		}
	}
	if n, err := strconv.Atoi(v.Get("attempts")); err == nil && n > 0 {
		i.Attempts = n
	}
	if v.Get("recorded") == "1" {
		i.Recorded = true
	}
	if v.Get("aborted") == "1" {
		i.Aborted = true
	}
	for k, dst := range map[string]**int64{"in": &i.InputTokens, "out": &i.OutputTokens, "total": &i.TotalTokens} {
		if n, err := strconv.ParseInt(v.Get(k), 10, 64); err == nil {
			*dst = &n
		}
	}
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

// tokenAttr is a token count of the request's usage row: "unknown" when
// the row could not read it, and no attribute at all without a row.
func tokenAttr(key string, n *int64, recorded bool) slog.Attr {
	switch {
	case n != nil:
		return slog.Int64(key, *n)
	case recorded:
		return slog.String(key, "unknown")
	}
	return slog.Attr{}
}

// RequestMetrics counts answered requests.
type RequestMetrics interface {
	Request(server, route string, status int, code string, d time.Duration)
}

// Routes are rotor's own paths; with the OpenAI routes (names.OpenAIRoutes)
// they are what the access log and the request metrics name (routeLabel).
var Routes = map[string]bool{"/v1/decisions": true, "/decisions": true, "/healthz": true, "/metrics": true, "/v1/status": true, "/v1/admin/reload": true}

// routeLabel is the route of path in the access log and the request
// metrics: the path of a route rotor answers, "/v1/responses/{id}" for the
// stored responses (an id is no label value), else "other".
func routeLabel(path string) string {
	if _, openAI := names.OpenAIRoutes[path]; Routes[path] || openAI && !strings.HasSuffix(path, "/") {
		return path
	}
	if names.OpenAIMethods(path) != "" {
		return "/v1/responses/{id}"
	}
	return "other"
}

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
	// TrustRequestID, when set, keeps a well-formed incoming X-Request-ID
	// of a request it says yes to (a bridge in front, authenticated): it
	// runs before the guard, so it must check the credentials itself.
	TrustRequestID func(*http.Request) bool
}

// Wrap returns h inside the outer layers.
func (a AccessLog) Wrap(h http.Handler) http.Handler {
	logged := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := a.Clock.Now()
		ctx, info := WithAccessInfo(r.Context())
		rec := &StatusRecorder{ResponseWriter: w}
		defer func() {
			// A handler that aborts its answer (http.ErrAbortHandler: a
			// broken stream ends without the chunked body's end, so
			// the caller reads it as cut) is still logged and counted;
			// any other panic is Recover's, a 500.
			p := recover()
			if p == nil || p == http.ErrAbortHandler {
				a.record(r, rec, info, a.Clock.Now().Sub(start))
			}
			if p != nil {
				panic(p)
			}
		}()
		h.ServeHTTP(rec, r.WithContext(ctx))
	})
	// Recover inside RequestIDs: its line names the id the 500 carries.
	return RequestIDs(Recover(logged, a.Logger), a.TrustRequestID)
}

// record counts one answered request and logs its access line.
func (a AccessLog) record(r *http.Request, rec *StatusRecorder, info *AccessInfo, d time.Duration) {
	status := rec.Status
	if status == 0 {
		status = http.StatusOK
	}
	route := routeLabel(r.URL.Path)
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
	attrs := []slog.Attr{
		slog.String("server", a.Server),
		slog.String("request_id", RequestID(r.Context())),
		slog.String("method", r.Method),
		slog.String("route", route),
		slog.String("operation", info.Operation),
		slog.Int("status", status),
		slog.String("code", info.Code),
		slog.String("pool", info.Pool),
		slog.String("model", info.Model),
		slog.String("credential", info.Credential),
		slog.String("credential_digest", info.CredentialDigest),
		slog.Int("attempts", info.Attempts),
		slog.String("client", info.Client),
		tokenAttr("input_tokens", info.InputTokens, info.Recorded),
		tokenAttr("output_tokens", info.OutputTokens, info.Recorded),
		tokenAttr("total_tokens", info.TotalTokens, info.Recorded),
		slog.Int64("duration_ms", d.Milliseconds()),
	}
	a.Logger.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
}

package httpx

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rotorhq/rotor/internal/secret"
)

// Guard is the front door of the bridge and the runtime: Host check
// against DNS rebinding, browser Origin check and CORS for allowed origins,
// and bearer token authentication.
type Guard struct {
	// Port is the port the server listens on; Host must name it.
	Port int
	// ExtraHosts are further host names or addresses accepted in Host
	// (the listen address when it is not loopback). An unspecified
	// address (0.0.0.0 or ::: the server listens on every address)
	// accepts any IP address: a client names the machine by whichever
	// of its addresses it reaches, and DNS rebinding needs a name, which
	// must still be loopback or listed.
	ExtraHosts []string
	// AllowedOrigins get CORS headers; any other browser origin is
	// refused.
	AllowedOrigins []string
	// Authenticate checks a bearer token for request r and returns the
	// caller's label.
	Authenticate func(r *http.Request, token secret.Value) (label string, ok bool, err error)
	// Open lists paths served without a token (still Host-checked).
	Open map[string]bool
}

// LoopbackHost reports whether h (no port) is a loopback name or address.
func LoopbackHost(h string) bool {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(h, "[]"))
	return ip != nil && ip.IsLoopback()
}

// ValidHost reports whether a Host header names this server: a loopback
// name or address (or an extra host) with the server's port.
func (g *Guard) ValidHost(host string) bool {
	if host == "" || len(host) > 255 {
		return false
	}
	h, p, err := net.SplitHostPort(host)
	if err != nil {
		// No port: only valid for a server on port 80.
		h, p = host, "80"
	}
	if port, err := strconv.Atoi(p); err != nil || port != g.Port {
		return false
	}
	if LoopbackHost(h) {
		return true
	}
	h = strings.Trim(h, "[]")
	for _, x := range g.ExtraHosts {
		x = strings.Trim(x, "[]")
		if strings.EqualFold(h, x) {
			return true
		}
		if ip := net.ParseIP(x); ip != nil && ip.IsUnspecified() && net.ParseIP(h) != nil {
			return true
		}
	}
	return false
}

func (g *Guard) originAllowed(origin string) bool {
	for _, o := range g.AllowedOrigins {
		if strings.EqualFold(strings.TrimRight(o, "/"), origin) {
			return true
		}
	}
	return false
}

func originOf(ref string) string {
	u, err := url.Parse(ref)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ref
	}
	return u.Scheme + "://" + u.Host
}

// SecurityHeaders are sent on every answer.
func SecurityHeaders(h http.Header) {
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
	h.Set("Cache-Control", "no-store")
}

// Wrap returns next behind the guard. The Host check comes first, before
// the body is read or the token looked at; then the browser check; then
// the token.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		SecurityHeaders(w.Header())
		if r.ContentLength != 0 && strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
			body := &readSeen{ReadCloser: r.Body}
			r.Body = body
			defer func() {
				if !body.seen.Load() {
					// Answered without reading the body: no 100 Continue
					// went out, so the client does not send it, and the
					// answer says Connection: close. net/http would still
					// wait for that body after the answer (to reuse the
					// connection) until the read timeout; close now.
					_ = http.NewResponseController(w).SetReadDeadline(time.Now())
				}
			}()
		}
		if len(r.TransferEncoding) > 0 {
			// net/http serves a request that carries both Content-Length
			// and Transfer-Encoding by the latter and silently drops the
			// former, so such a request cannot be told apart here. RFC
			// 9112 section 6.1: the server must close the connection after
			// answering it, so that nothing smuggled behind it is served.
			w.Header().Set("Connection", "close")
		}
		if !g.ValidHost(r.Host) {
			// Do not read a body we will not use.
			w.Header().Set("Connection", "close")
			WriteError(w, NewError(CodeHostNotAllowed))
			return
		}
		origin := r.Header.Get("Origin")
		if origin == "" && r.Header.Get("Referer") != "" {
			origin = originOf(r.Header.Get("Referer"))
		}
		fetchSite := r.Header.Get("Sec-Fetch-Site")
		switch {
		case origin != "":
			if !g.originAllowed(origin) {
				WriteError(w, NewError(CodeOriginNotAllowed))
				return
			}
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Add("Vary", "Origin")
			h.Set("Access-Control-Expose-Headers", "Retry-After, retry-after-ms, X-Request-ID, x-should-retry")
			if r.Method == http.MethodOptions {
				h.Set("Access-Control-Allow-Methods", "POST, GET, OPTIONS")
				h.Set("Access-Control-Allow-Headers", allowHeaders(r.Header.Get("Access-Control-Request-Headers")))
				h.Add("Vary", "Access-Control-Request-Headers")
				h.Set("Access-Control-Max-Age", "600")
				w.WriteHeader(http.StatusNoContent)
				return
			}
		case fetchSite != "" && fetchSite != "none" && fetchSite != "same-origin":
			// A browser request whose origin we cannot see.
			WriteError(w, NewError(CodeOriginNotAllowed))
			return
		case r.Method == http.MethodOptions:
			WriteError(w, NewError(CodeOriginNotAllowed))
			return
		}
		if g.Open[r.URL.Path] && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
			next.ServeHTTP(w, r)
			return
		}
		tok, ok := Bearer(r)
		if !ok {
			WriteError(w, NewError(CodeInvalidToken))
			return
		}
		label, ok, err := g.Authenticate(r, tok)
		if err != nil {
			WriteError(w, NewError(CodeLedgerUnavailable).WithRetryAfter(1e9))
			return
		}
		if !ok {
			WriteError(w, NewError(CodeInvalidToken))
			return
		}
		next.ServeHTTP(w, r.WithContext(WithCaller(r.Context(), Caller{Label: label})))
	})
}

// readSeen records whether a request body was ever read.
type readSeen struct {
	io.ReadCloser
	seen atomic.Bool
}

func (b *readSeen) Read(p []byte) (int, error) {
	b.seen.Store(true)
	return b.ReadCloser.Read(p)
}

// Bearer reads "Authorization: Bearer <token>". Only that exact scheme and
// only that header: never a query parameter.
func Bearer(r *http.Request) (secret.Value, bool) {
	vals := r.Header.Values("Authorization")
	if len(vals) != 1 {
		return secret.Value{}, false
	}
	tok, ok := strings.CutPrefix(vals[0], "Bearer ")
	if !ok || tok == "" || len(tok) > 4096 || strings.ContainsAny(tok, " \t") {
		return secret.Value{}, false
	}
	return secret.New(tok), true
}

// corsHeaders are the request headers a preflight always allows.
const corsHeaders = "Authorization, Content-Type, X-Rotor-Region, X-Request-ID"

// allowHeaders is a preflight's Access-Control-Allow-Headers for an allowed
// origin: rotor's own, and the ones it asked for when each is a header
// name (at most 64 of them). The official SDKs send headers of their own
// on every request (OpenAI-Beta, X-Stainless-*), and a preflight that
// leaves one out fails the request in the browser; none of them reaches
// the provider (the bridge builds the upstream request's headers itself).
func allowHeaders(requested string) string {
	if requested == "" {
		return corsHeaders
	}
	names := strings.Split(requested, ",")
	if len(names) > 64 {
		return corsHeaders
	}
	out := corsHeaders
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" || !validHeaderName(n) {
			return corsHeaders
		}
		out += ", " + n
	}
	return out
}

// validHeaderName reports whether s is an HTTP header name (an RFC 9110
// token) of at most 128 bytes.
func validHeaderName(s string) bool {
	if len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

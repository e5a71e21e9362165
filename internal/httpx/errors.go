package httpx

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Codes rotor answers with. The names the spec uses are kept.
const (
	CodeInvalidJSON        = "invalid_json"
	CodeInvalidModelPrefix = "invalid_model_prefix"
	CodeUnknownRegion      = "unknown_region"
	CodeInvalidToken       = "invalid_token"
	CodeHostNotAllowed     = "host_not_allowed"
	CodeOriginNotAllowed   = "origin_not_allowed"
	CodePolicyBlocked      = "policy_blocked"
	CodeNotFound           = "not_found"
	CodeMethodNotAllowed   = "method_not_allowed"
	CodeModelNotAvailable  = "model_not_available"
	CodeRequestTooLarge    = "request_too_large"
	CodeRequestTimeout     = "request_timeout"
	CodeBudgetExceeded     = "budget_exceeded"
	CodeModelCooldown      = "model_cooldown"
	CodeRateLimitExceeded  = "rate_limit_exceeded"
	CodeInsufficientQuota  = "insufficient_quota"
	CodeResponseTooLarge   = "decisions_response_too_large"
	CodeRuntimeUnavailable = "runtime_unavailable"
	CodeUpstreamError      = "upstream_error"
	CodeCatalogUnavailable = "catalog_unavailable"
	CodeUpstreamRedirect   = "upstream_redirect"
	CodePoolUnavailable    = "decisions_pool_unavailable"
	// CodeRoutePoolUnavailable and CodeRouteResponseTooLarge are the
	// OpenAI routes' names for the two Decisions codes above.
	CodeRoutePoolUnavailable  = "pool_unavailable"
	CodeRouteResponseTooLarge = "response_too_large"
	CodeModelCooldownCapacity = "model_cooldown_capacity"
	CodeLedgerUnavailable     = "ledger_unavailable"
	CodeOverloaded            = "server_overloaded"
	CodeDeadlineExceeded      = "deadline_exceeded"
	CodeNoCredentials         = "no_credentials"
	CodeInternal              = "internal_error"
	CodeClientClosedRequest   = "client_closed_request"
	CodeServerShutdown        = "server_shutdown"
	// Reload (POST /v1/admin/reload).
	CodeAdminOnly       = "admin_only"
	CodeConfigInvalid   = "config_invalid"
	CodeRestartRequired = "restart_required"
)

// Error types, in the style of the OpenAI error shape.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeAuthentication = "authentication_error"
	TypePermission     = "permission_error"
	TypeNotFound       = "not_found_error"
	TypeRateLimit      = "rate_limit_error"
	TypeAPI            = "api_error"
	TypeServer         = "server_error"
)

// CodeInfo is one row of the code table.
type CodeInfo struct {
	Status  int
	Type    string
	Message string
	// NeverRetry marks answers where a client retry is futile or would
	// re-run a paid provider call; they carry x-should-retry: false.
	NeverRetry bool
}

// Codes is the table of every code rotor itself answers with. The README
// lists the same table; a test keeps the two in step.
var Codes = map[string]CodeInfo{
	CodeInvalidJSON:           {http.StatusBadRequest, TypeInvalidRequest, "request body is not a valid JSON object", false},
	CodeInvalidModelPrefix:    {http.StatusBadRequest, TypeInvalidRequest, "model must start with api/ or zdr/ followed by a model name", false},
	CodeUnknownRegion:         {http.StatusBadRequest, TypeInvalidRequest, "no credential in this pool serves the requested region", false},
	CodeInvalidToken:          {http.StatusUnauthorized, TypeAuthentication, "missing or invalid bearer token", false},
	CodeHostNotAllowed:        {http.StatusForbidden, TypePermission, "host not allowed", false},
	CodeOriginNotAllowed:      {http.StatusForbidden, TypePermission, "origin not allowed", false},
	CodePolicyBlocked:         {http.StatusForbidden, TypePermission, "request blocked by budget policy", true},
	CodeNotFound:              {http.StatusNotFound, TypeNotFound, "no such route", false},
	CodeMethodNotAllowed:      {http.StatusMethodNotAllowed, TypeInvalidRequest, "method not allowed", false},
	CodeModelNotAvailable:     {http.StatusNotFound, TypeNotFound, "no credential in this pool and region is eligible for the model", false},
	CodeRequestTimeout:        {http.StatusRequestTimeout, TypeInvalidRequest, "the request body did not arrive within the read timeout", false},
	CodeRequestTooLarge:       {http.StatusRequestEntityTooLarge, TypeInvalidRequest, "request body is larger than 64 MiB", false},
	CodeBudgetExceeded:        {http.StatusTooManyRequests, TypeRateLimit, "budget exceeded", false},
	CodeModelCooldown:         {http.StatusTooManyRequests, TypeRateLimit, "every eligible credential is cooling down for this model", false},
	CodeRateLimitExceeded:     {http.StatusTooManyRequests, TypeRateLimit, "every eligible credential is rate limited", false},
	CodeInsufficientQuota:     {http.StatusTooManyRequests, TypeRateLimit, "every credential in the pool has exhausted its quota", true},
	CodeResponseTooLarge:      {http.StatusBadGateway, TypeAPI, "provider answer is larger than 64 MiB; the provider ran the request but its usage could not be read", true},
	CodeRuntimeUnavailable:    {http.StatusBadGateway, TypeAPI, "the bridge cannot reach the runtime", false},
	CodeUpstreamError:         {http.StatusBadGateway, TypeAPI, "the provider call failed after the request was sent; it was not replayed", false},
	CodeUpstreamRedirect:      {http.StatusBadGateway, TypeAPI, "the provider answered with a redirect, which rotor never follows; the request was not replayed", false},
	CodeCatalogUnavailable:    {http.StatusBadGateway, TypeAPI, "no credential's model catalog could be fetched", false},
	CodePoolUnavailable:       {http.StatusServiceUnavailable, TypeAPI, "every credential in the pool was rejected by the provider", true},
	CodeRoutePoolUnavailable:  {http.StatusServiceUnavailable, TypeAPI, "every credential in the pool was rejected by the provider", true},
	CodeRouteResponseTooLarge: {http.StatusBadGateway, TypeAPI, "provider answer is larger than 64 MiB; the provider ran the request but its usage could not be read", true},
	CodeModelCooldownCapacity: {http.StatusServiceUnavailable, TypeAPI, "cooldown store is full; admission fails closed until it drains", false},
	CodeLedgerUnavailable:     {http.StatusServiceUnavailable, TypeAPI, "the usage ledger cannot record; failing closed", false},
	CodeOverloaded:            {http.StatusServiceUnavailable, TypeAPI, "too many bytes buffered across requests in flight", false},
	CodeNoCredentials:         {http.StatusServiceUnavailable, TypeAPI, "the pool has no credentials configured", true},
	CodeDeadlineExceeded:      {http.StatusGatewayTimeout, TypeAPI, "the request deadline passed", false},
	CodeInternal:              {http.StatusInternalServerError, TypeServer, "internal error", false},
	CodeClientClosedRequest:   {499, TypeInvalidRequest, "client closed the request", false},
	CodeServerShutdown:        {http.StatusServiceUnavailable, TypeAPI, "the server is shutting down; the request was cut after the shutdown grace", false},
	CodeAdminOnly:             {http.StatusForbidden, TypePermission, "only the home's default client token (bridge.token) may call this route", false},
	CodeConfigInvalid:         {http.StatusBadRequest, TypeInvalidRequest, "the configuration file does not validate; the running configuration is kept", false},
	CodeRestartRequired:       {http.StatusConflict, TypeInvalidRequest, "a changed key needs a restart; the running configuration is kept", false},
}

// Error is an HTTP error in rotor's one JSON shape. Handlers return it (or
// something the runtime's adapter turns into it) and WriteError writes it.
type Error struct {
	Status  int
	Code    string
	Type    string
	Message string
	Param   string
	// RetryAfter, when positive, is sent as Retry-After (whole seconds,
	// rounded up, at least 1), retry-after-ms and error.retry_after_ms.
	RetryAfter time.Duration
	// NeverRetry adds x-should-retry: false.
	NeverRetry bool
}

// NewError returns the error for a code from the table, with its default
// status, type and message.
func NewError(code string) *Error {
	info, ok := Codes[code]
	if !ok {
		panic("httpx: code not in table: " + code)
	}
	return &Error{Status: info.Status, Code: code, Type: info.Type, Message: info.Message, NeverRetry: info.NeverRetry}
}

// WithMessage returns e with its message replaced.
func (e *Error) WithMessage(format string, args ...any) *Error {
	e.Message = fmt.Sprintf(format, args...)
	return e
}

// WithParam returns e with its param set.
func (e *Error) WithParam(p string) *Error {
	e.Param = p
	return e
}

// WithRetryAfter returns e with a retry advice.
func (e *Error) WithRetryAfter(d time.Duration) *Error {
	e.RetryAfter = d
	return e
}

func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// RetryAfterSeconds is the Retry-After header value for d: ceil(ms/1000),
// at least 1.
func RetryAfterSeconds(d time.Duration) int64 {
	ms := RetryAfterMillis(d)
	s := (ms + 999) / 1000
	if s < 1 {
		s = 1
	}
	return s
}

// RetryAfterMillis is d in whole milliseconds, rounded up, at least 1.
func RetryAfterMillis(d time.Duration) int64 {
	ms := int64(math.Ceil(float64(d) / float64(time.Millisecond)))
	if ms < 1 {
		ms = 1
	}
	return ms
}

type errorBody struct {
	Error errorFields `json:"error"`
}

type errorFields struct {
	Message      string  `json:"message"`
	Type         string  `json:"type"`
	Code         *string `json:"code"`
	Param        *string `json:"param"`
	RetryAfterMS *int64  `json:"retry_after_ms,omitempty"`
}

// Body returns the JSON body of e.
func (e *Error) Body() []byte {
	f := errorFields{Message: e.Message, Type: e.Type}
	if e.Code != "" {
		c := e.Code
		f.Code = &c
	}
	if e.Param != "" {
		p := e.Param
		f.Param = &p
	}
	if e.RetryAfter > 0 {
		ms := RetryAfterMillis(e.RetryAfter)
		f.RetryAfterMS = &ms
	}
	b, err := json.Marshal(errorBody{Error: f})
	if err != nil { // cannot happen: only strings and ints
		panic(err)
	}
	return append(b, '\n')
}

// WriteError writes e as JSON with its status and retry headers.
func WriteError(w http.ResponseWriter, e *Error) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
	body := e.Body()
	// An exact length: the answer ends where its body does, also when
	// the handler goes on (RefuseTooLarge) or the connection stays open.
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.FormatInt(RetryAfterSeconds(e.RetryAfter), 10))
		h.Set("retry-after-ms", strconv.FormatInt(RetryAfterMillis(e.RetryAfter), 10))
	}
	if e.NeverRetry || (e.Code == CodeBudgetExceeded && e.RetryAfter > 60*time.Second) {
		h.Set("x-should-retry", "false")
	}
	if e.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="rotor"`)
	}
	if rec := recorderOf(w); rec != nil && rec.Code == "" {
		rec.Code = e.Code
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}

// RefuseTooLarge answers 413 request_too_large to a request whose
// Content-Length is over limit, before reading any byte of its body: no
// 100 Continue ever goes out, and the connection closes after the answer.
// Only once the answer is out does it discard up to limit bytes that a
// client sends anyway (never under Expect: 100-continue, where the client
// waits): closing a socket with unread data resets it, and the reset can
// destroy the answer in the client's buffer before it is read. The
// server's read timeout bounds that discard.
func RefuseTooLarge(w http.ResponseWriter, r *http.Request, limit int64) {
	w.Header().Set("Connection", "close")
	WriteError(w, NewError(CodeRequestTooLarge))
	if strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		return
	}
	if err := http.NewResponseController(w).Flush(); err != nil {
		return
	}
	_, _ = io.CopyN(io.Discard, r.Body, limit)
}

// MethodNotAllowed answers 405 method_not_allowed with Allow: allow.
func MethodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	WriteError(w, NewError(CodeMethodNotAllowed))
}

// OnlyMethod serves h for method (GET admits HEAD, as net/http's GET
// patterns do) and answers any other method 405 with Allow, so that a
// known path never falls through to a catch-all 404.
func OnlyMethod(method string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !MethodAllowed(r.Method, method) {
			MethodNotAllowed(w, method)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// MethodAllowed reports whether a request with method got may be served by
// a route for want (GET admits HEAD).
func MethodAllowed(got, want string) bool {
	return got == want || want == http.MethodGet && got == http.MethodHead
}

// recorderOf finds the access log's *StatusRecorder under w, if any.
func recorderOf(w http.ResponseWriter) *StatusRecorder {
	for w != nil {
		if rec, ok := w.(*StatusRecorder); ok {
			return rec
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil
		}
		w = u.Unwrap()
	}
	return nil
}

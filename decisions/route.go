package decisions

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/defaults"
	"github.com/rotorhq/rotor/internal/failpoint"
	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/internal/jsonobj"
	"github.com/rotorhq/rotor/internal/names"
	"github.com/rotorhq/rotor/internal/secret"
	"github.com/rotorhq/rotor/ledger"
	"github.com/rotorhq/rotor/pool"
)

// Endpoint is the provider endpoint this route forwards to, and the value a
// model profile must list.
const Endpoint = "/v1/decisions"

// Operation is the ledger operation of this route.
const Operation = budgets.OperationDecisions

// PoolNames are the pools a model prefix selects (api/<model>,
// zdr/<model>), in status order.
var PoolNames = names.Pools

// MaxErrorBody is the most of a provider's error body the route reads.
const MaxErrorBody = 64 << 10

// CredentialConfig is one enabled credential as the route sees it.
type CredentialConfig struct {
	Name    string
	Region  string
	BaseURL string
	Key     secret.Value
	// Allow and Deny are model globs (path.Match); an empty Allow allows
	// every model.
	Allow, Deny []string
	// Profiles maps a model to the endpoints the operator verified.
	Profiles map[string][]string
}

// PoolConfig is one pool: its enabled credentials in configured order and
// the pool that tracks their cooldowns.
type PoolConfig struct {
	Name        string
	Credentials []CredentialConfig
	Pool        *pool.Pool
	// Unusable says why each configured credential left out of Credentials
	// cannot be used, for the 503 no_credentials message.
	Unusable []string
}

// Ledger is what the route needs from the usage ledger.
type Ledger interface {
	Reserve(ctx context.Context, r ledger.Reservation, admit ledger.Admitter) error
	Settle(ctx context.Context, s ledger.Settlement) error
	Release(ctx context.Context, requestID string) error
}

// Metrics receives the route's events; nil fields are fine.
type Metrics interface {
	// Refused counts a request refused before any provider call.
	Refused(reason string)
	// Failover counts a move to another credential and why.
	Failover(pool, reason string)
	// Cooldown counts a cooldown recorded, by class (throttle, auth).
	Cooldown(pool, class string)
	// Upstream counts one provider call by the credential's name and how
	// it ended (outcomeNames).
	Upstream(pool, credential, outcome string)
}

// Config configures a Route. Pools, Ledger and Clock are required.
type Config struct {
	Pools    []PoolConfig
	Ledger   Ledger
	Admitter ledger.Admitter
	// HTTPClient calls providers. The default never follows redirects.
	HTTPClient *http.Client
	Clock      clock.Clock
	Logger     *slog.Logger
	// Deadline is shared by discovery, admission, body reads, waits and
	// retries (default 60s).
	Deadline       time.Duration
	CatalogTTL     time.Duration
	CatalogTimeout time.Duration
	// ErrorBodyIdle ends an error body read after this long without data
	// (default 5s).
	ErrorBodyIdle time.Duration
	// MaxBuffered bounds bytes buffered across requests (default 1 GiB).
	MaxBuffered int64
	// ReservationGrace is added to the deadline for a reservation's expiry.
	ReservationGrace time.Duration
	Metrics          Metrics
	UserAgent        string
	// GenerationDeadline bounds a whole request on the OpenAI routes
	// (default 10m); waits and failover stay within Deadline.
	GenerationDeadline time.Duration
	// StreamIdleTimeout cuts a stream whose provider is silent this long
	// (default 120s); it is also the window of each write to the caller.
	StreamIdleTimeout time.Duration
	// DefaultPool, when set, is the pool a bare model name uses on the
	// OpenAI routes (never on Decisions).
	DefaultPool string
	// Previous, when set, is the route this one replaces on a config
	// reload: the credentials Keep names keep their discovered catalogs
	// and unsupported-endpoint answers, and Responses ids stay pinned to
	// the credential that answered them.
	Previous *Route
	Keep     func(name string) bool
	// WriteTimeout is the server's write timeout, sized at start from the
	// Decisions deadline; when a reload raises the deadline past it, each
	// Decisions answer gets a write deadline of its own. Zero: never.
	WriteTimeout time.Duration
}

// Route serves POST /v1/decisions. It is safe for concurrent use.
type Route struct {
	cfg         Config
	pools       map[string]*poolState
	catalogs    *catalogs
	unsupported *unsupported
	buffers     *limiter
	log         *slog.Logger
	// affinity pins a Responses previous_response_id to the credential
	// that answered it.
	affinity *affinity
}

type poolState struct {
	name  string
	creds []*credential
	pool  *pool.Pool
	// firstRegion is the region of the first enabled credential.
	firstRegion string
	unusable    []string
}

type credential struct {
	CredentialConfig
	fingerprint string
}

// identity is what makes a credential the same across a reload (name,
// base_url, region and key): the key of what the generations share.
func (c *credential) identity() string {
	return c.Name + "\x00" + c.BaseURL + "\x00" + c.Region + "\x00" + c.fingerprint
}

// NoRedirects is an http.Client CheckRedirect that never follows a
// redirect: the key must not travel to another host.
func NoRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// upstreamReadBuffer is the provider connections' read buffer.
const upstreamReadBuffer = 32 << 10

// IdleConnTimeout is how long an idle provider connection is kept: under
// the 60 s after which many providers' load balancers close one (AWS's
// default, the fake provider's). A request sent on a connection the
// provider is closing at that moment fails after it was written, and
// rotor must then answer 502 "may have run" and record unknown usage for a
// call the provider never read; closing first avoids that race.
const IdleConnTimeout = 50 * time.Second

// NewHTTPClient returns the client rotor uses for providers: no redirects,
// bounded dials and headers, many idle connections per host.
func NewHTTPClient() *http.Client {
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 0, // the request deadline bounds it
		MaxIdleConns:          512,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       IdleConnTimeout,
		ForceAttemptHTTP2:     true,
		// A stream's events pass through this buffer: at the default
		// 4 KiB a stream of many small chunks costs a read system call
		// per 4 KiB however much the socket holds.
		ReadBufferSize: upstreamReadBuffer,
	}
	return &http.Client{Transport: tr, CheckRedirect: NoRedirects}
}

// New returns a Route.
func New(cfg Config) *Route {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = NewHTTPClient()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Deadline <= 0 {
		cfg.Deadline = defaults.Deadline
	}
	if cfg.CatalogTTL <= 0 {
		cfg.CatalogTTL = defaults.CatalogTTL
	}
	if cfg.CatalogTimeout <= 0 {
		cfg.CatalogTimeout = defaults.CatalogTimeout
	}
	if cfg.ErrorBodyIdle <= 0 {
		cfg.ErrorBodyIdle = defaults.ErrorBodyIdle
	}
	if cfg.MaxBuffered <= 0 {
		cfg.MaxBuffered = defaults.MaxBufferedMB << 20
	}
	if cfg.GenerationDeadline <= 0 {
		cfg.GenerationDeadline = defaults.GenerationDeadline
	}
	if cfg.StreamIdleTimeout <= 0 {
		cfg.StreamIdleTimeout = defaults.StreamIdleTimeout
	}
	if cfg.UserAgent == "" {
		cfg.UserAgent = "rotor"
	}
	rt := &Route{
		cfg:         cfg,
		pools:       map[string]*poolState{},
		catalogs:    newCatalogs(cfg.Clock, cfg.CatalogTTL, cfg.CatalogTimeout, cfg.HTTPClient),
		unsupported: newUnsupported(cfg.Clock),
		buffers:     newLimiter(cfg.MaxBuffered),
		log:         cfg.Logger,
		affinity:    newAffinity(cfg.Clock),
	}
	if prev := cfg.Previous; prev != nil {
		// One budget for the process: the bytes that requests begun
		// on the previous generation hold still count.
		rt.buffers = prev.buffers
		rt.buffers.max.Store(cfg.MaxBuffered)
	}
	if prev := cfg.Previous; prev != nil && cfg.Keep != nil {
		rt.catalogs.adopt(prev.catalogs, cfg.Keep)
		// Shared, keyed by identity: an answer a request begun on the
		// previous generation records still reaches this one, and a
		// changed credential matches none of its old answers.
		rt.unsupported = prev.unsupported
		rt.affinity = prev.affinity
	}
	for _, pc := range cfg.Pools {
		ps := &poolState{name: pc.Name, pool: pc.Pool, unusable: pc.Unusable}
		for _, c := range pc.Credentials {
			c.BaseURL = strings.TrimRight(c.BaseURL, "/")
			ps.creds = append(ps.creds, &credential{CredentialConfig: c, fingerprint: c.Key.Fingerprint()})
		}
		if len(ps.creds) > 0 {
			ps.firstRegion = ps.creds[0].Region
		}
		rt.pools[pc.Name] = ps
	}
	return rt
}

var _ http.Handler = (*Route)(nil)

// writeMargin is how long past a request's deadline its answer may still
// be written.
const writeMargin = 15 * time.Second

// RegionHeader names the region a request stays in.
const RegionHeader = "X-Rotor-Region"

// ServeHTTP handles one Decisions request.
func (rt *Route) ServeHTTP(w http.ResponseWriter, r *http.Request) { rt.serveKind(KindDecisions, w, r) }

// serveKind handles one request of route k.
func (rt *Route) serveKind(k *Kind, w http.ResponseWriter, r *http.Request) {
	info := httpx.AccessInfoFrom(r.Context())
	info.Operation = k.Operation
	if r.Method != http.MethodPost {
		httpx.MethodNotAllowed(w, http.MethodPost)
		return
	}
	if r.ContentLength > MaxBody {
		// 1. Size cap. Announced too large: answered before any byte of
		// the body is read (no 100 Continue), and without taking the
		// buffer bound from real requests.
		rt.refused("request_too_large")
		info.Code = httpx.CodeRequestTooLarge
		httpx.RefuseTooLarge(w, r, MaxBody)
		return
	}
	if k.generation || rt.cfg.WriteTimeout > 0 && k.deadline(&rt.cfg)+writeMargin > rt.cfg.WriteTimeout {
		// The server's write timeout fits the Decisions deadline it
		// started with; an answer on these routes may take the generation
		// deadline, and a reload may have raised the Decisions one.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(k.deadline(&rt.cfg) + writeMargin))
	}
	ctx, cancel := context.WithTimeout(r.Context(), k.deadline(&rt.cfg))
	defer cancel()
	var admitting bool
	err := rt.serve(ctx, k, w, r, info, &admitting)
	if err == nil {
		return
	}
	if !admitting && rt.revoked(r) {
		// Refused before admission, which checks the token itself.
		err = httpx.NewError(httpx.CodeInvalidToken)
	}
	err = callerView(err, r.Context())
	e := k.errorResponse(err)
	info.Code = e.Code
	if info.Ran && (e.Status == http.StatusBadGateway || e.Status == http.StatusServiceUnavailable || e.Status == http.StatusGatewayTimeout) {
		// A provider call may have run: an SDK that retries would pay
		// for it twice (DESIGN, retry hints).
		e.NeverRetry = true
	}
	if e.Status >= 500 && e.Code == httpx.CodeInternal {
		rt.log.Error("request failed", "path", k.Path, "request_id", httpx.RequestID(r.Context()), "error", err)
	}
	httpx.WriteError(w, e)
}

// revoked reports whether r came through a bridge that let its client
// token in from a list loaded a moment ago (Caller.CheckToken) and the
// ledger no longer holds that token. Admission re-checks the token, so a
// revoked token never reaches a provider; a request refused before it
// (bad JSON, a bad model prefix, no credentials) asks here, so that the
// revoked token gets 401 at its next request whatever it sends. Only
// refusals before admission pay for the lookup: one after it (a cooldown's
// 429, a budget's, a provider's error) was checked there.
func (rt *Route) revoked(r *http.Request) bool {
	caller := httpx.CallerFrom(r.Context())
	tokens, ok := rt.cfg.Ledger.(interface {
		LookupToken(ctx context.Context, hash [32]byte) (label string, ok bool, err error)
	})
	if !caller.CheckToken || !ok {
		return false
	}
	_, held, err := tokens.LookupToken(r.Context(), caller.TokenHash)
	return err == nil && !held
}

// serve returns nil when it wrote an answer itself. It sets *admitting once
// the request reaches admission.
func (rt *Route) serve(ctx context.Context, k *Kind, w http.ResponseWriter, r *http.Request, info *httpx.AccessInfo, admitting *bool) error {
	// 1. Size cap (an announced one is refused in ServeHTTP), then 2.
	// JSON, then 3. model prefix: all before anything else, and before
	// budgets.
	body, err := readAll(r.Body, MaxBody, rt.buffers, r.ContentLength)
	if err != nil {
		var mbe *http.MaxBytesError
		switch {
		case errors.Is(err, errTooLarge), errors.As(err, &mbe):
			rt.refused(httpx.CodeRequestTooLarge)
			return httpx.NewError(httpx.CodeRequestTooLarge)
		case errors.Is(err, ErrOverloaded):
			rt.refused(httpx.CodeOverloaded)
			return err
		}
		var ne net.Error
		if errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
			// The server's read timeout cut a body sent too slowly.
			rt.refused(httpx.CodeRequestTimeout)
			return httpx.NewError(httpx.CodeRequestTimeout)
		}
		// Each refusal counts under the code its answer carries.
		if ctx.Err() != nil {
			rt.refused(httpx.CodeClientClosedRequest)
			return ctx.Err()
		}
		rt.refused(httpx.CodeInvalidJSON)
		return httpx.NewError(httpx.CodeInvalidJSON).WithMessage("could not read the request body")
	}
	defer body.Release()
	req, err := jsonobj.ParseRequest(body.b)
	if err != nil {
		switch {
		case errors.Is(err, jsonobj.ErrNoModel), errors.Is(err, jsonobj.ErrModelNotString):
			rt.refused(httpx.CodeInvalidModelPrefix)
			return httpx.NewError(httpx.CodeInvalidModelPrefix).WithParam("model").WithMessage("%v; select api/<model> or zdr/<model>", err)
		}
		rt.refused(httpx.CodeInvalidJSON)
		if errors.Is(err, jsonobj.ErrDuplicateModel) {
			return httpx.NewError(httpx.CodeInvalidJSON).WithParam("model").WithMessage("%v", err)
		}
		return httpx.NewError(httpx.CodeInvalidJSON)
	}
	req, stream, injected, err := streamRequest(k, req)
	if err != nil {
		rt.refused("invalid_json")
		return httpx.NewError(httpx.CodeInvalidJSON).WithParam("stream_options")
	}
	prefix, upstream, ok := strings.Cut(req.Model, "/")
	if k.barePool && rt.cfg.DefaultPool != "" && (!ok || !slices.Contains(PoolNames, prefix)) {
		// routes.default_pool: a bare name, on the OpenAI routes only.
		prefix, upstream, ok = rt.cfg.DefaultPool, req.Model, req.Model != ""
	}
	ps := rt.pools[prefix]
	if !ok || !slices.Contains(PoolNames, prefix) || upstream == "" {
		rt.refused("invalid_model_prefix")
		return httpx.NewError(httpx.CodeInvalidModelPrefix).WithParam("model").
			WithMessage("model must be api/<model> or zdr/<model>; bare models, PSP routes and speed-tier aliases are not routed")
	}
	if strings.ContainsFunc(upstream, unicode.IsControl) {
		// No provider lists such a model, and PostgreSQL refuses a NUL
		// in text: refused before admission, as on SQLite it was after.
		// (Unquote leaves no invalid UTF-8: the decoder replaces it.)
		rt.refused(httpx.CodeModelNotAvailable)
		return httpx.NewError(httpx.CodeModelNotAvailable).WithParam("model").
			WithMessage("model holds a control character; no provider lists it")
	}
	info.Pool, info.Model = prefix, upstream
	if ps == nil || len(ps.creds) == 0 {
		rt.refused("no_credentials")
		nce := &pool.NoCredentialsError{Pool: prefix}
		if ps != nil {
			nce.Unusable = ps.unusable
		}
		return nce
	}
	region := ps.firstRegion
	if h := r.Header.Get(RegionHeader); h != "" {
		region = ""
		for _, c := range ps.creds {
			if c.Region == h {
				region = h
				break
			}
		}
		if region == "" {
			rt.refused("unknown_region")
			return httpx.NewError(httpx.CodeUnknownRegion).WithMessage("no enabled credential in pool %s serves region %q", prefix, h)
		}
	}
	info.Region = region

	// 4. Budget admission: a reservation in the ledger, before discovery.
	id := httpx.RequestID(r.Context())
	if id == "" {
		id = httpx.NewRequestID()
	}
	start := rt.cfg.Clock.Now()
	caller := httpx.CallerFrom(r.Context())
	res := ledger.Reservation{RequestID: id, Expires: start.Add(k.deadline(&rt.cfg) + rt.cfg.ReservationGrace),
		Operation: k.Operation, Pool: prefix, Model: upstream, Region: region, Client: caller.Label}
	if caller.CheckToken {
		res.Token, res.CheckToken = caller.TokenHash, true
	}
	*admitting = true
	if err := rt.cfg.Ledger.Reserve(ctx, res, rt.cfg.Admitter); err != nil {
		rt.refused(refusalReason(err))
		if errors.Is(err, ledger.ErrUnavailable) || errors.Is(err, ledger.ErrReadOnly) {
			// The caller gets a generic 503; the operator needs the cause
			// (disk full, lock held past busy_timeout, I/O error).
			rt.log.Warn("ledger cannot record; admission failed closed", "request_id", id, "error", err)
		}
		return err
	}
	failpoint.Hit(failpoint.AfterAdmission) // crash tests: reservation committed, nothing sent
	wk := &walk{rt: rt, kind: k, ps: ps, req: req, beta: r.Header.Get("OpenAI-Beta"), stream: stream, upstream: upstream, region: region, id: id, info: info,
		scope: pool.Scope{Model: upstream, QuotaBucket: ps.pool.BucketFor(upstream)}, deadline: start.Add(rt.cfg.Deadline)}
	if k == KindResponses {
		if prev, ok := stringMember(req.Body, "previous_response_id"); ok && prev != "" {
			if name, ok := rt.affinity.lookup(prev); ok {
				wk.pinned = name
			}
		}
	}
	out, err := wk.run(ctx)
	if wk.sent == 0 {
		// No provider call was made: the reservation is released and no
		// usage row remains.
		if rerr := rt.cfg.Ledger.Release(context.WithoutCancel(ctx), id); rerr != nil {
			rt.log.Error("release reservation", "request_id", id, "error", rerr)
		}
		if err == nil {
			err = ErrUpstream
		}
		return err
	}
	if err == nil && out.stream != nil {
		info.Attempts, info.Ran = wk.sent, wk.ran
		rt.streamAnswer(ctx, r.Context(), k, w, wk, out, injected, start, info)
		return nil
	}
	// The row is settled before the caller sees the answer: an answer
	// received as 200 always has its ledger row.
	st := ledger.Settlement{RequestID: id, Model: upstream, Credential: wk.lastCred, Region: region, Attempts: wk.sent,
		Latency: rt.cfg.Clock.Now().Sub(start)}
	if err != nil {
		e := k.errorResponse(callerView(err, r.Context()))
		st.Status, st.ErrorCode = e.Status, e.Code
		// A structured 4xx passed through was refused; so was every call
		// of a request that no call ran (wk.ran false: each one was a
		// classified rejection the route failed over on, 401/403, quota,
		// rate_limit_exceeded or unsupported, and the request ended in
		// the pool's own answer: 429, 503 or a deadline passed while
		// waiting on a cooldown). The provider bills none of them, and a
		// row of unknown cost would make every cost budget fail closed.
		if pe, ok := errors.AsType[*ProviderError](err); ok && pe.Refused() || !wk.ran {
			settleRefused(&st)
		}
	} else {
		st.Status = out.status
		settleUsage(&st, out.usage)
		if k == KindResponses {
			rt.affinity.remember(responseID(out.body.b), wk.lastCred)
		}
	}
	info.Attempts, info.Ran = wk.sent, wk.ran
	failpoint.Hit(failpoint.AfterAnswer) // crash tests: the provider answered, the row is not settled
	if serr := rt.cfg.Ledger.Settle(context.WithoutCancel(ctx), st); serr != nil {
		// The provider ran the request, but the row could not be settled:
		// the reservation stays and counts as unknown usage. Fail closed
		// rather than hand out an answer with no row behind it.
		rt.log.Error("usage row not settled; the reservation counts as unknown usage", "request_id", id, "error", serr)
		if out != nil {
			out.body.Release()
		}
		return ledger.ErrUnavailable
	}
	info.Recorded = true
	noteTokens(info, st)
	if err != nil {
		return err
	}
	defer out.body.Release()
	h := w.Header()
	if ct := out.header.Get("Content-Type"); ct != "" {
		h.Set("Content-Type", ct)
	} else {
		h.Set("Content-Type", "application/json")
	}
	h.Set("Content-Length", strconv.Itoa(len(out.body.b)))
	h.Set("X-Rotor-Credential", wk.lastCred)
	h.Set("X-Rotor-Attempts", strconv.Itoa(wk.sent))
	w.WriteHeader(out.status)
	_, _ = w.Write(out.body.b)
	return nil
}

// callerView is the error the caller's answer and the usage row report:
// the request's own deadline passing is ErrDeadline and a caller gone
// first is ErrClientGone, unless the route already chose an answer (an
// *httpx.Error) or the provider's answer was too large. caller is the
// request's context, without the route's deadline.
func callerView(err error, caller context.Context) error {
	var he *httpx.Error
	switch {
	case errors.As(err, &he):
		// An answer the route chose; a gone client does not change it.
	case errors.Is(err, context.DeadlineExceeded) && caller.Err() == nil:
		return ErrDeadline
	case errors.Is(context.Cause(caller), httpx.ErrServerShutdown) && !errors.Is(err, ErrResponseTooLarge):
		return ErrShutdown
	case caller.Err() != nil && !errors.Is(err, ErrResponseTooLarge):
		return ErrClientGone
	}
	return err
}

func (rt *Route) refused(reason string) {
	if rt.cfg.Metrics != nil {
		rt.cfg.Metrics.Refused(reason)
	}
}

func refusalReason(err error) string {
	e := ErrorResponse(err)
	return e.Code
}

// answer is a successful provider answer.
type answer struct {
	status int
	header http.Header
	body   *buffer
	usage  jsonobj.Usage
	// stream, when set, is an event stream to pump to the caller instead
	// of body; cancel ends its provider call with a cause, and streamCtx
	// is that call's context.
	stream    io.ReadCloser
	cancel    context.CancelCauseFunc
	streamCtx context.Context
}

// allows applies a credential's visibility globs.
func (c *credential) allows(model string) bool {
	for _, g := range c.Deny {
		if ok, _ := path.Match(g, model); ok {
			return false
		}
	}
	if len(c.Allow) == 0 {
		return true
	}
	for _, g := range c.Allow {
		if ok, _ := path.Match(g, model); ok {
			return true
		}
	}
	return false
}

// CredentialStatus is one credential's state for status pages.
type CredentialStatus struct {
	Pool, Name, Region string
	CatalogFetched     time.Time
	CatalogFresh       bool
}

// Status reports each credential's catalog freshness.
func (rt *Route) Status() []CredentialStatus {
	fetched := rt.catalogs.snapshot()
	now := rt.cfg.Clock.Now()
	var out []CredentialStatus
	for _, name := range PoolNames {
		ps := rt.pools[name]
		if ps == nil {
			continue
		}
		for _, c := range ps.creds {
			f := fetched[c.Name]
			out = append(out, CredentialStatus{Pool: name, Name: c.Name, Region: c.Region, CatalogFetched: f,
				CatalogFresh: !f.IsZero() && now.Sub(f) < rt.cfg.CatalogTTL})
		}
	}
	return out
}

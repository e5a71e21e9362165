package decisions

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/failpoint"
	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/internal/jsonobj"
	"github.com/rotorhq/rotor/pool"
)

// walk is one request's way through its pool: discovery, selection,
// sends (each one attempt at a provider call) and failover, rule by rule as spec/decisions-api.md states them.
type walk struct {
	rt   *Route
	kind *Kind
	// beta is the caller's OpenAI-Beta header, sent upstream.
	beta string
	// pinned, when set, is the only credential that may serve the
	// request (a Responses previous_response_id).
	pinned   string
	ps       *poolState
	req      jsonobj.Request
	upstream string
	region   string
	id       string
	info     *httpx.AccessInfo
	scope    pool.Scope

	// discovered: catalogs fetched during this request (warm ones are
	// read from the cache).
	discovered bool
	// seen are the catalogs this request has read fresh: one that goes
	// stale while the request waits out a cooldown still lists what it
	// listed (after discovery nothing would fetch it again, and the
	// credential would drop out as if it lacked the model).
	seen map[string]*catalogResult
	// rejectedAuth and rejectedQuota are credentials the provider rejected
	// during this request (401/403, or permanent quota); they are not sent
	// again for it.
	rejectedAuth, rejectedQuota map[string]bool
	// failed are credentials that cannot serve this request for other
	// reasons: catalog fetch failed, unsupported endpoint, nothing sent.
	failed map[string]bool
	// throttled counts each credential's temporary 429s in this request;
	// at maxThrottles it is left out (capped) and the request, with
	// nothing else left, answers 429 with the cooldown.
	throttled     map[string]int
	capped        []string
	catalogFailed int
	unreachable   bool
	sent          int
	lastCred      string
	// moving is why the last call let the request move on (a failover
	// reason), from the credential movingFrom; it is counted once the
	// next call goes to another credential, not when the request waits
	// for the same one or ends.
	moving, movingFrom string
	body               []byte
	// sentTo are the credentials this request sent to; fallbackUsed says
	// the legacy first-key fallback was taken (once per request at most).
	sentTo       map[string]bool
	fallbackUsed bool
	// ran: a call ended the request, so the provider may have run it
	// (every call that failed over was a classified rejection).
	ran bool
	// stream: the caller asked for "stream": true on a route that streams.
	stream bool
	// deadline is the request deadline on the route's clock.
	deadline time.Time
}

// maxThrottles is how many temporary rate limits (429
// rate_limit_exceeded) one request takes from one credential before it
// leaves that credential out. Each wait for a release is as long as the
// provider advised, and a provider advising a millisecond again and again
// would otherwise get a call every millisecond until the deadline.
const maxThrottles = 3

const (
	failoverAuth        = "auth"
	failoverQuota       = "quota"
	failoverRateLimited = "rate_limited"
	failoverUnsupported = "unsupported_endpoint"
	failoverUnreachable = "unreachable"
)

// candidates returns the names of the credentials that may serve the
// request now: in the region, with a catalog known (fresh or discovered)
// that lists the model, allowed by visibility, profiled for Decisions, not
// cached as unsupported, and not rejected or failed in this request.
// warmOnly limits them to credentials whose catalog was fresh.
func (wk *walk) candidates() (names []string, undiscovered int) {
	wk.capped = wk.capped[:0]
	for _, c := range wk.ps.creds {
		if c.Region != wk.region || wk.rejectedAuth[c.Name] || wk.rejectedQuota[c.Name] || wk.failed[c.Name] ||
			(wk.pinned != "" && c.Name != wk.pinned) {
			continue
		}
		if wk.throttled[c.Name] >= maxThrottles {
			wk.capped = append(wk.capped, c.Name)
			continue
		}
		cat, fresh := wk.rt.catalogs.fresh(c.Name)
		if fresh {
			if wk.seen == nil {
				wk.seen = make(map[string]*catalogResult, len(wk.ps.creds))
			}
			wk.seen[c.Name] = cat
		} else if cat = wk.seen[c.Name]; cat == nil {
			undiscovered++
			continue
		}
		if _, listed := cat.models[wk.upstream]; !listed || !c.allows(wk.upstream) || !wk.kind.eligible(c, wk.upstream) {
			continue
		}
		if wk.rt.unsupported.has(capKey{c.identity(), wk.upstream, wk.kind.Path}) {
			continue
		}
		names = append(names, c.Name)
	}
	if wk.discovered {
		undiscovered = 0
	}
	return names, undiscovered
}

// discover fetches, concurrently, the catalogs of every credential in the
// region that has none fresh, and waits for them (each bounded by
// catalog_timeout). A 401 or 403 rejects the credential for this request;
// other failures leave it out of this request.
func (wk *walk) discover(ctx context.Context) {
	wk.discovered = true
	// Decide which catalogs to fetch before any fetch starts: the
	// fetches record their outcomes in the walk's maps.
	var cold []*credential
	for _, c := range wk.ps.creds {
		if c.Region != wk.region || wk.rejectedAuth[c.Name] || wk.failed[c.Name] {
			continue
		}
		if _, fresh := wk.rt.catalogs.fresh(c.Name); fresh {
			continue
		}
		cold = append(cold, c)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	for _, c := range cold {
		wg.Add(1)
		go func(c *credential) {
			defer wg.Done()
			_, outcome, status := wk.rt.catalogs.get(ctx, c)
			mu.Lock()
			defer mu.Unlock()
			switch outcome {
			case catalogRejected:
				wk.reject(c.Name, failoverAuth)
				// Catalog probes carry no model quota evidence: only a
				// genuine auth rejection reaches the pool.
				wk.ps.pool.Record(c.Name, pool.Observation{Scope: wk.scope, Status: status, Catalog: true})
				if status == http.StatusUnauthorized {
					wk.rt.cooldown(wk.ps.name, "auth")
				}
			case catalogQuota:
				// Rejected as at inference; a catalog probe carries no
				// quota evidence for the pool.
				wk.reject(c.Name, failoverQuota)
			case catalogFailed:
				if _, fresh := wk.rt.catalogs.fresh(c.Name); !fresh {
					wk.fail(c.Name)
					wk.catalogFailed++
				}
			}
		}(c)
	}
	wg.Wait()
}

func (wk *walk) reject(name, why string) {
	if wk.rejectedAuth == nil {
		wk.rejectedAuth, wk.rejectedQuota = map[string]bool{}, map[string]bool{}
	}
	if why == failoverQuota {
		wk.rejectedQuota[name] = true
	} else {
		wk.rejectedAuth[name] = true
	}
}

// sentBy notes a provider call made with the credential called name.
func (wk *walk) sentBy(name string) {
	if wk.sentTo == nil {
		wk.sentTo = map[string]bool{}
	}
	wk.sentTo[name] = true
	wk.sent++
	wk.lastCred = name
}

func (wk *walk) fail(name string) {
	if wk.failed == nil {
		wk.failed = map[string]bool{}
	}
	wk.failed[name] = true
}

// exhausted is the answer when no credential is left. 503
// decisions_pool_unavailable only when every credential that could serve
// was rejected with 401 or 403 (or permanent quota): one found unsupported
// does not count either way, but one whose catalog could not be fetched or
// whose provider could not be reached was not rejected, and a retry may
// succeed (DESIGN, "HTTP").
func (wk *walk) exhausted() error {
	if len(wk.capped) > 0 {
		// Rate limited maxThrottles times: 429 with the cooldown left
		// (a release already due advises the least wait).
		scoped := wk.ps.pool.ModelCooldownEnabled() && wk.scope != (pool.Scope{})
		_, err := wk.ps.pool.Select(wk.scope, wk.capped)
		if ce, ok := errors.AsType[*pool.CooldownExhaustedError](err); ok {
			return &pool.CooldownExhaustedError{Scoped: ce.Scoped, RetryAfter: ce.RetryAfter}
		}
		if _, ok := errors.AsType[*pool.CapacityError](err); ok {
			return err
		}
		return &pool.CooldownExhaustedError{Scoped: scoped, RetryAfter: time.Millisecond}
	}
	transient := wk.catalogFailed > 0 || wk.unreachable
	switch {
	case len(wk.rejectedAuth) > 0 && !transient:
		return ErrPoolUnavailable
	case len(wk.rejectedQuota) > 0 && !transient:
		return ErrInsufficientQuota
	case wk.catalogFailed > 0:
		return httpx.NewError(httpx.CodeCatalogUnavailable)
	case wk.unreachable:
		return ErrUpstream
	}
	return ErrModelNotAvailable
}

// run selects, sends and fails over until an answer or a final error.
func (wk *walk) run(ctx context.Context) (*answer, error) {
	rt := wk.rt
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		names, undiscovered := wk.candidates()
		if len(names) == 0 {
			if undiscovered > 0 {
				// No warm credential can serve: discover the rest of the
				// pool and region (all of it when nothing was fresh).
				wk.discover(ctx)
				continue
			}
			return nil, wk.exhausted()
		}
		cred, err := wk.ps.pool.Select(wk.scope, names)
		if err != nil {
			var ce *pool.CooldownExhaustedError
			if !errors.As(err, &ce) {
				return nil, err
			}
			if undiscovered > 0 {
				// Warm credentials are rate limited: discover the others.
				wk.discover(ctx)
				continue
			}
			if ce.Fallback != "" && !wk.fallbackUsed && !wk.sentTo[ce.Fallback] && wk.pinned == "" {
				// The legacy first-key fallback: once per request, and
				// only to a credential this request has not sent to.
				// Offered again, it would be a loop of provider calls
				// (issue 14: 20,711 of them in one request).
				wk.fallbackUsed = true
				cred.Name = ce.Fallback
			} else {
				// Every eligible credential cools. Wait for the earliest
				// release when it falls inside the remaining deadline;
				// otherwise answer 429 with that cooldown.
				if ce.RetryAfter < wk.remaining(ctx) {
					if err := clock.Sleep(ctx, rt.cfg.Clock, ce.RetryAfter); err != nil {
						return nil, err
					}
					continue
				}
				return nil, &pool.CooldownExhaustedError{Scoped: ce.Scoped, RetryAfter: ce.RetryAfter}
			}
		}
		if wk.moving != "" && cred.Name != wk.movingFrom {
			rt.failover(wk.ps.name, wk.moving)
		}
		wk.moving = ""
		c := wk.credential(cred.Name)
		out, next, err := wk.send(ctx, c)
		if !next {
			wk.ran = true
			return out, err
		}
	}
}

// remaining is the time left before the request deadline, on the route's
// clock and on the context's alike.
func (wk *walk) remaining(ctx context.Context) time.Duration {
	left := wk.deadline.Sub(wk.rt.cfg.Clock.Now())
	if dl, ok := ctx.Deadline(); ok {
		left = min(left, time.Until(dl))
	}
	return left
}

func (wk *walk) credential(name string) *credential {
	for _, c := range wk.ps.creds {
		if c.Name == name {
			return c
		}
	}
	panic("decisions: pool selected an unknown credential")
}

// permanentQuotaCodes are 429 codes that mean the account's quota is gone,
// not a temporary rate limit.
var permanentQuotaCodes = map[string]bool{
	"insufficient_quota":         true,
	"quota_exceeded":             true,
	"billing_hard_limit_reached": true,
	"billing_not_active":         true,
	"account_quota_exceeded":     true,
}

// outcome is how one upstream answer is read.
type outcome int

const (
	outcomeAnswer      outcome = iota // 2xx: the answer
	outcomeRedirect                   // 3xx: never followed, not replayed
	outcomeQuota                      // 429 permanent quota: reject, fail over
	outcomeRateLimited                // 429 confirmed temporary: shared backoff, fail over
	outcomeAuth                       // 401/403: reject, fail over
	outcomeUnsupported                // endpoint unsupported: cache, fail over
	outcomePassThrough                // anything else: back to the caller, never replayed
)

// outcomeNames label rotor_upstream_calls_total, with "network_error" (the
// call went out, no answer came back) and "unreachable" (it never left).
var outcomeNames = [...]string{
	outcomeAnswer: "ok", outcomeRedirect: "redirect", outcomeQuota: "quota", outcomeRateLimited: "rate_limited",
	outcomeAuth: "auth", outcomeUnsupported: "unsupported", outcomePassThrough: "error",
}

// classify reads one upstream answer by its status and structured error
// (pe, zero when the answer is not an error). It has no side effects: send
// applies its outcome. model and path are the request's upstream model and
// endpoint, which an unstructured 404 may name.
func classify(status int, pe providerError, model, path string) outcome {
	switch {
	case status >= 200 && status < 300:
		return outcomeAnswer
	case status >= 300 && status < 400:
		return outcomeRedirect
	case status == http.StatusTooManyRequests:
		switch {
		case permanentQuotaCodes[pe.Code] || (pe.Code == "" && permanentQuotaCodes[pe.Type]):
			return outcomeQuota
		case pe.Code == "rate_limit_exceeded" || (pe.Code == "" && pe.Type == "rate_limit_exceeded"):
			// Read as a permanent quota is: the code, or the type when
			// there is no code.
			return outcomeRateLimited
		}
		// An unclassified 429 is not replayed.
		return outcomePassThrough
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return outcomeAuth
	case status == http.StatusMethodNotAllowed || status == http.StatusNotImplemented ||
		(status == http.StatusNotFound && unsupportedNotFound(pe, model, path)):
		return outcomeUnsupported
	}
	// Caller errors (a 404 about request content included) and provider
	// failures.
	return outcomePassThrough
}

// send makes one provider call with c. next reports whether to try another
// credential.
func (wk *walk) send(ctx context.Context, c *credential) (out *answer, next bool, err error) {
	rt := wk.rt
	if wk.body == nil {
		wk.body = wk.req.WithModel(wk.upstream)
	}
	callCtx, cancelCause := context.WithCancelCause(ctx)
	cancelCall := func() { cancelCause(nil) }
	// handedOff: a stream's body and its context now belong to the
	// caller's pump (stream.go).
	handedOff := false
	defer func() {
		if !handedOff {
			cancelCall()
		}
	}()
	// reached: this call got a connection, so bytes of it may have reached
	// the provider. GotConn is the last event before which none can have:
	// net/http writes a request only to the connection it got (HTTP/1
	// after getConn returns, HTTP/2 after GetClientConn), so a call given
	// up before it (a dial or TLS handshake still under way when the caller
	// leaves or the deadline passes) sent nothing. WroteHeaders comes too
	// late to prove that: it fires once the headers are in a buffered
	// writer that may already have flushed (large headers, an HTTP/2
	// HEADERS frame), and WroteRequest after the whole body may be out.
	var reached atomic.Bool
	traced := httptrace.WithClientTrace(callCtx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { reached.Store(true) }})
	hreq, err := http.NewRequestWithContext(traced, http.MethodPost, c.BaseURL+wk.kind.Path, bytes.NewReader(wk.body))
	if err != nil {
		wk.fail(c.Name)
		return nil, true, nil
	}
	// A *bytes.Reader lets net/http write the headers and the body in one
	// write (it flushes the headers first for bodies it does not know to be
	// in memory): one syscall and one segment less per call, for rotor and
	// for the provider. It also sets GetBody, with which the transport
	// sends a POST again only when not one byte of it was written (a pooled
	// connection the provider had closed); the provider never sees it twice.
	hreq.ContentLength = int64(len(wk.body))
	// A fresh header: nothing of the caller's (Authorization,
	// OpenAI-Organization, OpenAI-Project) travels but OpenAI-Beta.
	h := hreq.Header
	h.Set("Authorization", "Bearer "+c.Key.Reveal())
	h.Set("Content-Type", "application/json")
	if wk.stream {
		h.Set("Accept", "text/event-stream")
	} else {
		h.Set("Accept", "application/json")
	}
	h.Set("User-Agent", rt.cfg.UserAgent)
	h.Set("X-Request-ID", wk.id)
	if wk.beta != "" && wk.kind != KindDecisions {
		h.Set("OpenAI-Beta", wk.beta)
	}

	wk.info.Credential, wk.info.CredentialDigest = c.Name, c.fingerprint
	sent := rt.cfg.Clock.Now()
	resp, err := rt.cfg.HTTPClient.Do(hreq)
	if err != nil {
		if (httpx.NotSent(err) || !reached.Load()) && ctx.Err() == nil {
			// The connection was never made (the dial, the name lookup
			// or the TLS handshake failed): nothing reached the
			// provider, so another credential may serve the request.
			wk.fail(c.Name)
			wk.unreachable = true
			rt.upstream(wk.ps.name, c.Name, "unreachable")
			wk.moving, wk.movingFrom = failoverUnreachable, c.Name
			return nil, true, nil
		}
		if !reached.Load() && ctx.Err() != nil {
			// The caller left, or the deadline passed, while the
			// connection was being opened: nothing was sent, so the call
			// is no attempt (no usage row when it was the only one), and
			// ran nothing. The walk's next turn ends on ctx.
			rt.upstream(wk.ps.name, c.Name, "unreachable")
			return nil, true, nil
		}
		wk.sentBy(c.Name)
		rt.upstream(wk.ps.name, c.Name, "network_error")
		wk.ps.pool.Record(c.Name, pool.Observation{Scope: wk.scope, Sent: sent, Err: err})
		// Network ambiguity: the provider may have run it. Never replayed.
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
		return nil, false, ErrUpstream
	}
	defer func() {
		if !handedOff {
			resp.Body.Close()
		}
	}()
	wk.sentBy(c.Name)
	failpoint.Hit(failpoint.DuringUpstream) // crash tests: the provider has the request, its answer is unread
	status := resp.StatusCode
	var pe providerError
	if status >= 400 {
		pe = parseProviderError(wk.readErrorBody(ctx, callCtx, cancelCall, resp))
	}
	key := c.Key.Reveal()
	v := classify(status, pe, wk.upstream, wk.kind.Path)
	rt.upstream(wk.ps.name, c.Name, outcomeNames[v])
	var advice time.Duration // a 429's wait advice, for the caller when it is passed through
	if status == http.StatusTooManyRequests {
		// Every 429 feeds the shared backoff, whatever its class.
		obs := pool.Observation{Scope: wk.scope, Sent: sent, Status: status}
		if s, ok := httpx.ProviderRetryAdvice(resp.Header, rt.cfg.Clock.Now()); ok {
			obs.RetryAfter, obs.HasRetryAfter = s, true
			// At least a millisecond: advice of 0 still says "wait",
			// which the caller gets as rotor's least, one second.
			advice = max(time.Duration(s*float64(time.Second)), time.Millisecond)
		}
		wk.ps.pool.Record(c.Name, obs)
		rt.cooldown(wk.ps.name, "throttle")
	}
	switch v {
	case outcomeAnswer:
		if wk.stream && isEventStream(resp.Header) {
			// The first byte is the caller's from here: no failover, no
			// replay.
			wk.ps.pool.Record(c.Name, pool.Observation{Scope: wk.scope, Sent: sent, Status: status})
			handedOff = true
			return &answer{status: status, header: resp.Header, stream: resp.Body, cancel: cancelCause, streamCtx: callCtx}, false, nil
		}
		body, err := readAll(resp.Body, MaxBody, rt.buffers, resp.ContentLength)
		wk.ps.pool.Record(c.Name, pool.Observation{Scope: wk.scope, Sent: sent, Status: status})
		if err != nil {
			switch {
			case errors.Is(err, errTooLarge):
				// The provider ran the request, but its usage cannot be
				// read: no token counts are recorded.
				return nil, false, ErrResponseTooLarge
			case errors.Is(err, ErrOverloaded):
				return nil, false, ErrOverloaded
			case ctx.Err() != nil:
				return nil, false, ctx.Err()
			}
			return nil, false, ErrUpstream
		}
		return &answer{status: status, header: resp.Header, body: body, usage: wk.kind.usage(body.b)}, false, nil
	case outcomeRedirect:
		// Redirects are never followed: the key must not travel.
		wk.ps.pool.Record(c.Name, pool.Observation{Scope: wk.scope, Sent: sent, Status: status, Outcome: pool.OutcomeProviderFailure})
		return nil, false, httpx.NewError(httpx.CodeUpstreamRedirect)
	case outcomeQuota:
		wk.reject(c.Name, failoverQuota)
		wk.moving, wk.movingFrom = failoverQuota, c.Name
		return nil, true, nil
	case outcomeRateLimited:
		// Confirmed temporary: the cooldown is shared through the pool;
		// selection moves on or waits.
		if wk.throttled == nil {
			wk.throttled = map[string]int{}
		}
		wk.throttled[c.Name]++
		wk.moving, wk.movingFrom = failoverRateLimited, c.Name
		return nil, true, nil
	case outcomeAuth:
		wk.ps.pool.Record(c.Name, pool.Observation{Scope: wk.scope, Sent: sent, Status: status})
		if status == http.StatusUnauthorized {
			rt.cooldown(wk.ps.name, "auth")
		}
		wk.reject(c.Name, failoverAuth)
		wk.moving, wk.movingFrom = failoverAuth, c.Name
		return nil, true, nil
	case outcomeUnsupported:
		wk.ps.pool.Record(c.Name, pool.Observation{Scope: wk.scope, Sent: sent, Status: status, Outcome: pool.OutcomeCallerError})
		rt.unsupported.add(capKey{c.identity(), wk.upstream, wk.kind.Path})
		wk.fail(c.Name)
		wk.moving, wk.movingFrom = failoverUnsupported, c.Name
		return nil, true, nil
	}
	if status != http.StatusTooManyRequests {
		wk.ps.pool.Record(c.Name, pool.Observation{Scope: wk.scope, Sent: sent, Status: status})
		if ctx.Err() != nil {
			return nil, false, ctx.Err()
		}
	}
	perr := newProviderError(status, pe, key)
	perr.RetryAfter = advice
	return nil, false, perr
}

// unsupportedNotFound reads a 404 by its structured error first (DESIGN,
// "Reading the spec in rotor's terms"): codes model_not_found and
// unknown_url mean the endpoint is unsupported for this credential; any
// other code, or a param other than model, is about the request's content
// (a missing input file), whatever the message names. Only an error with
// neither code nor param is read by its message: naming the model or the
// endpoint, it is unsupported. A 404 without a structured error is
// unsupported, and so is one whose error object holds no message, code
// or param ({"error":{}}): it carries nothing that says content.
func unsupportedNotFound(pe providerError, model, path string) bool {
	switch {
	case !pe.structured, pe.Message == "" && pe.Code == "" && pe.Param == "":
		return true
	case pe.Code == "model_not_found" || pe.Code == "unknown_url":
		return true
	case pe.Code != "":
		return false
	case pe.Param != "":
		return pe.Param == "model"
	}
	return mentions(pe.Message, model) || strings.Contains(pe.Message, path) || strings.Contains(strings.ToLower(pe.Message), "endpoint")
}

func mentions(msg, model string) bool {
	return model != "" && strings.Contains(msg, model)
}

// readErrorBody reads an error answer until ErrorBodyIdle passes without
// data or 64 KiB arrive, so a stalled rejection cannot hold failover until
// the deadline.
func (wk *walk) readErrorBody(ctx, callCtx context.Context, cancel context.CancelFunc, resp *http.Response) []byte {
	idle := wk.rt.cfg.ErrorBodyIdle
	timer := time.AfterFunc(idle, cancel)
	defer timer.Stop()
	buf := make([]byte, 0, 1024)
	chunk := make([]byte, 4096)
	for len(buf) < MaxErrorBody {
		n, err := resp.Body.Read(chunk[:min(len(chunk), MaxErrorBody-len(buf))])
		buf = append(buf, chunk[:n]...)
		if n > 0 {
			timer.Reset(idle)
		}
		if err != nil {
			break
		}
	}
	return buf
}

func (rt *Route) failover(poolName, reason string) {
	if rt.cfg.Metrics != nil {
		rt.cfg.Metrics.Failover(poolName, reason)
	}
}

func (rt *Route) upstream(poolName, credential, outcome string) {
	if rt.cfg.Metrics != nil {
		rt.cfg.Metrics.Upstream(poolName, credential, outcome)
	}
}

func (rt *Route) cooldown(poolName, class string) {
	if rt.cfg.Metrics != nil {
		rt.cfg.Metrics.Cooldown(poolName, class)
	}
}

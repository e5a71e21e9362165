package decisions

import (
	"net/http"
	"strings"
	"time"

	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/internal/jsonobj"
	"github.com/rotorhq/rotor/internal/names"
)

// Kind is what differs between the routes one Route serves (DESIGN,
// "OpenAI-compatible routes"): the path, the eligibility rule, the
// deadline, the usage fields and two error names. Everything else (size
// cap, JSON, prefix, admission, discovery, selection, failover, the row)
// is the one dispatch core in route.go and walk.go.
type Kind struct {
	// Path is the path served and forwarded to {base_url}{Path}.
	Path string
	// Operation is the ledger operation of the route's rows.
	Operation string
	// strictProfiles: a model profile must list Path (Decisions). Without
	// it, supported_endpoints restricts only where it is set.
	strictProfiles bool
	// barePool: a bare model name may use Config.DefaultPool.
	barePool bool
	// streams: "stream": true is served as an event stream.
	streams bool
	// generation: the request is bounded by Config.GenerationDeadline,
	// not Config.Deadline.
	generation bool
	// usage reads the answer's token counts.
	usage func([]byte) jsonobj.Usage
	// poolUnavailable and tooLarge are the route's names for
	// ErrPoolUnavailable and ErrResponseTooLarge.
	poolUnavailable, tooLarge string
}

// The routes.
var (
	KindDecisions = &Kind{Path: Endpoint, Operation: Operation, strictProfiles: true, usage: jsonobj.ReadUsage,
		poolUnavailable: httpx.CodePoolUnavailable, tooLarge: httpx.CodeResponseTooLarge}
	KindResponses = &Kind{Path: "/v1/responses", Operation: "responses", barePool: true, generation: true, streams: true, usage: jsonobj.ReadResponsesUsage,
		poolUnavailable: httpx.CodeRoutePoolUnavailable, tooLarge: httpx.CodeRouteResponseTooLarge}
	KindChat = &Kind{Path: "/v1/chat/completions", Operation: "chat.completions", barePool: true, generation: true, streams: true, usage: jsonobj.ReadChatUsage,
		poolUnavailable: httpx.CodeRoutePoolUnavailable, tooLarge: httpx.CodeRouteResponseTooLarge}
	KindEmbeddings = &Kind{Path: "/v1/embeddings", Operation: "embeddings", barePool: true, generation: true, usage: jsonobj.ReadEmbeddingsUsage,
		poolUnavailable: httpx.CodeRoutePoolUnavailable, tooLarge: httpx.CodeRouteResponseTooLarge}
)

// OpenAIKinds are the OpenAI-compatible routes, in the order /v1/models
// reads eligibility.
var OpenAIKinds = []*Kind{KindResponses, KindChat, KindEmbeddings}

// errorResponse is ErrorResponse with the route's names for the codes
// that differ between routes.
func (k *Kind) errorResponse(err error) *httpx.Error {
	e := ErrorResponse(err)
	switch e.Code {
	case httpx.CodePoolUnavailable:
		e = httpx.NewError(k.poolUnavailable)
	case httpx.CodeResponseTooLarge:
		e = httpx.NewError(k.tooLarge)
	}
	return e
}

// deadline is the bound of the whole request on this route.
func (k *Kind) deadline(cfg *Config) time.Duration {
	if k.generation {
		return cfg.GenerationDeadline
	}
	return cfg.Deadline
}

// eligible applies the route's profile rule to a credential's profiles.
func (k *Kind) eligible(c *credential, model string) bool {
	eps, set := c.Profiles[model]
	if !set && !k.strictProfiles {
		return true
	}
	for _, e := range eps {
		if e == k.Path {
			return true
		}
	}
	return false
}

// Handler serves one route of the Route.
func (rt *Route) Handler(k *Kind) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { rt.serveKind(k, w, r) })
}

// OpenAI serves the OpenAI-compatible routes: POST /v1/responses,
// /v1/chat/completions and /v1/embeddings, GET /v1/models, and 404
// not_found for GET/DELETE /v1/responses/{id}. Other methods get 405.
func (rt *Route) OpenAI() http.Handler {
	mux := http.NewServeMux()
	for _, k := range OpenAIKinds {
		mux.Handle(k.Path, rt.Handler(k))
	}
	mux.Handle("/v1/models", httpx.OnlyMethod(http.MethodGet, http.HandlerFunc(rt.serveModels)))
	stored := func(w http.ResponseWriter, r *http.Request) {
		if !httpx.MethodAllowed(r.Method, http.MethodGet) && r.Method != http.MethodDelete {
			httpx.MethodNotAllowed(w, names.OpenAIMethods(r.URL.Path))
			return
		}
		httpx.WriteError(w, httpx.NewError(httpx.CodeNotFound).WithMessage("stored responses are not served by rotor"))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/v1/responses/") {
			// Any path under it, as sent (the mux would redirect
			// "/v1/responses//x" to its cleaned form).
			stored(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

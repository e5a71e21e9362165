package gateway

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/decisions"
	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/internal/secret"
	"github.com/rotorhq/rotor/ledger"
	"github.com/rotorhq/rotor/pool"
)

// ClientHeader carries the client label from the bridge to a standalone
// runtime. The runtime trusts it only from callers holding the runtime
// token; the bridge strips it from its own callers.
const ClientHeader = "X-Rotor-Client"

// DirectClient is the client label of requests sent to a standalone
// runtime without a bridge.
const DirectClient = "runtime"

// Budgets lists budget states for status and metrics.
type Budgets func(ctx context.Context) ([]budgets.Status, error)

// Config configures a Server. Router is required.
type Config struct {
	Router *decisions.Router
	// Token is the runtime's bearer token (required by Handler).
	Token   secret.Value
	Budgets Budgets
	Metrics *Metrics
	Logger  *slog.Logger
	Clock   clock.Clock
	// Port and ExtraHosts feed the Host check; AllowedOrigins the CORS
	// check.
	Port           int
	ExtraHosts     []string
	AllowedOrigins []string
	Version        string
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
	s.mux.Handle("/v1/decisions", cfg.Router)
	s.mux.Handle("/decisions", cfg.Router)
	s.mux.Handle("/healthz", httpx.OnlyMethod(http.MethodGet, http.HandlerFunc(Healthz)))
	s.mux.Handle("/metrics", httpx.OnlyMethod(http.MethodGet, cfg.Metrics.Handler()))
	s.mux.Handle("/v1/status", httpx.OnlyMethod(http.MethodGet, http.HandlerFunc(s.handleStatus)))
	s.mux.HandleFunc("/", notFound)
	return s
}

// Healthz answers without a token and without secrets.
func Healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"ok"}` + "\n"))
}

func notFound(w http.ResponseWriter, r *http.Request) {
	httpx.WriteError(w, httpx.NewError(httpx.CodeNotFound))
}

// TokenHashHeader carries, from an in-process bridge, the SHA-256 (hex)
// of the client token that authenticated the request, so that admission
// re-checks it in the ledger transaction (the bridge's front door may
// answer from a cached token list).
const TokenHashHeader = "X-Rotor-Token-Hash"

// Internal is the runtime for an in-process bridge: no guard and no
// logging of its own (the bridge does both), and it trusts the client label
// and token hash headers, which the bridge always sets itself. Never serve
// it on a socket.
func (s *Server) Internal() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := decisions.WithClient(r.Context(), r.Header.Get(ClientHeader))
		if h := r.Header.Get(TokenHashHeader); h != "" {
			var hash [32]byte
			if n, err := hex.Decode(hash[:], []byte(h)); err == nil && n == len(hash) {
				ctx = decisions.WithTokenHash(ctx, hash)
			}
		}
		s.mux.ServeHTTP(w, r.WithContext(ctx))
	})
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
		client := r.Header.Get(ClientHeader)
		if client == "" || !httpx.SafeID(client) {
			client = DirectClient
		}
		httpx.NoteLabel(r.Context(), client)
		s.mux.ServeHTTP(w, r.WithContext(decisions.WithClient(r.Context(), client)))
	})
	return Chain("runtime", g.Wrap(inner), s.cfg.Logger, s.cfg.Metrics, s.cfg.Clock, true)
}

// Chain wraps h in the outer layers every rotor server shares: panic
// recovery, request ids and the access log (one line per request, never a
// key or token).
func Chain(server string, h http.Handler, logger *slog.Logger, m *Metrics, clk clock.Clock, trustRequestID bool) http.Handler {
	logged := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := clk.Now()
		ctx, info := decisions.WithInfo(r.Context())
		ctx, client := httpx.WithLabelSlot(ctx)
		rec := &httpx.StatusRecorder{ResponseWriter: w}
		h.ServeHTTP(rec, r.WithContext(ctx))
		d := clk.Now().Sub(start)
		status := rec.Status
		if status == 0 {
			status = http.StatusOK
		}
		route := r.URL.Path
		switch route {
		case "/v1/decisions", "/decisions", "/healthz", "/metrics", "/v1/status":
		default:
			route = "other"
		}
		m.Request(server, route, status, info.Code, d)
		if route == "/healthz" || route == "/metrics" {
			return
		}
		logger.LogAttrs(r.Context(), slog.LevelInfo, "request",
			slog.String("server", server),
			slog.String("request_id", httpx.RequestID(r.Context())),
			slog.String("method", r.Method),
			slog.String("route", route),
			slog.Int("status", status),
			slog.String("code", info.Code),
			slog.String("pool", info.Pool),
			slog.String("model", info.Model),
			slog.String("credential", info.Credential),
			slog.String("credential_digest", info.CredentialDigest),
			slog.Int("attempts", info.Attempts),
			slog.String("client", *client),
			slog.Int64("duration_ms", d.Milliseconds()),
		)
	})
	return httpx.Recover(httpx.RequestIDs(logged, trustRequestID), logger)
}

// Status is GET /v1/status.
type Status struct {
	Version     string         `json:"version"`
	Pools       []PoolStatus   `json:"pools"`
	Budgets     []BudgetStatus `json:"budgets"`
	BudgetError string         `json:"budget_error,omitempty"`
	Time        time.Time      `json:"time"`
}

// PoolStatus is one pool's credentials and cooldowns.
type PoolStatus struct {
	pool.Snapshot
	Catalogs []CatalogStatus `json:"catalogs"`
}

// CatalogStatus is a credential's catalog freshness.
type CatalogStatus struct {
	Credential string    `json:"credential"`
	Region     string    `json:"region"`
	Fetched    time.Time `json:"fetched,omitzero"`
	Fresh      bool      `json:"fresh"`
}

// BudgetStatus is a budget's state.
type BudgetStatus struct {
	Name      string    `json:"name"`
	Kind      string    `json:"kind"`
	Window    string    `json:"window"`
	Limit     int64     `json:"limit"`
	Used      int64     `json:"used"`
	Remaining int64     `json:"remaining"`
	Unknown   int64     `json:"unknown_rows"`
	State     string    `json:"state"`
	FreesAt   time.Time `json:"frees_at,omitzero"`
}

// StatusNow assembles the status document.
func (s *Server) StatusNow(ctx context.Context) Status {
	st := Status{Version: s.cfg.Version, Time: s.cfg.Clock.Now().UTC(), Pools: []PoolStatus{}, Budgets: []BudgetStatus{}}
	cats := s.cfg.Router.Status()
	pools := s.cfg.Router.Pools()
	for _, name := range []string{"api", "zdr"} {
		p, ok := pools[name]
		if !ok {
			continue
		}
		ps := PoolStatus{Snapshot: p.Snapshot(), Catalogs: []CatalogStatus{}}
		for _, c := range cats {
			if c.Pool == name {
				ps.Catalogs = append(ps.Catalogs, CatalogStatus{Credential: c.Name, Region: c.Region, Fetched: c.CatalogFetched, Fresh: c.CatalogFresh})
			}
		}
		st.Pools = append(st.Pools, ps)
	}
	if s.cfg.Budgets != nil {
		bs, err := s.cfg.Budgets(ctx)
		if err != nil {
			st.BudgetError = "budgets unavailable"
		}
		for _, b := range bs {
			st.Budgets = append(st.Budgets, BudgetStatus{Name: b.Name, Kind: string(b.Kind), Window: b.Window.String(), Limit: b.Limit,
				Used: b.Used, Remaining: b.Remaining(), Unknown: b.UnknownRows, State: string(b.State), FreesAt: b.FreesAt})
		}
	}
	return st
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(s.StatusNow(r.Context()))
}

// BudgetLister returns a Budgets function over the ledger.
func BudgetLister(store *ledger.Store) Budgets {
	return func(ctx context.Context) ([]budgets.Status, error) {
		var out []budgets.Status
		err := store.View(ctx, func(r ledger.WindowReader) error {
			bs, _ := budgets.Records(r.Budgets())
			for _, b := range bs {
				st, err := budgets.Evaluate(r, b)
				if err != nil {
					return err
				}
				out = append(out, st)
			}
			return nil
		})
		return out, err
	}
}

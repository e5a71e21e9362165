package decisions

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/testutil"
	"github.com/rotorhq/rotor/internal/testutil/ledgertest"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/internal/clock"
	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/internal/secret"
	"github.com/rotorhq/rotor/ledger"
	"github.com/rotorhq/rotor/pool"
)

var t0 = time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)

// cred describes one test credential: its pool, key and catalog.
type cred struct {
	name, pool, region, key string
	models                  []string // catalog at the provider
	profiled                []string // models with supported_endpoints [/v1/decisions]; nil = all catalog models
	allow, deny             []string
	baseURL                 string // default: the fake provider
}

type opts struct {
	creds            []cred
	modelCooldown    bool
	firstKeyFallback bool
	deadline         time.Duration
	errorIdle        time.Duration
	catalogTimeout   time.Duration
	busyTimeout      time.Duration // the ledger's; 0: its default
	maxBuffered      int64
	quotaBuckets     map[string][]string
	storeLimit       int          // live cooldown observations; 0: the default 10000
	httpClient       *http.Client // default: the router's own
	// wrapLedger, when set, wraps the ledger the router writes to.
	wrapLedger func(Ledger) Ledger
	// openAI: no model profiles unless profiles says otherwise (the
	// OpenAI routes' rule), and routes.default_pool.
	openAI      bool
	profiles    map[string][]string
	defaultPool string
	generation  time.Duration
	// metrics, when set, receives the route's events.
	metrics Metrics
	// writeTimeout is the route's WriteTimeout (the server's).
	writeTimeout time.Duration
	// reservationGrace is the route's ReservationGrace.
	reservationGrace time.Duration
}

type harness struct {
	t      *testing.T
	fp     *fp.Server
	clk    *clock.Fake
	store  *ledger.Store
	router *Route
	srv    *httptest.Server
	pools  map[string]*pool.Pool
	keys   map[string]string // credential name -> key
	log    *testutil.SyncBuffer
}

func defaultCreds() []cred {
	return []cred{
		{name: "team-a", pool: "api", key: "sk-test-a-0000000000000000000001", models: []string{"decide-mini", "decide-large"}},
		{name: "team-b", pool: "api", key: "sk-test-b-0000000000000000000002", models: []string{"decide-mini", "decide-large"}},
	}
}

func newHarness(t *testing.T, o opts) *harness {
	t.Helper()
	if o.creds == nil {
		o.creds = defaultCreds()
	}
	clk := clock.NewFake(t0)
	p, err := fp.Start(fp.Options{Now: clk.Now, AnswerSize: 256})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	store := ledgertest.Open(t, ledger.Options{Clock: clk, BusyTimeout: o.busyTimeout})
	h := &harness{t: t, fp: p, clk: clk, store: store, pools: map[string]*pool.Pool{}, keys: map[string]string{}, log: &testutil.SyncBuffer{}}
	pstore := pool.NewStore(clk, o.storeLimit)
	byPool := map[string][]CredentialConfig{}
	var order []string
	for _, c := range o.creds {
		if c.region == "" {
			c.region = "us"
		}
		if c.baseURL == "" {
			c.baseURL = p.URL()
			p.SetCatalog(c.key, c.models...)
		}
		prof := map[string][]string{}
		profiled := c.profiled
		if profiled == nil {
			profiled = c.models
		}
		for _, m := range profiled {
			if !o.openAI {
				prof[m] = []string{Endpoint}
			}
		}
		for m, eps := range o.profiles {
			prof[m] = eps
		}
		if _, ok := byPool[c.pool]; !ok {
			order = append(order, c.pool)
		}
		byPool[c.pool] = append(byPool[c.pool], CredentialConfig{Name: c.name, Region: c.region, BaseURL: c.baseURL, Key: secret.New(c.key), Allow: c.allow, Deny: c.deny, Profiles: prof})
		h.keys[c.name] = c.key
	}
	var pcs []PoolConfig
	for _, name := range order {
		var pcreds []pool.Credential
		for _, c := range byPool[name] {
			pcreds = append(pcreds, pool.Credential{Name: c.Name, Key: c.Key})
		}
		pl := pool.New(pool.Config{Options: pool.Options{Name: name, QuotaBuckets: o.quotaBuckets, CatalogTTL: 10 * time.Minute, FirstKeyFallback: o.firstKeyFallback},
			Credentials: pcreds, Settings: pool.Settings{ModelCooldownEnabled: o.modelCooldown, MaxSeconds: 3600}, Store: pstore, Clock: clk})
		h.pools[name] = pl
		pcs = append(pcs, PoolConfig{Name: name, Credentials: byPool[name], Pool: pl})
	}
	var lg Ledger = store
	if o.wrapLedger != nil {
		lg = o.wrapLedger(lg)
	}
	h.router = New(Config{Pools: pcs, Ledger: lg, Admitter: budgets.NewAdmitter(), Clock: clk,
		HTTPClient: o.httpClient, Deadline: o.deadline, ErrorBodyIdle: o.errorIdle, CatalogTimeout: o.catalogTimeout, MaxBuffered: o.maxBuffered,
		Logger: newTestLogger(h.log), DefaultPool: o.defaultPool, GenerationDeadline: o.generation, Metrics: o.metrics, WriteTimeout: o.writeTimeout, ReservationGrace: o.reservationGrace})
	openAI := h.router.OpenAI()
	h.srv = httptest.NewServer(httpx.RequestIDs(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, _ := httpx.WithAccessInfo(httpx.WithCaller(r.Context(), httpx.Caller{Label: "test-client"}))
		if r.URL.Path != Endpoint && r.URL.Path != "/decisions" {
			openAI.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		h.router.ServeHTTP(w, r.WithContext(ctx))
	}), nil))
	t.Cleanup(h.srv.Close)
	return h
}

type reply struct {
	status int
	header http.Header
	body   []byte
	err    struct {
		Message      string  `json:"message"`
		Type         string  `json:"type"`
		Code         *string `json:"code"`
		Param        *string `json:"param"`
		RetryAfterMS int64   `json:"retry_after_ms"`
	}
}

func (r reply) code() string {
	if r.err.Code == nil {
		return ""
	}
	return *r.err.Code
}

func (h *harness) do(ctx context.Context, path, body string, hdr ...string) reply {
	h.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, body: b}
	if resp.StatusCode >= 400 {
		var e struct {
			Error json.RawMessage `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil {
			json.Unmarshal(e.Error, &r.err)
		}
	}
	return r
}

func (h *harness) post(body string, hdr ...string) reply {
	h.t.Helper()
	return h.do(context.Background(), "/v1/decisions", body, hdr...)
}

// postAcrossWait sends body, waits until the route sleeps on the clock (a
// cooldown's release), moves the clock by d and returns the answer.
func (h *harness) postAcrossWait(body string, d time.Duration) reply {
	h.t.Helper()
	done := make(chan reply, 1)
	go func() { done <- h.post(body) }()
	h.waitTimers(1)
	h.clk.Advance(d)
	return <-done
}

// postRunningWaitsOut sends body and, until it is answered, moves the
// clock a millisecond whenever the route sleeps on it, so that every wait
// for a release runs out; each turn calls check first (a test's guard
// against a storm of calls).
func (h *harness) postRunningWaitsOut(body string, check func()) reply {
	h.t.Helper()
	done := make(chan reply, 1)
	go func() { done <- h.post(body) }()
	for {
		select {
		case r := <-done:
			return r
		default:
		}
		check()
		if h.clk.Timers() > 0 {
			h.clk.Advance(time.Millisecond)
		}
		time.Sleep(time.Millisecond)
	}
}

func decision(model string) string {
	return fmt.Sprintf(`{"model":%q,"input":"Is the sky blue?","question":{"type":"predicate"}}`, model)
}

func (h *harness) hits(name, path string) int { return h.fp.HitsFor(h.keys[name], path) }

// rows returns every ledger row.
func (h *harness) rows() []ledger.Row {
	h.t.Helper()
	rows, err := h.store.Rows(context.Background(), t0.Add(-24*time.Hour), t0.Add(365*24*time.Hour), 0)
	if err != nil {
		h.t.Fatal(err)
	}
	return rows
}

// row returns the ledger row of a request id.
func (h *harness) row(id string) ledger.Row {
	h.t.Helper()
	for _, r := range h.rows() {
		if r.RequestID == id {
			return r
		}
	}
	h.t.Fatalf("no ledger row for request %s", id)
	return ledger.Row{}
}

// wantStatus fails unless r has the status (and code, when given).
func wantStatus(t *testing.T, r reply, status int, code string) {
	t.Helper()
	if r.status != status || (code != "" && r.code() != code) {
		t.Fatalf("answer %d %q, want %d %q\n%s", r.status, r.code(), status, code, r.body)
	}
}

// waitTimers blocks until n goroutines wait on the fake clock.
func (h *harness) waitTimers(n int) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for h.clk.Timers() < n {
		if time.Now().After(deadline) {
			h.t.Fatalf("no goroutine waits on the clock")
		}
		time.Sleep(time.Millisecond)
	}
}

// wantNoProviderCall fails the test if the provider saw a catalog fetch or
// a decision.
func (h *harness) wantNoProviderCall() {
	h.t.Helper()
	if n := h.fp.Hits(fp.PathModels) + h.fp.Hits(fp.PathDecisions); n != 0 {
		h.t.Errorf("provider hit %d times, want 0", n)
	}
}

// wantUntouched fails the test if the provider saw anything or the ledger
// holds a row: what every refusal before discovery must leave.
func (h *harness) wantUntouched() {
	h.t.Helper()
	h.wantNoProviderCall()
	if n := len(h.rows()); n != 0 {
		h.t.Errorf("%d ledger rows, want 0", n)
	}
}

// serveDraining serves the harness's handler on a loopback listener of
// its own through httpx.Serve, as rotor serves it (100 ms to drain, 10 s
// to settle), until stop is called; served gets Serve's answer.
func (h *harness) serveDraining() (addr string, stop func(), served <-chan error) {
	h.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- httpx.Serve(ctx, ln, h.srv.Config.Handler, httpx.ServeOptions{Drain: 100 * time.Millisecond, Settle: 10 * time.Second})
	}()
	return ln.Addr().String(), cancel, done
}

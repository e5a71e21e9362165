package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/budgets"
	"github.com/rotorhq/rotor/decisions"
	"github.com/rotorhq/rotor/internal/clock"
	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/internal/secret"
	"github.com/rotorhq/rotor/internal/testutil/ledgertest"
	"github.com/rotorhq/rotor/ledger"
	"github.com/rotorhq/rotor/pool"
)

const runtimeToken = "rtr_runtime-0123456789abcdefghijklmnopqrstuv"

type rig struct {
	srv   *httptest.Server
	fp    *fp.Server
	store *ledger.Store
	logs  *bytes.Buffer
}

func newRig(t *testing.T) *rig {
	t.Helper()
	p, err := fp.Start(fp.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	key := "sk-runtime-test-0123456789abcdef"
	p.AddKey(key, "decide-mini")
	store := ledgertest.Open(t)
	clk := clock.Real()
	pl := pool.New(pool.Config{Options: pool.Options{Name: "api"}, Credentials: []pool.Credential{{Name: "a", Key: secret.New(key)}}, Store: pool.NewStore(clk, 0), Clock: clk, Settings: pool.Settings{MaxSeconds: 3600}})
	router := decisions.New(decisions.Config{Pools: []decisions.PoolConfig{{Name: "api", Pool: pl, Credentials: []decisions.CredentialConfig{{
		Name: "a", Region: "us", BaseURL: p.URL(), Key: secret.New(key), Profiles: map[string][]string{"decide-mini": {decisions.Endpoint}}}}}},
		Ledger: store, Admitter: budgets.NewAdmitter()})
	logs := &bytes.Buffer{}
	r := &rig{fp: p, store: store, logs: logs}
	var s *Server
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { s.Handler().ServeHTTP(w, req) }))
	t.Cleanup(r.srv.Close)
	u, _ := url.Parse(r.srv.URL)
	port, _ := strconv.Atoi(u.Port())
	s = New(Config{Router: router, Token: secret.New(runtimeToken), Budgets: BudgetLister(store), Logger: slog.New(slog.NewJSONHandler(logs, nil)), Port: port, Version: "test"})
	return r
}

func (r *rig) post(t *testing.T, token string, hdr ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", r.srv.URL+"/v1/decisions", strings.NewReader(`{"model":"api/decide-mini","input":"x","question":{"type":"predicate"}}`))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestStandaloneRuntimeRequiresItsToken(t *testing.T) {
	r := newRig(t)
	if code, _ := r.post(t, ""); code != 401 {
		t.Errorf("no token: %d", code)
	}
	if code, _ := r.post(t, "rtr_wrong-0123456789abcdefghijklmnopqrstuvw"); code != 401 {
		t.Errorf("wrong token: %d", code)
	}
	if code, body := r.post(t, runtimeToken); code != 200 {
		t.Errorf("runtime token: %d %s", code, body)
	}
	if n := r.fp.Hits(fp.PathDecisions); n != 1 {
		t.Errorf("%d decisions reached the provider, want 1", n)
	}
}

// The client label header is honoured from holders of the runtime token
// (the bridge), and a malformed one falls back to "runtime".
func TestClientLabelFromBridgeHeader(t *testing.T) {
	r := newRig(t)
	r.post(t, runtimeToken, "X-Rotor-Client", "ci")
	r.post(t, runtimeToken, "X-Rotor-Client", "bad label!")
	r.post(t, runtimeToken)
	rows, _ := r.store.Rows(context.Background(), time.Now().Add(-time.Hour), time.Now().Add(time.Hour), 0)
	var clients []string
	for _, row := range rows {
		clients = append(clients, row.Client)
	}
	sort.Strings(clients) // rows of one millisecond come in request id order
	if strings.Join(clients, ",") != "ci,runtime,runtime" {
		t.Errorf("clients = %v", clients)
	}
}

func TestAccessLogLineHasNoSecrets(t *testing.T) {
	r := newRig(t)
	r.post(t, runtimeToken, "X-Rotor-Client", "ci")
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(r.logs.String()), "\n") {
		if strings.Contains(l, `"msg":"request"`) {
			json.Unmarshal([]byte(l), &line)
		}
	}
	for _, k := range []string{"request_id", "route", "pool", "model", "status", "duration_ms", "credential", "credential_digest"} {
		if _, ok := line[k]; !ok {
			t.Errorf("log line lacks %s: %v", k, line)
		}
	}
	if line["client"] != "ci" {
		t.Errorf("log line client = %v, want the label the bridge sent", line["client"])
	}
	if strings.Contains(r.logs.String(), runtimeToken) || strings.Contains(r.logs.String(), "sk-runtime-test") {
		t.Error("log contains a secret")
	}
}

func TestStatusDocument(t *testing.T) {
	r := newRig(t)
	r.post(t, runtimeToken)
	req, _ := http.NewRequest("GET", r.srv.URL+"/v1/status", nil)
	req.Header.Set("Authorization", "Bearer "+runtimeToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if len(st.Pools) != 1 || st.Pools[0].Pool != "api" || len(st.Pools[0].Catalogs) != 1 || !st.Pools[0].Catalogs[0].Fresh {
		t.Errorf("status = %+v", st)
	}
}

func TestPanicBecomesGeneric500(t *testing.T) {
	logs := &bytes.Buffer{}
	h := Chain("test", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic("boom with secret sk-xyz") }),
		slog.New(slog.NewTextHandler(logs, nil)), NewMetrics(), clock.Real(), false)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/x", nil))
	if rec.Code != 500 || strings.Contains(rec.Body.String(), "boom") || strings.Contains(logs.String(), "sk-xyz") {
		t.Errorf("panic answer %d %s; log %s", rec.Code, rec.Body, logs)
	}
}

// Issue 14, item 10: another method on a known path answers 405
// method_not_allowed with Allow (POST on the Decisions routes); before, the
// catch-all answered 404. Unknown paths stay 404. Internal serves the same
// mux to an in-process bridge.
func TestNonPostOnDecisionsIs405WithAllow(t *testing.T) {
	r := newRig(t)
	for _, tt := range []struct {
		method, path string
		status       int
		allow        string
	}{
		{"GET", "/v1/decisions", 405, "POST"},
		{"PUT", "/v1/decisions", 405, "POST"},
		{"DELETE", "/decisions", 405, "POST"},
		{"HEAD", "/v1/decisions", 405, "POST"},
		{"POST", "/v1/status", 405, "GET"},
		{"POST", "/metrics", 405, "GET"},
		{"GET", "/v1/nothing", 404, ""},
	} {
		req, _ := http.NewRequest(tt.method, r.srv.URL+tt.path, nil)
		req.Header.Set("Authorization", "Bearer "+runtimeToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.status || resp.Header.Get("Allow") != tt.allow {
			t.Errorf("%s %s = %d Allow %q, want %d Allow %q", tt.method, tt.path, resp.StatusCode, resp.Header.Get("Allow"), tt.status, tt.allow)
		}
		if tt.status == 405 && tt.method != "HEAD" && !strings.Contains(string(b), `"method_not_allowed"`) {
			t.Errorf("%s %s body %s, want code method_not_allowed", tt.method, tt.path, b)
		}
	}
	if n := r.fp.Hits(fp.PathModels) + r.fp.Hits(fp.PathDecisions); n != 0 {
		t.Errorf("provider hit %d times", n)
	}
}

// Spec: "The runtime rotation proxy accepts POST /v1/decisions and POST
// /decisions": both paths reach the route through the standalone
// runtime's guard.
func TestRuntimeServesBothDecisionsPaths(t *testing.T) {
	r := newRig(t)
	for _, path := range []string{"/v1/decisions", "/decisions"} {
		req, _ := http.NewRequest("POST", r.srv.URL+path, strings.NewReader(`{"model":"api/decide-mini","input":"x","question":{"type":"predicate"}}`))
		req.Header.Set("Authorization", "Bearer "+runtimeToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("POST %s = %d, want 200", path, resp.StatusCode)
		}
	}
	if n := r.fp.Hits(fp.PathDecisions); n != 2 {
		t.Errorf("%d decisions reached the provider, want 2", n)
	}
}

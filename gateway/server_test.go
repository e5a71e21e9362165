package gateway

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rotorhq/rotor/internal/httpx"
	"github.com/rotorhq/rotor/internal/secret"
	"github.com/rotorhq/rotor/internal/testutil"
)

const runtimeToken = "rtr_runtime-0123456789abcdefghijklmnopqrstuv"

// fakeRoute stands in for the Decisions route: it answers POST with 200,
// fills the access record as the route would, and keeps the caller label
// of each request it served.
type fakeRoute struct {
	mu      sync.Mutex
	clients []string
}

func (f *fakeRoute) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		httpx.MethodNotAllowed(w, http.MethodPost)
		return
	}
	info := httpx.AccessInfoFrom(r.Context())
	info.Pool, info.Model, info.Credential, info.CredentialDigest, info.Attempts = "api", "decide-mini", "a", "digest-a", 1
	f.mu.Lock()
	f.clients = append(f.clients, httpx.CallerFrom(r.Context()).Label)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"answer":true}`))
}

func (f *fakeRoute) served() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.clients...)
}

// fakeStatus is a status document of the gateway's own making.
type fakeStatus struct {
	Version string   `json:"version"`
	Pools   []string `json:"pools"`
}

type rig struct {
	srv    *httptest.Server
	route  *fakeRoute
	openAI *fakeRoute
	logs   *testutil.SyncBuffer
}

func newRig(t *testing.T) *rig {
	t.Helper()
	logs := &testutil.SyncBuffer{}
	r := &rig{route: &fakeRoute{}, openAI: &fakeRoute{}, logs: logs}
	var s *Server
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { s.Handler().ServeHTTP(w, req) }))
	t.Cleanup(r.srv.Close)
	u, _ := url.Parse(r.srv.URL)
	port, _ := strconv.Atoi(u.Port())
	status := func(context.Context) any { return fakeStatus{Version: "test", Pools: []string{"api"}} }
	s = New(Config{Decisions: r.route, OpenAI: r.openAI, Status: status, Token: secret.New(runtimeToken), Logger: slog.New(slog.NewJSONHandler(logs, nil)), Port: port})
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
	if n := len(r.route.served()); n != 1 {
		t.Errorf("%d decisions reached the route, want 1", n)
	}
}

// The client label header is honoured from holders of the runtime token
// (the bridge), and a malformed one falls back to "runtime".
func TestClientLabelFromBridgeHeader(t *testing.T) {
	r := newRig(t)
	r.post(t, runtimeToken, "X-Rotor-Client", "ci")
	r.post(t, runtimeToken, "X-Rotor-Client", "bad label!")
	r.post(t, runtimeToken)
	if clients := r.route.served(); strings.Join(clients, ",") != "ci,runtime,runtime" {
		t.Errorf("clients = %v", clients)
	}
}

// The runtime keeps an incoming X-Request-ID only from a bridge (the
// runtime token and a caller's label), so that the bridge's and the
// runtime's access lines share it. It kept any caller's before the token
// check: a caller without the token chose the id of its 401 log line, and
// one calling the runtime directly could give two requests one id (two
// rows, which settle and copy look up by id).
func TestRuntimeKeepsARequestIDFromABridgeOnly(t *testing.T) {
	r := newRig(t)
	const chosen = "chosen-id-0001"
	for _, c := range []struct {
		name, token, client string
		status              int
		kept                bool
	}{
		{"a bridge", runtimeToken, "ci", 200, true},
		{"no token", "", "ci", 401, false},
		{"a wrong token", "rtr_wrong-0123456789abcdefghijklmnopqrstuvw", "ci", 401, false},
		{"a direct caller", runtimeToken, "", 200, false},
	} {
		req, _ := http.NewRequest("POST", r.srv.URL+"/v1/decisions", strings.NewReader(`{"model":"api/decide-mini","input":"x","question":{"type":"predicate"}}`))
		req.Header.Set("X-Request-ID", chosen)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		if c.client != "" {
			req.Header.Set("X-Rotor-Client", c.client)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		id := resp.Header.Get("X-Request-ID")
		if resp.StatusCode != c.status || id == "" || (id == chosen) != c.kept {
			t.Errorf("%s: status %d, X-Request-ID %q; want %d, the caller's id kept: %v", c.name, resp.StatusCode, id, c.status, c.kept)
		}
	}
	if n := strings.Count(r.logs.String(), chosen); n != 1 {
		t.Errorf("the chosen id is in %d log lines, want only the bridge's request's:\n%s", n, r.logs.String())
	}
}

func TestAccessLogLineHasNoSecrets(t *testing.T) {
	r := newRig(t)
	r.post(t, runtimeToken, "X-Rotor-Client", "ci")
	var line map[string]any
	for _, l := range strings.Split(strings.TrimSpace(r.logs.WaitFor(t, 0, `"msg":"request"`)), "\n") {
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
	if strings.Contains(r.logs.String(), runtimeToken) {
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
	var st fakeStatus
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || st.Version != "test" || len(st.Pools) != 1 || st.Pools[0] != "api" {
		t.Errorf("status = %d %+v", resp.StatusCode, st)
	}
}

// Issue 14, item 10: another method on a known path answers 405
// method_not_allowed with Allow (POST on the Decisions routes); before, the
// catch-all answered 404. Unknown paths stay 404. InProcess serves the same
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
	if n := len(r.route.served()); n != 0 {
		t.Errorf("route served %d requests", n)
	}
}

// Spec: "The runtime rotation proxy accepts POST /v1/decisions and POST
// /decisions": both paths reach the route through the standalone
// runtime's guard.
func TestRuntimeServesBothDecisionsPaths(t *testing.T) {
	r := newRig(t)
	r.postOK(t, "/v1/decisions", "/decisions")
	if n := len(r.route.served()); n != 2 {
		t.Errorf("%d decisions reached the route, want 2", n)
	}
}

// /metrics exports each budget the list gives with the unit in the metric
// name (cost in USD), and 1 for its state among the states given (0 for
// the others); a budget whose used is unknown has no used sample at all.
func TestMetricsExportBudgets(t *testing.T) {
	m := NewMetrics()
	m.WatchBudgets(func(context.Context) ([]BudgetGauge, error) {
		return []BudgetGauge{
			{Name: "cost-month", Kind: "cost", Used: 250_000, Limit: 1_000_000, State: "exhausted"},
			{Name: "cost-day", Kind: "cost", Used: 7, Limit: 2_000_000, UsedUnknown: true, UnknownRows: 3, State: "fail-closed"},
			{Name: "tok", Kind: "tokens", Used: 40, Limit: 100, UnknownRows: 1, State: "ok"},
			{Name: "req", Kind: "requests", Used: 2, Limit: 5, State: "ok"},
		}, nil
	}, []string{"ok", "exhausted", "fail-closed"})
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		`rotor_budget_used_usd{name="cost-month"} 0.25`,
		`rotor_budget_limit_usd{name="cost-month"} 1`,
		`rotor_budget_limit_usd{name="cost-day"} 2`,
		`rotor_budget_unknown_rows{name="cost-day"} 3`,
		`rotor_budget_used_tokens{name="tok"} 40`,
		`rotor_budget_limit_tokens{name="tok"} 100`,
		`rotor_budget_used_requests{name="req"} 2`,
		`rotor_budget_limit_requests{name="req"} 5`,
		`rotor_budget_state{name="cost-month",state="exhausted"} 1`,
		`rotor_budget_state{name="cost-month",state="ok"} 0`,
		`rotor_budget_state{name="cost-day",state="fail-closed"} 1`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	for _, never := range []string{`rotor_budget_used_usd{name="cost-day"}`, `unit=`, `rotor_budget_used{`} {
		if strings.Contains(body, never) {
			t.Errorf("/metrics has %s:\n%s", never, body)
		}
	}
}

// The OpenAI routes reach their handler through the runtime's guard, with
// the caller's label; Decisions never sees them.
func TestRuntimeServesOpenAIRoutes(t *testing.T) {
	r := newRig(t)
	r.postOK(t, "/v1/responses", "/v1/chat/completions", "/v1/embeddings", "/v1/models", "/v1/responses/resp_1")
	if got := r.openAI.served(); len(got) != 5 || got[0] != DirectClient {
		t.Errorf("OpenAI handler served %v", got)
	}
	if n := len(r.route.served()); n != 0 {
		t.Errorf("Decisions served %d", n)
	}
}

// postOK posts a Decisions body to each path with the runtime token and
// fails unless each answers 200.
func (r *rig) postOK(t *testing.T, paths ...string) {
	t.Helper()
	for _, path := range paths {
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
}

package fakeprovider

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/testutil"

	"github.com/rotorhq/rotor/internal/secret"
)

func TestDecisionAnswers(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	tests := []struct {
		name      string
		body      string
		wantType  string
		wantValue any
	}{
		{"predicate", predicateBody, "predicate", true},
		{"choice strings", `{"model":"decide-mini","input":"pick","question":{"type":"choice","choices":["a","b"]}}`, "choice", "a"},
		{"choice booleans", `{"model":"decide-mini","input":"pick","question":{"type":"choice","choices":[true,false]}}`, "choice", true},
		{"score default range", `{"model":"decide-mini","input":"rate","question":{"type":"score"}}`, "score", json.Number("0.5")},
		{"score range", `{"model":"decide-mini","input":"rate","question":{"type":"score","min":1,"max":10}}`, "score", json.Number("5.5")},
		{"optional fields", `{"model":"decide-mini","input":"x","question":{"type":"predicate"},"cache":{"ttl":60},"safety":{"level":"strict"},"metadata":{"a":"b"}}`, "predicate", true},
		{"escaped model", `{"model":"decide-mini","input":["a","b"],"question":{"type":"predicate"}}`, "predicate", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := decide(t, c, s, keyA, tt.body)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("status = %d, want 200; body %s", resp.StatusCode, b)
			}
			if got := resp.Header.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type = %q", got)
			}
			if len(b) != DefaultAnswerSize {
				t.Errorf("answer size = %d, want %d", len(b), DefaultAnswerSize)
			}
			d := parseDecision(t, b)
			if d.Object != "decision" || d.Model != "decide-mini" || !strings.HasPrefix(d.ID, "dec_") || d.Created == 0 {
				t.Errorf("decision = %+v", d)
			}
			if d.Output["type"] != tt.wantType || d.Output["value"] != tt.wantValue {
				t.Errorf("output = %v, want type %s value %v", d.Output, tt.wantType, tt.wantValue)
			}
			in, out, total := ExpectedUsage([]byte(tt.body))
			if d.Usage.InputTokens != in || d.Usage.OutputTokens != out || d.Usage.TotalTokens != total {
				t.Errorf("usage = %+v, want %d/%d/%d", d.Usage, in, out, total)
			}
			if in != int64(len(tt.body))/4+1 || total != in+OutputTokens {
				t.Errorf("ExpectedUsage = %d/%d/%d, not the documented formula", in, out, total)
			}
			if p := d.Usage.InputTokensDetails.CachedTokens; p == nil || *p != 0 {
				t.Errorf("cached_tokens = %v, want 0", p)
			}
		})
	}
}

func TestDecisionUsageDeterministic(t *testing.T) {
	s := startFake(t, Options{AnswerSize: -1})
	c := newClient(t)
	_, b1 := decide(t, c, s, keyA, predicateBody)
	_, b2 := decide(t, c, s, keyA, predicateBody)
	d1, d2 := parseDecision(t, b1), parseDecision(t, b2)
	if d1.Usage.InputTokens != d2.Usage.InputTokens || d1.Usage.OutputTokens != d2.Usage.OutputTokens || d1.Usage.TotalTokens != d2.Usage.TotalTokens {
		t.Errorf("usage differs between identical requests: %+v vs %+v", d1.Usage, d2.Usage)
	}
	if d1.ID == d2.ID {
		t.Errorf("ids repeat: %s", d1.ID)
	}
	if strings.Contains(string(b1), "explanation") {
		t.Errorf("AnswerSize -1 still pads: %s", b1)
	}
}

func TestAnswerSizeOption(t *testing.T) {
	s := startFake(t, Options{AnswerSize: 4000})
	c := newClient(t)
	_, b := decide(t, c, s, keyA, predicateBody)
	if len(b) != 4000 {
		t.Errorf("answer size = %d, want 4000", len(b))
	}
	parseDecision(t, b)
}

func TestRefusal(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	body := `{"model":"decide-mini","input":"please refuse this","question":{"type":"predicate"}}`
	resp, b := decide(t, c, s, keyA, body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status = %d, want 200", resp.StatusCode)
	}
	d := parseDecision(t, b)
	if d.Output["type"] != "refusal" || d.Output["refusal"] != Refusal {
		t.Errorf("output = %v, want refusal", d.Output)
	}
	if in, _, total := ExpectedUsage([]byte(body)); d.Usage.InputTokens != in || d.Usage.TotalTokens != total {
		t.Errorf("usage = %+v", d.Usage)
	}
}

func TestUnknownKey(t *testing.T) {
	s := startFake(t, Options{})
	s.Script("sk-unknown", "", OK()) // scripts never apply to unknown keys
	c := newClient(t)
	for _, key := range []string{"", "sk-unknown", keyA + "x"} {
		for _, path := range []string{PathDecisions, PathModels} {
			method := http.MethodPost
			var body []byte = []byte(predicateBody)
			if path == PathModels {
				method, body = http.MethodGet, nil
			}
			resp, b := do(t, c, method, s.URL()+path, key, body)
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("%s %s key %q: status = %d, want 401", method, path, key, resp.StatusCode)
				continue
			}
			msg, typ, code, param := parseError(t, b)
			if msg != "Incorrect API key provided" || typ != "invalid_request_error" || code != "invalid_api_key" || param != "" {
				t.Errorf("401 body = %s", b)
			}
		}
	}
	// The scheme is case-insensitive.
	req := newRequest(t, waitCtx(t), http.MethodPost, s.URL()+PathDecisions, "", []byte(predicateBody))
	req.Header.Set("Authorization", "bearer "+keyA)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("lowercase bearer: status = %d, want 200", resp.StatusCode)
	}
	s.RemoveKey(keyA)
	if resp, _ := decide(t, c, s, keyA, predicateBody); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("removed key: status = %d, want 401", resp.StatusCode)
	}
}

func TestUnknownModel(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	resp, b := decide(t, c, s, keyA, bodyFor("decide-large"))
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("status = %d, want 404", resp.StatusCode)
	}
	msg, typ, code, param := parseError(t, b)
	if msg != "The model `decide-large` does not exist or you do not have access to it." || typ != "invalid_request_error" || code != "model_not_found" || param != "model" {
		t.Errorf("404 body = %s", b)
	}
	if resp, _ := decide(t, c, s, keyB, bodyFor("decide-large")); resp.StatusCode != http.StatusOK {
		t.Errorf("keyB decide-large: status = %d, want 200", resp.StatusCode)
	}
}

func TestBadRequests(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	tests := []struct {
		name      string
		body      string
		wantParam string
		wantCode  string
	}{
		{"malformed", `{"model":`, "", ""},
		{"not an object", `[1,2]`, "", ""},
		{"empty", ``, "", ""},
		{"no model", `{"input":"x","question":{"type":"predicate"}}`, "model", ""},
		{"null", `null`, "model", ""},
		{"no input", `{"model":"decide-mini","question":{"type":"predicate"}}`, "input", "missing_required_parameter"},
		{"no question", `{"model":"decide-mini","input":"x"}`, "question", "missing_required_parameter"},
		{"bad type", `{"model":"decide-mini","input":"x","question":{"type":"essay"}}`, "question.type", "invalid_value"},
		{"choice without choices", `{"model":"decide-mini","input":"x","question":{"type":"choice"}}`, "question.choices", "invalid_value"},
		{"score min over max", `{"model":"decide-mini","input":"x","question":{"type":"score","min":5,"max":1}}`, "question.max", "invalid_value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, b := decide(t, c, s, keyA, tt.body)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("status = %d, want 400; body %s", resp.StatusCode, b)
			}
			_, typ, code, param := parseError(t, b)
			if typ != "invalid_request_error" || param != tt.wantParam || code != tt.wantCode {
				t.Errorf("body = %s, want param %q code %q", b, tt.wantParam, tt.wantCode)
			}
		})
	}
}

func TestRoutes(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	tests := []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, PathDecisions, http.StatusMethodNotAllowed},
		{http.MethodPost, PathModels, http.StatusMethodNotAllowed},
		{http.MethodGet, PathChat, http.StatusMethodNotAllowed},
		{http.MethodGet, PathResponses, http.StatusMethodNotAllowed},
		{http.MethodPut, PathEmbeddings, http.StatusMethodNotAllowed},
		{http.MethodPost, "/v1/completions", http.StatusNotFound},
		{http.MethodPost, "/decisions", http.StatusNotFound},
	}
	for _, tt := range tests {
		resp, b := do(t, c, tt.method, s.URL()+tt.path, keyA, []byte("{}"))
		if resp.StatusCode != tt.want {
			t.Errorf("%s %s: status = %d, want %d", tt.method, tt.path, resp.StatusCode, tt.want)
		}
		parseError(t, b)
	}
	if got := s.Hits("/v1/completions"); got != 1 {
		t.Errorf("Hits(/v1/completions) = %d, want 1", got)
	}
}

func TestBodyTooLarge(t *testing.T) {
	s := startFake(t, Options{MaxBodyBytes: 1000})
	c := newClient(t)
	big := `{"model":"decide-mini","input":"` + strings.Repeat("x", 2000) + `","question":{"type":"predicate"}}`
	resp, b := decide(t, c, s, keyA, big)
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status = %d, want 413", resp.StatusCode)
	}
	parseError(t, b)
	if got := s.Requests()[0].BodyLen; got != 1001 {
		t.Errorf("BodyLen = %d, want 1001", got)
	}
}

func TestCatalog(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	models := func(key string) (int, []string) {
		t.Helper()
		resp, b := do(t, c, http.MethodGet, s.URL()+PathModels, key, nil)
		if resp.StatusCode != http.StatusOK {
			return resp.StatusCode, nil
		}
		var list struct {
			Object string `json:"object"`
			Data   []struct {
				ID     string `json:"id"`
				Object string `json:"object"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &list); err != nil || list.Object != "list" {
			t.Fatalf("catalog body %s: %v", b, err)
		}
		ids := []string{}
		for _, m := range list.Data {
			if m.Object != "model" {
				t.Errorf("model object = %q", m.Object)
			}
			ids = append(ids, m.ID)
		}
		return resp.StatusCode, ids
	}
	if _, got := models(keyA); !slices.Equal(got, []string{"decide-mini"}) {
		t.Errorf("keyA catalog = %v", got)
	}
	if _, got := models(keyB); !slices.Equal(got, []string{"decide-mini", "decide-large"}) {
		t.Errorf("keyB catalog = %v", got)
	}
	if st, _ := models("sk-nobody"); st != http.StatusUnauthorized {
		t.Errorf("unknown key catalog status = %d, want 401", st)
	}
	s.AddKey(keyA, "decide-large", "decide-mini")
	if _, got := models(keyA); !slices.Equal(got, []string{"decide-mini", "decide-large"}) {
		t.Errorf("after AddKey, keyA catalog = %v", got)
	}
	s.SetCatalog(keyA)
	if _, got := models(keyA); len(got) != 0 {
		t.Errorf("after SetCatalog(), keyA catalog = %v", got)
	}
	if got, ok := s.Catalog(keyB); !ok || len(got) != 2 {
		t.Errorf("Catalog(keyB) = %v, %v", got, ok)
	}
	if resp, _ := decide(t, c, s, keyA, predicateBody); resp.StatusCode != http.StatusNotFound {
		t.Errorf("model removed from catalog: status = %d, want 404", resp.StatusCode)
	}
}

func TestScriptCatalog(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	s.ScriptCatalog(keyA, RateLimited("2"), Unauthorized())
	for _, want := range []int{429, 401, 200, 200} {
		resp, _ := do(t, c, http.MethodGet, s.URL()+PathModels, keyA, nil)
		if resp.StatusCode != want {
			t.Errorf("catalog status = %d, want %d", resp.StatusCode, want)
		}
	}
	s.SetCatalogDefault("", ServerError())
	if resp, _ := do(t, c, http.MethodGet, s.URL()+PathModels, keyB, nil); resp.StatusCode != 500 {
		t.Errorf("catalog default: status = %d, want 500", resp.StatusCode)
	}
	s.SetCatalogDefault("", Step{})
	if resp, _ := do(t, c, http.MethodGet, s.URL()+PathModels, keyB, nil); resp.StatusCode != 200 {
		t.Errorf("catalog default removed: status = %d, want 200", resp.StatusCode)
	}
	// Decisions scripts do not touch the catalog and vice versa.
	s.Script(keyA, "", ServerError())
	if resp, _ := do(t, c, http.MethodGet, s.URL()+PathModels, keyA, nil); resp.StatusCode != 200 {
		t.Errorf("catalog with decisions script: status = %d, want 200", resp.StatusCode)
	}
	if got := s.HitsFor(keyA, PathModels); got != 5 {
		t.Errorf("HitsFor(keyA, models) = %d, want 5", got)
	}
}

func TestScriptOrderAndPrecedence(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	s.Script(keyB, "", ServerError())                                     // key-wide queue
	s.Script(keyB, "decide-large", RateLimited("1"), InsufficientQuota()) // model queue wins
	s.Script("", "", Forbidden())                                         // any key, any model
	s.SetDefault(keyB, "decide-large", NotImplemented())
	if got := s.Remaining(); got != 4 {
		t.Errorf("Remaining = %d, want 4", got)
	}
	steps := []struct {
		model string
		want  int
	}{
		{"decide-large", 429}, // RateLimited
		{"decide-large", 429}, // InsufficientQuota
		{"decide-large", 500}, // (keyB, "") queue
		{"decide-large", 403}, // ("", "") queue
		{"decide-large", 501}, // default
		{"decide-mini", 200},  // no script, no default
		{"decide-large", 501}, // default persists
	}
	for i, st := range steps {
		resp, _ := decide(t, c, s, keyB, bodyFor(st.model))
		if resp.StatusCode != st.want {
			t.Errorf("request %d (%s): status = %d, want %d", i, st.model, resp.StatusCode, st.want)
		}
	}
	if got := s.Remaining(); got != 0 {
		t.Errorf("Remaining = %d, want 0", got)
	}
	s.SetDefault(keyB, "decide-large", Step{})
	if resp, _ := decide(t, c, s, keyB, bodyFor("decide-large")); resp.StatusCode != 200 {
		t.Errorf("default removed: status = %d, want 200", resp.StatusCode)
	}
	var names []string
	for _, r := range s.Requests() {
		names = append(names, r.Step)
	}
	want := []string{"RateLimited(1)", "InsufficientQuota", "ServerError", "Forbidden", "NotImplemented", "OK", "NotImplemented", "OK"}
	if !slices.Equal(names, want) {
		t.Errorf("steps = %q, want %q", names, want)
	}
}

func TestScriptedOKStillChecksCatalog(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	s.Script(keyA, "decide-large", OK(), RateLimited(""))
	if resp, _ := decide(t, c, s, keyA, bodyFor("decide-large")); resp.StatusCode != http.StatusNotFound {
		t.Errorf("OK for a model outside the catalog: status = %d, want 404", resp.StatusCode)
	}
	// A scripted error applies even to a model outside the catalog.
	if resp, _ := decide(t, c, s, keyA, bodyFor("decide-large")); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("RateLimited for a model outside the catalog: status = %d, want 429", resp.StatusCode)
	}
}

func TestRecording(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	var hooked []Received
	var hookMu sync.Mutex
	s.OnRequest(func(r Received) {
		hookMu.Lock()
		defer hookMu.Unlock()
		hooked = append(hooked, r)
	})
	decide(t, c, s, keyA, predicateBody)
	do(t, c, http.MethodGet, s.URL()+PathModels, keyB, nil)
	large := []byte(`{"model":"decide-mini","input":"` + strings.Repeat("y", MaxRecordedBody) + `","question":{"type":"predicate"}}`)
	resp, _ := do(t, c, http.MethodPost, s.URL()+PathDecisions, keyB, large)
	if resp.StatusCode != 200 {
		t.Fatalf("large body: status = %d", resp.StatusCode)
	}

	got := s.Requests()
	if len(got) != 3 {
		t.Fatalf("len(Requests) = %d, want 3", len(got))
	}
	r := got[0]
	if r.Method != "POST" || r.Path != PathDecisions || r.Key != keyA || r.Model != "decide-mini" || r.Status != 200 || r.Step != "OK" || r.Canceled {
		t.Errorf("record = %+v", r)
	}
	if !bytes.Equal(r.Body, []byte(predicateBody)) || r.BodyLen != int64(len(predicateBody)) || r.BodySHA256 != sha256.Sum256([]byte(predicateBody)) {
		t.Errorf("body record = %q, %d", r.Body, r.BodyLen)
	}
	if r.Header.Get("Authorization") != "Bearer "+keyA || r.Header.Get("Content-Type") != "application/json" {
		t.Errorf("header record = %v", r.Header)
	}
	if r.At.IsZero() {
		t.Error("At is zero")
	}
	if r := got[1]; r.Method != "GET" || r.Path != PathModels || r.Key != keyB || r.Body == nil || len(r.Body) != 0 {
		t.Errorf("catalog record = %+v", r)
	}
	if r := got[2]; r.Body != nil || r.BodyLen != int64(len(large)) || r.BodySHA256 != sha256.Sum256(large) {
		t.Errorf("large record: Body nil = %v, BodyLen %d", r.Body == nil, r.BodyLen)
	}
	hookMu.Lock()
	if len(hooked) != 3 || hooked[0].Key != keyA || hooked[0].Status != 0 {
		t.Errorf("hook saw %d requests, first %+v", len(hooked), hooked[0])
	}
	hookMu.Unlock()
	if rs := s.RequestsFor(keyB, PathDecisions); len(rs) != 1 || rs[0].BodyLen != int64(len(large)) {
		t.Errorf("RequestsFor(keyB, decisions) = %d records", len(rs))
	}

	s.SetRecording(false)
	decide(t, c, s, keyA, predicateBody)
	if got := len(s.Requests()); got != 3 {
		t.Errorf("recording off: len(Requests) = %d, want 3", got)
	}
	if got := s.Hits(PathDecisions); got != 3 {
		t.Errorf("recording off: Hits = %d, want 3", got)
	}
	if got := s.HitsFor(keyA, PathDecisions); got != 2 {
		t.Errorf("recording off: HitsFor = %d, want 2", got)
	}
	s.SetRecording(true)

	s.Script(keyA, "", ServerError())
	s.SetQuota(keyA, "", Quota{Requests: 1, Window: time.Hour})
	s.Reset()
	if len(s.Requests()) != 0 || s.Hits(PathDecisions) != 0 || s.HitsFor(keyA, PathDecisions) != 0 || s.Remaining() != 0 {
		t.Error("Reset left records, hits or scripts")
	}
	for range 2 {
		if resp, _ := decide(t, c, s, keyA, predicateBody); resp.StatusCode != 200 {
			t.Errorf("after Reset: status = %d, want 200 (keys stay, scripts and quotas go)", resp.StatusCode)
		}
	}
}

func TestDisableRecordingOption(t *testing.T) {
	s := startFake(t, Options{DisableRecording: true})
	c := newClient(t)
	decide(t, c, s, keyA, predicateBody)
	if len(s.Requests()) != 0 || s.Hits(PathDecisions) != 1 {
		t.Errorf("Requests = %d, Hits = %d; want 0, 1", len(s.Requests()), s.Hits(PathDecisions))
	}
}

func TestLoggerNeverLogsKeys(t *testing.T) {
	var buf syncBuffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := startFake(t, Options{Logger: logger})
	c := newClient(t)
	key := "sk-canary-4f1d2c"
	s.AddKey(key, "decide-mini")
	s.Script(key, "", EchoSecrets())
	decide(t, c, s, key, predicateBody)
	decide(t, c, s, key, predicateBody)
	do(t, c, http.MethodGet, s.URL()+PathModels, key, nil)
	decide(t, c, s, "sk-canary-unknown", predicateBody)
	out := buf.String()
	if strings.Contains(out, "canary") {
		t.Errorf("log holds a key:\n%s", out)
	}
	if !strings.Contains(out, secret.New(key).Fingerprint()) {
		t.Errorf("log lacks the key's fingerprint:\n%s", out)
	}
	if n := strings.Count(out, "fake provider request"); n != 4 {
		t.Errorf("%d log lines, want 4:\n%s", n, out)
	}
}

type syncBuffer = testutil.SyncBuffer

func TestConcurrentUse(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	const workers, each = 16, 25
	s.SetDefault(keyB, "decide-large", RateLimited("1"))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				key, model := keyA, "decide-mini"
				if (w+i)%3 == 0 {
					key, model = keyB, "decide-large"
				}
				if i%5 == 0 {
					s.Script(keyA, "decide-mini", OK())
				}
				resp, err := c.Do(newRequest(t, context.Background(), http.MethodPost, s.URL()+PathDecisions, key, []byte(bodyFor(model))))
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
				if want := map[bool]int{true: 429, false: 200}[key == keyB]; resp.StatusCode != want {
					t.Errorf("%s: status = %d, want %d", key, resp.StatusCode, want)
				}
				_ = s.Requests()
				_ = s.HitsFor(keyA, PathDecisions)
			}
		})
	}
	wg.Wait()
	if got := s.Hits(PathDecisions); got != workers*each {
		t.Errorf("Hits = %d, want %d", got, workers*each)
	}
}

func TestConcurrentKeys(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	var wg sync.WaitGroup
	for w := range 8 {
		key := fmt.Sprintf("sk-worker-%d", w)
		s.AddKey(key, "decide-mini")
		s.Script(key, "", RateLimited("3"))
		wg.Go(func() {
			for range 10 {
				req := newRequest(t, waitCtx(t), http.MethodPost, s.URL()+PathDecisions, key, []byte(predicateBody))
				resp, err := c.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	for w := range 8 {
		key := fmt.Sprintf("sk-worker-%d", w)
		rs := s.RequestsFor(key, PathDecisions)
		if len(rs) != 10 || rs[0].Status != 429 || rs[1].Status != 200 {
			t.Errorf("%s: %d records, first statuses %d, %d", key, len(rs), rs[0].Status, rs[1].Status)
		}
	}
}

func TestAppendJSONString(t *testing.T) {
	for _, in := range []string{"", "plain", `"quoted" \ back`, "tab\tnl\ncr\r\x00\x1f\x7f", "üñí ✓ 😀", "bad \xff\xfe utf8", "<>&\u2028"} {
		b := appendJSONString(nil, in)
		var out string
		if err := json.Unmarshal(b, &out); err != nil {
			t.Errorf("appendJSONString(%q) = %s: %v", in, b, err)
			continue
		}
		want := strings.ToValidUTF8(in, "\ufffd")
		if strings.Contains(in, "\xff\xfe") {
			want = strings.ReplaceAll(in, "\xff\xfe", "\ufffd\ufffd")
		}
		if out != want {
			t.Errorf("round trip of %q = %q, want %q", in, out, want)
		}
	}
}

func TestLargeRequestBody(t *testing.T) {
	if testing.Short() {
		t.Skip("64 MiB transfer")
	}
	s := startFake(t, Options{DisableRecording: false})
	c := newClient(t)
	body := []byte(`{"model":"decide-mini","input":"` + strings.Repeat("z", 64<<20-100) + `","question":{"type":"predicate"}}`)
	start := time.Now()
	resp, b := do(t, c, http.MethodPost, s.URL()+PathDecisions, keyA, body)
	if resp.StatusCode != 200 {
		t.Fatalf("status = %d: %s", resp.StatusCode, b)
	}
	d := parseDecision(t, b)
	if in, _, _ := ExpectedUsage(body); d.Usage.InputTokens != in {
		t.Errorf("input_tokens = %d, want %d", d.Usage.InputTokens, in)
	}
	r := s.Requests()[0]
	if r.Body != nil || r.BodyLen != int64(len(body)) || r.BodySHA256 != sha256.Sum256(body) || r.Model != "decide-mini" {
		t.Errorf("record: BodyLen %d, Model %q", r.BodyLen, r.Model)
	}
	t.Logf("64 MiB request took %v", time.Since(start))
}

func TestStatusNoBody(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	s.Script(keyA, "", Status(http.StatusNoContent, "", nil))
	resp, b := decide(t, c, s, keyA, predicateBody)
	if resp.StatusCode != http.StatusNoContent || len(b) != 0 {
		t.Errorf("status %d body %q", resp.StatusCode, b)
	}
	if r := s.Requests()[0]; r.Canceled || r.Status != http.StatusNoContent {
		t.Errorf("record = %+v", r)
	}
}

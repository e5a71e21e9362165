package fakeprovider

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestErrorSteps(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	type want struct {
		status      int
		contentType string
		structured  bool
		typ, code   string
		param       string
		msgHas      string
		header      map[string]string // "" value = header absent
	}
	tests := []struct {
		name string
		step Step
		want want
	}{
		{"RateLimited", RateLimited("7"), want{429, "application/json", true, "requests", "rate_limit_exceeded", "", "", map[string]string{"Retry-After": "7"}}},
		{"RateLimited date", RateLimited("Wed, 21 Oct 2037 07:28:00 GMT"), want{429, "application/json", true, "requests", "rate_limit_exceeded", "", "", map[string]string{"Retry-After": "Wed, 21 Oct 2037 07:28:00 GMT"}}},
		{"RateLimited no header", RateLimited(""), want{429, "application/json", true, "requests", "rate_limit_exceeded", "", "", map[string]string{"Retry-After": ""}}},
		{"InsufficientQuota", InsufficientQuota(), want{429, "application/json", true, "insufficient_quota", "insufficient_quota", "", "", map[string]string{"Retry-After": ""}}},
		{"Unclassified429", Unclassified429(), want{429, "text/plain; charset=utf-8", false, "", "", "", "", nil}},
		{"Unauthorized", Unauthorized(), want{401, "application/json", true, "invalid_request_error", "invalid_api_key", "", "", nil}},
		{"Forbidden", Forbidden(), want{403, "application/json", true, "permission_error", "permission_denied", "", "", nil}},
		{"NotFoundModel", NotFoundModel(), want{404, "application/json", true, "invalid_request_error", "model_not_found", "model", "decide-mini", nil}},
		{"NotFoundEndpoint", NotFoundEndpoint(), want{404, "application/json", true, "invalid_request_error", "unknown_url", "", "/v1/decisions", nil}},
		{"NotFoundContent", NotFoundContent(), want{404, "application/json", true, "invalid_request_error", "file_not_found", "input_file_id", "No such file: file-abc", nil}},
		{"NotFoundBare", NotFoundBare(), want{404, "text/html; charset=utf-8", false, "", "", "", "", nil}},
		{"MethodNotAllowed", MethodNotAllowed(), want{405, "application/json", true, "invalid_request_error", "method_not_allowed", "", "", nil}},
		{"NotImplemented", NotImplemented(), want{501, "application/json", true, "server_error", "not_implemented", "", "", nil}},
		{"ServerError", ServerError(), want{500, "application/json", true, "server_error", "", "", "", nil}},
		{"Overloaded", Overloaded("2"), want{503, "application/json", true, "server_error", "overloaded", "", "", map[string]string{"Retry-After": "2"}}},
		{"Status", Status(418, `{"error":{"message":"teapot","type":"x","code":"teapot","param":null}}`, http.Header{"Content-Type": {"application/json"}, "X-Extra": {"1"}}),
			want{418, "application/json", true, "x", "teapot", "", "teapot", map[string]string{"X-Extra": "1"}}},
		{"Redirect", Redirect("http://127.0.0.2:1/v1/decisions", 307), want{307, "text/plain; charset=utf-8", false, "", "", "", "", map[string]string{"Location": "http://127.0.0.2:1/v1/decisions"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s.Script(keyA, "decide-mini", tt.step)
			resp, b := decide(t, c, s, keyA, predicateBody)
			if resp.StatusCode != tt.want.status {
				t.Fatalf("status = %d, want %d; body %s", resp.StatusCode, tt.want.status, b)
			}
			if got := resp.Header.Get("Content-Type"); got != tt.want.contentType {
				t.Errorf("Content-Type = %q, want %q", got, tt.want.contentType)
			}
			for k, v := range tt.want.header {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if !tt.want.structured {
				if json.Valid(b) {
					t.Errorf("body is JSON, want unstructured: %s", b)
				}
				return
			}
			msg, typ, code, param := parseError(t, b)
			if typ != tt.want.typ || code != tt.want.code || param != tt.want.param {
				t.Errorf("error = type %q code %q param %q, want %q %q %q", typ, code, param, tt.want.typ, tt.want.code, tt.want.param)
			}
			if !strings.Contains(msg, tt.want.msgHas) {
				t.Errorf("message %q lacks %q", msg, tt.want.msgHas)
			}
			recs := s.Requests()
			if r := recs[len(recs)-1]; r.Status != tt.want.status || r.Step != tt.step.String() {
				t.Errorf("record status %d step %q, want %d %q", r.Status, r.Step, tt.want.status, tt.step.String())
			}
		})
	}
}

func TestErrorBody(t *testing.T) {
	for _, status := range []int{400, 401, 403, 404, 405, 418, 429, 500, 501, 502, 503} {
		b := ErrorBody(status)
		_, typ, _, _ := parseError(t, []byte(b))
		if typ == "" {
			t.Errorf("ErrorBody(%d) has no type: %s", status, b)
		}
		b2 := paddedErrorBody(status, 5000)
		if len(b2) != 5000 {
			t.Errorf("paddedErrorBody(%d, 5000) is %d bytes", status, len(b2))
		}
		parseError(t, b2)
	}
}

func TestEchoSecrets(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	key := "sk-canary-echo-1234"
	s.AddKey(key, "decide-mini")
	body := `{"model":"decide-mini","input":"private input \"quoted\" \u0000 text","question":{"type":"predicate"}}`
	s.Script(key, "", EchoSecrets(), EchoSecretsAs(401))
	for _, want := range []int{400, 401} {
		resp, b := decide(t, c, s, key, body)
		if resp.StatusCode != want {
			t.Fatalf("status = %d, want %d", resp.StatusCode, want)
		}
		msg, _, code, _ := parseError(t, b)
		if !strings.Contains(msg, "Bearer "+key) || !strings.Contains(msg, body) {
			t.Errorf("message does not echo key and body: %q", msg)
		}
		if strings.Contains(code, "canary") {
			t.Errorf("code holds the secret: %q", code)
		}
	}
}

func TestResetAfterRead(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	s.Script(keyA, "", ResetAfterRead())
	resp, err := c.Do(newRequest(t, waitCtx(t), http.MethodPost, s.URL()+PathDecisions, keyA, []byte(predicateBody)))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("got status %d, want a connection error", resp.StatusCode)
	}
	recs := s.Requests()
	if len(recs) != 1 || string(recs[0].Body) != predicateBody || recs[0].Status != 0 || recs[0].Canceled {
		t.Errorf("records = %+v", recs)
	}
	// The next request on a fresh connection works.
	if resp, _ := decide(t, c, s, keyA, predicateBody); resp.StatusCode != 200 {
		t.Errorf("after reset: status = %d", resp.StatusCode)
	}
}

func TestResetMidAnswer(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	s.Script(keyA, "", ResetMidAnswer(100))
	resp, err := c.Do(newRequest(t, waitCtx(t), http.MethodPost, s.URL()+PathDecisions, keyA, []byte(predicateBody)))
	if err != nil {
		t.Fatalf("headers should arrive: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.ContentLength != DefaultAnswerSize {
		t.Errorf("status %d, Content-Length %d", resp.StatusCode, resp.ContentLength)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err == nil {
		t.Errorf("read %d bytes without error, want a cut answer", n)
	}
	if n > 100 {
		t.Errorf("read %d bytes, want at most 100", n)
	}
}

func TestStallCanceledByClient(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	s.Script(keyA, "", Stall())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.OnRequest(func(Received) { cancel() }) // the client goes away once the provider has the request
	start := time.Now()
	_, err := c.Do(newRequest(t, ctx, http.MethodPost, s.URL()+PathDecisions, keyA, []byte(predicateBody)))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	r, err := s.WaitCanceled(waitCtx(t))
	if err != nil {
		t.Fatalf("WaitCanceled: %v", err)
	}
	if !r.Canceled || r.Key != keyA || r.Step != "Stall" || r.Status != 0 {
		t.Errorf("canceled record = %+v", r)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("stall took %v to end", time.Since(start))
	}
	if recs := s.Requests(); len(recs) != 1 || !recs[0].Canceled {
		t.Errorf("Requests = %+v", recs)
	}
	if n := s.Canceled(); n != 1 {
		t.Errorf("Canceled() = %d, want 1", n)
	}
	// Each cancellation is returned once.
	short, cancel2 := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel2()
	if _, err := s.WaitCanceled(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("second WaitCanceled err = %v, want deadline", err)
	}
}

func TestDelay(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	const d = 80 * time.Millisecond
	s.Script(keyA, "", Delay(d, RateLimited("1")), Delay(d, Step{}))
	for _, want := range []int{429, 200} {
		start := time.Now()
		resp, _ := decide(t, c, s, keyA, predicateBody)
		if resp.StatusCode != want {
			t.Errorf("status = %d, want %d", resp.StatusCode, want)
		}
		if el := time.Since(start); el < d {
			t.Errorf("answered after %v, want at least %v", el, d)
		}
	}

	// A client that gives up during the delay gets nothing and is recorded
	// as canceled.
	s.Script(keyA, "", Delay(time.Hour, OK()))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.Do(newRequest(t, ctx, http.MethodPost, s.URL()+PathDecisions, keyA, []byte(predicateBody))); err == nil {
		t.Fatal("want a timeout")
	}
	r, err := s.WaitCanceled(waitCtx(t))
	if err != nil || r.Step != "Delay(1h0m0s, OK)" {
		t.Errorf("WaitCanceled = %+v, %v", r, err)
	}
}

func TestSlowCatalog(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	s.ScriptCatalog(keyA, SlowCatalog(60*time.Millisecond))
	start := time.Now()
	resp, b := do(t, c, http.MethodGet, s.URL()+PathModels, keyA, nil)
	if resp.StatusCode != 200 || !strings.Contains(string(b), "decide-mini") {
		t.Errorf("status %d body %s", resp.StatusCode, b)
	}
	if el := time.Since(start); el < 60*time.Millisecond {
		t.Errorf("catalog after %v, want at least 60ms", el)
	}

	s.ScriptCatalog(keyA, SlowCatalog(time.Hour))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := c.Do(newRequest(t, ctx, http.MethodGet, s.URL()+PathModels, keyA, nil)); err == nil {
		t.Fatal("want a timeout")
	}
	if r, err := s.WaitCanceled(waitCtx(t)); err != nil || r.Path != PathModels {
		t.Errorf("WaitCanceled = %+v, %v", r, err)
	}
}

func TestStallErrorBody(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	// The stall is what the headers and first bytes must beat: long
	// enough for a request on a loaded machine under -race.
	const stall = 2 * time.Second
	s.Script(keyA, "", StallErrorBody(401, "", stall))
	start := time.Now()
	resp, err := c.Do(newRequest(t, waitCtx(t), http.MethodPost, s.URL()+PathDecisions, keyA, []byte(predicateBody)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if el := time.Since(start); el >= stall {
		t.Errorf("headers after %v, want before the stall ends", el)
	}
	if resp.StatusCode != 401 {
		t.Errorf("status = %d, want 401", resp.StatusCode)
	}
	first := make([]byte, 10)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	if string(first) != ErrorBody(401)[:10] {
		t.Errorf("first bytes = %q", first)
	}
	if el := time.Since(start); el >= stall {
		t.Errorf("first bytes after %v, want before the stall ends", el)
	}
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < stall {
		t.Errorf("body complete after %v, want at least %v", el, stall)
	}
	_, _, code, _ := parseError(t, append(first, rest...))
	if code != "invalid_api_key" {
		t.Errorf("code = %q", code)
	}

	// Custom first bytes that are not a prefix make the whole body.
	s.Script(keyA, "", StallErrorBody(400, `{"detail":`, 10*time.Millisecond))
	if resp, b := decide(t, c, s, keyA, predicateBody); resp.StatusCode != 400 || string(b) != `{"detail":` {
		t.Errorf("truncated variant: %d %q", resp.StatusCode, b)
	}

	// A client that gives up mid-stall is recorded as canceled and the
	// handler ends.
	s.Script(keyA, "", StallErrorBody(429, "", time.Hour))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resp, err = c.Do(newRequest(t, ctx, http.MethodPost, s.URL()+PathDecisions, keyA, []byte(predicateBody)))
	if err != nil {
		t.Fatal(err)
	}
	io.ReadFull(resp.Body, first)
	cancel()
	resp.Body.Close()
	r, err := s.WaitCanceled(waitCtx(t))
	if err != nil || r.Status != 429 {
		t.Errorf("WaitCanceled = %+v, %v", r, err)
	}
}

func TestDripErrorBody(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	const total = 70 << 10
	s.Script(keyA, "", DripErrorBody(400, total))
	resp, b := decide(t, c, s, keyA, predicateBody)
	if resp.StatusCode != 400 || len(b) != total || resp.ContentLength != -1 {
		t.Errorf("status %d, %d bytes, Content-Length %d; want 400, %d, -1", resp.StatusCode, len(b), resp.ContentLength, total)
	}
	if _, _, code, _ := parseError(t, b); code != "invalid_request" {
		t.Errorf("code = %q", code)
	}

	// A slow drip: 300 bytes, 100 per 30 ms.
	s.Script(keyA, "", Drip(429, 300, 100, 30*time.Millisecond))
	start := time.Now()
	resp, b = decide(t, c, s, keyA, predicateBody)
	if resp.StatusCode != 429 || len(b) != 300 {
		t.Errorf("status %d, %d bytes", resp.StatusCode, len(b))
	}
	if el := time.Since(start); el < 60*time.Millisecond {
		t.Errorf("drip took %v, want at least 60ms", el)
	}

	// A client that stops reading after 64 KiB.
	s.Script(keyA, "", Drip(400, 1<<20, 1024, time.Millisecond))
	resp, err := c.Do(newRequest(t, waitCtx(t), http.MethodPost, s.URL()+PathDecisions, keyA, []byte(predicateBody)))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)); n != 64<<10 {
		t.Errorf("read %d", n)
	}
	resp.Body.Close()
	if r, err := s.WaitCanceled(waitCtx(t)); err != nil || r.Status != 400 {
		t.Errorf("WaitCanceled = %+v, %v", r, err)
	}
}

// countBody reads an answer to the end, counting bytes without keeping them.
func countBody(t *testing.T, c *http.Client, s *Server) (*http.Response, int64) {
	t.Helper()
	resp, err := c.Do(newRequest(t, waitCtx(t), http.MethodPost, s.URL()+PathDecisions, keyA, []byte(predicateBody)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		t.Fatalf("after %d bytes: %v", n, err)
	}
	return resp, n
}

func TestHugeAnswer(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	for _, size := range []int64{0, 10, 300, 100<<10 + 1} {
		for _, chunked := range []bool{false, true} {
			step := HugeAnswer(size)
			if chunked {
				step = HugeAnswerChunked(size)
			}
			s.Script(keyA, "", step)
			resp, b := decide(t, c, s, keyA, predicateBody)
			if resp.StatusCode != 200 || int64(len(b)) != size {
				t.Errorf("%s: status %d, %d bytes", step, resp.StatusCode, len(b))
			}
			if wantCL := map[bool]int64{false: size, true: -1}[chunked]; resp.ContentLength != wantCL {
				t.Errorf("%s: Content-Length = %d, want %d", step, resp.ContentLength, wantCL)
			}
			if size >= 300 {
				d := parseDecision(t, b)
				if in, _, _ := ExpectedUsage([]byte(predicateBody)); d.Usage.InputTokens != in {
					t.Errorf("%s: usage = %+v", step, d.Usage)
				}
			}
		}
	}
}

func TestHugeAnswer64MiB(t *testing.T) {
	if testing.Short() {
		t.Skip("64 MiB transfer")
	}
	s := startFake(t, Options{})
	c := newClient(t)
	const size = 64<<20 + 1
	s.Script(keyA, "", HugeAnswer(size), HugeAnswerChunked(size))
	for range 2 {
		if _, n := countBody(t, c, s); n != size {
			t.Errorf("read %d bytes, want %d", n, size)
		}
	}
}

func TestHugeAnswerClientStops(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	s.Script(keyA, "", HugeAnswerChunked(64<<20+1))
	resp, err := c.Do(newRequest(t, waitCtx(t), http.MethodPost, s.URL()+PathDecisions, keyA, []byte(predicateBody)))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if r, err := s.WaitCanceled(waitCtx(t)); err != nil || r.Status != 200 {
		t.Errorf("WaitCanceled = %+v, %v", r, err)
	}
}

func TestHandle(t *testing.T) {
	s := startFake(t, Options{})
	c := newClient(t)
	s.Script(keyA, "", Handle(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Len", strconv.Itoa(len(b)))
		w.WriteHeader(http.StatusAccepted)
	}))
	resp, _ := decide(t, c, s, keyA, predicateBody)
	if resp.StatusCode != http.StatusAccepted || resp.Header.Get("X-Len") != strconv.Itoa(len(predicateBody)) {
		t.Errorf("status %d X-Len %q", resp.StatusCode, resp.Header.Get("X-Len"))
	}
	if r := s.Requests()[0]; r.Status != http.StatusAccepted || r.Step != "Handle" {
		t.Errorf("record = %+v", r)
	}
}

func TestQuota(t *testing.T) {
	clk := &testClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	s := startFake(t, Options{Now: clk.Now})
	c := newClient(t)
	s.SetQuota(keyB, "decide-mini", Quota{Requests: 2, Window: 10 * time.Second, SendRetryAfter: true})

	expect := func(model string, wantStatus int, wantRetry, wantRemaining string) {
		t.Helper()
		resp, b := decide(t, c, s, keyB, bodyFor(model))
		if resp.StatusCode != wantStatus {
			t.Fatalf("%s: status = %d, want %d; %s", model, resp.StatusCode, wantStatus, b)
		}
		if got := resp.Header.Get("Retry-After"); got != wantRetry {
			t.Errorf("%s: Retry-After = %q, want %q", model, got, wantRetry)
		}
		if got := resp.Header.Get("X-Ratelimit-Remaining-Requests"); got != wantRemaining {
			t.Errorf("%s: remaining = %q, want %q", model, got, wantRemaining)
		}
		if wantStatus == 429 {
			if _, typ, code, _ := parseError(t, b); code != "rate_limit_exceeded" || typ != "requests" {
				t.Errorf("429 body %s", b)
			}
		}
	}
	expect("decide-mini", 200, "", "1")
	expect("decide-large", 200, "", "") // other model: no quota
	clk.Advance(3 * time.Second)
	expect("decide-mini", 200, "", "0")
	expect("decide-mini", 429, "7", "0")
	clk.Advance(6500 * time.Millisecond)
	expect("decide-mini", 429, "1", "0") // 0.5 s left rounds up to 1
	clk.Advance(500 * time.Millisecond)
	expect("decide-mini", 200, "", "1") // new window

	// A scripted error does not count against the quota.
	s.Script(keyB, "decide-mini", ServerError())
	expect("decide-mini", 500, "", "")
	expect("decide-mini", 200, "", "0")
	expect("decide-mini", 429, "10", "0")

	// No advice, or a lie.
	s.SetQuota(keyB, "", Quota{Requests: 1, Window: time.Minute})
	s.SetQuota(keyB, "decide-mini", Quota{})
	expect("decide-large", 200, "", "0")
	expect("decide-mini", 429, "", "0") // key-wide quota shared by models
	s.SetQuota(keyB, "", Quota{Requests: 0, Window: time.Minute, RetryAfter: "1"})
	expect("decide-large", 429, "1", "0")
	s.SetQuota(keyB, "", Quota{})
	expect("decide-large", 200, "", "")
}

func TestCloseWithStalls(t *testing.T) {
	base := runtime.NumGoroutine()
	s, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.AddKey(keyA, "decide-mini")
	s.SetDefault(keyA, "", Stall())
	s.ScriptCatalog(keyA, SlowCatalog(time.Hour))
	s.Script(keyA, "", StallErrorBody(500, "", time.Hour), Delay(time.Hour, OK()), Drip(400, 1<<20, 10, 100*time.Millisecond))
	tr := &http.Transport{}
	c := &http.Client{Transport: tr}
	const n = 8
	errs := make(chan error, n+1)
	for i := range n {
		go func() {
			resp, err := c.Do(newRequest(t, context.Background(), http.MethodPost, s.URL()+PathDecisions, keyA, []byte(predicateBody)))
			if err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			errs <- err
			_ = i
		}()
	}
	go func() {
		resp, err := c.Do(newRequest(t, context.Background(), http.MethodGet, s.URL()+PathModels, keyA, nil))
		if err == nil {
			resp.Body.Close()
		}
		errs <- err
	}()
	if err := s.WaitHits(waitCtx(t), PathDecisions, n); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitHits(waitCtx(t), PathModels, 1); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	// The handlers stall for an hour: a Close that waited for them would
	// take that long, one that does not takes far less than this bound,
	// which leaves room for a loaded machine.
	if el := time.Since(start); el > 30*time.Second {
		t.Errorf("Close took %v with stalled handlers", el)
	}
	for range n + 1 {
		if err := <-errs; err == nil {
			t.Error("a stalled client got a complete answer after Close")
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if got := s.Canceled(); got != 0 {
		t.Errorf("Close counted %d client cancellations, want 0", got)
	}
	tr.CloseIdleConnections()
	waitGoroutines(t, base)

	// After Close, the port refuses connections.
	if _, err := net.DialTimeout("tcp", s.Addr(), time.Second); err == nil {
		t.Error("dial after Close succeeded")
	}
}

func TestNoLeakAfterCanceledStalls(t *testing.T) {
	base := runtime.NumGoroutine()
	s, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.AddKey(keyA, "decide-mini")
	s.SetDefault(keyA, "", Stall())
	tr := &http.Transport{}
	c := &http.Client{Transport: tr}
	for range 5 {
		ctx, cancel := context.WithCancel(context.Background())
		s.OnRequest(func(Received) { cancel() })
		if _, err := c.Do(newRequest(t, ctx, http.MethodPost, s.URL()+PathDecisions, keyA, []byte(predicateBody))); err == nil {
			t.Fatal("want canceled")
		}
		if _, err := s.WaitCanceled(waitCtx(t)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	tr.CloseIdleConnections()
	waitGoroutines(t, base)
}

// waitGoroutines waits until the goroutine count is back near base.
func waitGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		n := runtime.NumGoroutine()
		if n <= base+2 {
			return
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("goroutines = %d, baseline %d:\n%s", n, base, buf)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestRawHTTP checks the fake with a hand-written request, as adversarial
// tests do.
func TestRawHTTP(t *testing.T) {
	s := startFake(t, Options{})
	conn, err := net.Dial("tcp", s.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	req := "POST /v1/decisions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + keyA +
		"\r\nContent-Length: " + strconv.Itoa(len(predicateBody)) + "\r\nConnection: close\r\n\r\n" + predicateBody
	if _, err := io.WriteString(conn, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("status = %d", resp.StatusCode)
	}
}

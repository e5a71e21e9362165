package fakeprovider

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"
)

const (
	keyA = "sk-test-a"
	keyB = "sk-test-b"
)

// startFake starts a fake with keyA (decide-mini) and keyB (decide-mini,
// decide-large) and closes it at cleanup.
func startFake(t *testing.T, opts Options) *Server {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	s.AddKey(keyA, "decide-mini")
	s.AddKey(keyB, "decide-mini", "decide-large")
	return s
}

// newClient returns a client that never follows redirects and whose idle
// connections are closed at cleanup.
func newClient(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func newRequest(t *testing.T, ctx context.Context, method, url, key string, body []byte) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// do sends a request and reads the whole answer.
func do(t *testing.T, c *http.Client, method, url, key string, body []byte) (*http.Response, []byte) {
	t.Helper()
	resp, err := c.Do(newRequest(t, context.Background(), method, url, key, body))
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", method, url, err)
	}
	return resp, b
}

func decide(t *testing.T, c *http.Client, s *Server, key string, body string) (*http.Response, []byte) {
	t.Helper()
	return do(t, c, http.MethodPost, s.URL()+PathDecisions, key, []byte(body))
}

const predicateBody = `{"model":"decide-mini","input":"Is the sky blue?","question":{"type":"predicate"}}`

func bodyFor(model string) string {
	return `{"model":"` + model + `","input":"Is the sky blue?","question":{"type":"predicate"}}`
}

type apiError struct {
	Error *struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Code    *string `json:"code"`
		Param   *string `json:"param"`
	} `json:"error"`
}

// parseError decodes a structured error body; it fails the test if the body
// is not one.
func parseError(t *testing.T, b []byte) (message, typ, code, param string) {
	t.Helper()
	var e apiError
	if err := json.Unmarshal(b, &e); err != nil || e.Error == nil {
		t.Fatalf("not a structured error body: %v: %q", err, b)
	}
	if e.Error.Code != nil {
		code = *e.Error.Code
	}
	if e.Error.Param != nil {
		param = *e.Error.Param
	}
	return e.Error.Message, e.Error.Type, code, param
}

type decision struct {
	ID      string         `json:"id"`
	Object  string         `json:"object"`
	Model   string         `json:"model"`
	Created int64          `json:"created"`
	Output  map[string]any `json:"output"`
	Usage   struct {
		InputTokens        int64 `json:"input_tokens"`
		OutputTokens       int64 `json:"output_tokens"`
		TotalTokens        int64 `json:"total_tokens"`
		InputTokensDetails struct {
			CachedTokens *int64 `json:"cached_tokens"`
		} `json:"input_tokens_details"`
	} `json:"usage"`
}

func parseDecision(t *testing.T, b []byte) decision {
	t.Helper()
	var d decision
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("not a decision: %v: %q", err, b)
	}
	return d
}

// testClock is a settable clock for quota tests.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func waitCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

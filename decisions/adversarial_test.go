package decisions

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// readCounter is an endless request body that counts the bytes read.
type readCounter struct{ n atomic.Int64 }

func (c *readCounter) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	c.n.Add(int64(len(p)))
	return len(p), nil
}

// Issue 8, case 7: a body announced larger than 64 MiB is refused with 413
// without being buffered, so it takes nothing from the buffer bound that
// real requests share (before the fix the route buffered the whole 64 MiB
// first: with a 1 MiB bound it answered 503 server_overloaded, and sixteen
// such requests took the default 1 GiB bound from everyone). It is
// answered before any byte is read (issue 14, item 6:
// TestOversizedContentLengthRefusedAtOnce), and only then discarded up to
// the cap, so that a client still sending reads the 413, not a reset.
func TestAnnouncedOversizedBodyRefusedWithoutBuffering(t *testing.T) {
	h := newHarness(t, opts{maxBuffered: 1 << 20})
	body := &readCounter{}
	req := httptest.NewRequest(http.MethodPost, "/v1/decisions", body)
	req.ContentLength = MaxBody + 1
	w := httptest.NewRecorder()
	h.router.ServeHTTP(w, req)
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "request_too_large") {
		t.Errorf("answer %d %s, want 413 request_too_large", w.Code, w.Body)
	}
	if n := body.n.Load(); n > MaxBody+32<<10 {
		t.Errorf("the route read %d bytes of an endless body, want at most the cap", n)
	}
	if got := w.Header().Get("Connection"); got != "close" {
		t.Errorf("Connection = %q, want close (the unread body ends the connection)", got)
	}
	h.wantUntouched()
	if r := h.post(`{"model":"api/decide-mini","input":"x","question":{"type":"predicate"}}`); r.status != 200 {
		t.Errorf("a normal request after it: %d %s", r.status, r.body)
	}
}

// The 64 MiB cap is on bodies larger than 64 MiB: a request that
// announces exactly MaxBody bytes is read and judged on its content (here
// a body without a model gets 400 invalid_model_prefix), never refused as
// too large; so is one of that size sent without a Content-Length.
func TestBodyOfExactlyMaxBodyIsRead(t *testing.T) {
	h := newHarness(t, opts{})
	head, tail := `{"input":"`, `"}`
	body := head + strings.Repeat("x", MaxBody-len(head)-len(tail)) + tail
	for _, announce := range []bool{true, false} {
		req := httptest.NewRequest(http.MethodPost, "/v1/decisions", strings.NewReader(body))
		req.ContentLength = -1
		if announce {
			req.ContentLength = MaxBody
		}
		w := httptest.NewRecorder()
		h.router.ServeHTTP(w, req)
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "invalid_model_prefix") {
			t.Errorf("announced %v: a %d-byte body got %d %s, want 400 invalid_model_prefix", announce, len(body), w.Code, w.Body)
		}
	}
	h.wantUntouched()
}

// Issue 14, item 6: a Content-Length over the 64 MiB cap gets 413 at once,
// before any byte of the body is read; under Expect: 100-continue the
// answer is the 413, never 100 Continue. Before, the route drained the body
// (which sent 100 Continue) and answered only after it, or after the read
// timeout. The client here sends headers only: it gets its answer, or the
// guard's deadline fails the test.
func TestOversizedContentLengthRefusedAtOnce(t *testing.T) {
	h := newHarness(t, opts{})
	for _, expect := range []bool{false, true} {
		status, body := rawOversized(t, h.srv.Listener.Addr().String(), expect)
		if status != http.StatusRequestEntityTooLarge || !strings.Contains(body, `"request_too_large"`) {
			t.Errorf("expect 100-continue %v: first answer %d %s, want 413 request_too_large", expect, status, body)
		}
	}
	// A client that sends its body anyway, on a connection it closes
	// after the answer, reads the 413, not a reset.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	for range 3 {
		req, _ := http.NewRequest(http.MethodPost, h.srv.URL+"/v1/decisions", io.LimitReader(&readCounter{}, MaxBody+1))
		req.ContentLength = MaxBody + 1
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("answer %d, want 413", resp.StatusCode)
		}
	}
	h.wantNoProviderCall()
}

// rawOversized sends the headers of a POST /v1/decisions announcing 64 MiB
// + 1 and no body byte, and returns the first answer, read to its end.
func rawOversized(t *testing.T, addr string, expect bool) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second)) // a guard against a hang, not a timing
	fmt.Fprintf(c, "POST /v1/decisions HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", addr, MaxBody+1)
	if expect {
		fmt.Fprintf(c, "Expect: 100-continue\r\n")
	}
	fmt.Fprintf(c, "\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer before any body byte: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("answer %d not readable to its end: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, string(b)
}

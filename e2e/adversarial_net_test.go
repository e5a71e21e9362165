package e2e

// The adversarial suite, network faults (issue 8, cases 5-9): garbage on
// the socket, slowloris, slow and oversized bodies, a provider that never
// answers, a client that goes away. The servers' timeouts are shortened
// through real config keys (runtime.read_header_timeout,
// runtime.read_timeout, runtime.deadline) so the suite stays fast.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/internal/httpx"
)

// answers reads every HTTP answer the server sends on c until it closes
// the connection or within passes; it returns their statuses and whether
// the connection was closed (rather than left open).
func answers(c net.Conn, within time.Duration) (statuses []int, closed bool) {
	c.SetReadDeadline(time.Now().Add(within))
	br := bufio.NewReader(c)
	for {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			var ne net.Error
			return statuses, !(errors.As(err, &ne) && ne.Timeout())
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
	}
}

// tlsClientHello is the start of a TLS 1.2/1.3 handshake, as a client
// that thinks the port speaks HTTPS sends it.
func tlsClientHello() string {
	hello := "\x03\x03" + strings.Repeat("\x2a", 32) + "\x00" + "\x00\x02\x13\x01" + "\x01\x00" + "\x00\x00"
	hs := "\x01\x00" + string(rune(0)) + string(byte(len(hello))) + hello
	return "\x16\x03\x01\x00" + string(byte(len(hs))) + hs
}

func chunked(body string) string {
	return fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
}

// Case 5. Garbage on the socket: a Redis command, a TLS hello, a 2 MiB
// header, both Content-Length and Transfer-Encoding, and a few more. Each
// gets 400 or 431 or a closed connection (never a second request served on
// the same connection: no smuggling), the next request is served, and the
// bridge's goroutines and file descriptors return to their baseline.
func TestAdversarialGarbageOnTheSocketRefusedNextServed(t *testing.T) {
	e := newE2E(t)
	prov, b, tok := advBridge(e, "deadline: 10s, read_header_timeout: 2s", "")
	addr := hostPort(b.url)
	baseG := quietMetric(t, b.url, tok, "go_goroutines")
	baseFD := quietMetric(t, b.url, tok, "process_open_fds")
	host := "Host: " + addr + "\r\n"
	auth := "Authorization: Bearer " + tok + "\r\n"
	post := "POST /v1/decisions HTTP/1.1\r\n" + host + auth + "Content-Type: application/json\r\n"
	// A second request pipelined behind the hostile one: it must never be
	// served on that connection.
	smuggled := post + fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(decideBody), decideBody)
	tests := []struct {
		name string
		raw  string
		// ok are the statuses the one answer may have; none means only a
		// closed connection will do.
		ok []int
	}{
		{"redis inline command", "SET k v\r\n" + smuggled, []int{400}},
		{"redis RESP command", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n" + smuggled, []int{400}},
		{"TLS client hello", tlsClientHello() + smuggled, []int{400}},
		{"2 MiB header", post + "X-Big: " + strings.Repeat("a", 2<<20) + "\r\n\r\n" + smuggled, []int{431}},
		{"30000 headers", post + strings.Repeat("X-Many: a\r\n", 30000) + "\r\n" + smuggled, []int{431}},
		{"1 MiB request line", "GET /" + strings.Repeat("a", 1<<20) + " HTTP/1.1\r\n" + host + "\r\n" + smuggled, []int{431, 414}},
		// RFC 9112 6.1: a server may answer such a request by its
		// Transfer-Encoding alone, but must close the connection after it.
		{"Content-Length and Transfer-Encoding", post + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked(decideBody) + smuggled, []int{400, 200}},
		{"Transfer-Encoding and Content-Length", post + "Transfer-Encoding: chunked\r\nContent-Length: 200\r\n\r\n" + chunked(decideBody) + smuggled, []int{400, 200}},
		{"two Content-Lengths", post + "Content-Length: 4\r\nContent-Length: 80\r\n\r\n" + decideBody + smuggled, []int{400}},
		{"unknown Transfer-Encoding", post + "Transfer-Encoding: gzip, chunked\r\n\r\n" + chunked(decideBody) + smuggled, []int{400, 501}},
		{"NUL bytes", strings.Repeat("\x00", 4096) + smuggled, []int{400}},
		{"no Host", "POST /v1/decisions HTTP/1.1\r\n" + auth + fmt.Sprintf("Content-Length: %d\r\n\r\n%s", len(decideBody), decideBody) + smuggled, []int{400}},
	}
	hits := prov.Hits(fp.PathDecisions)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			go func() {
				c.SetWriteDeadline(time.Now().Add(10 * time.Second))
				io.WriteString(c, tt.raw)
			}()
			statuses, closed := answers(c, 10*time.Second)
			if !closed {
				t.Errorf("connection left open after %v", statuses)
			}
			if len(statuses) > 1 {
				t.Errorf("answers %v: a second request was served on the same connection", statuses)
			}
			if len(statuses) == 1 && !containsInt(tt.ok, statuses[0]) {
				t.Errorf("answer %d, want one of %v or a closed connection", statuses[0], tt.ok)
			}
			if r := advCall(t, "POST", b.url+"/v1/decisions", tok, decideBody); r.status != 200 {
				t.Errorf("next request: %d %s, want 200", r.status, r.body)
			}
		})
	}
	// Each case sent one good request after it; the framing cases may
	// have sent one more (their own body, by Transfer-Encoding).
	if got, max := prov.Hits(fp.PathDecisions)-hits, len(tests)+3; got < len(tests) || got > max {
		t.Errorf("provider decisions = %d, want %d to %d", got, len(tests), max)
	}
	if g := waitMetric(t, b.url, tok, "go_goroutines", baseG, 15*time.Second); g > baseG {
		t.Errorf("goroutines %v after the garbage, quiet bridge at most %v", g, baseG)
	}
	if fds := waitMetric(t, b.url, tok, "process_open_fds", baseFD, 15*time.Second); fds > baseFD {
		t.Errorf("open fds %v after the garbage, baseline %v", fds, baseFD)
	}
	v := readLedger(t, e.db())
	if v.open != 0 || v.integrity != "ok" {
		t.Errorf("ledger: %d open reservations, integrity %q", v.open, v.integrity)
	}
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

// Case 6. Slowloris: 200 connections dripping their headers a byte at a
// time are each closed at the header timeout, while a real request sent
// meanwhile is served before any of them is closed; goroutines and file
// descriptors return to their baseline.
func TestAdversarialSlowlorisClosedAtHeaderTimeoutWhileServing(t *testing.T) {
	// The header timeout is what the real request must beat: long enough
	// for one request on a loaded machine, short enough to keep the suite
	// quick. The bridge's other timers that could close a connection
	// (read_timeout 30 s, idle_timeout 120 s) are far beyond orphanAfter.
	const headerTimeout, orphanAfter = 3 * time.Second, 20 * time.Second
	e := newE2E(t)
	prov, b, tok := advBridge(e, "deadline: 10s, read_header_timeout: 3s", "")
	addr := hostPort(b.url)
	baseG := quietMetric(t, b.url, tok, "go_goroutines")
	baseFD := quietMetric(t, b.url, tok, "process_open_fds")

	const n = 200
	conns := make([]net.Conn, n)
	closedAfter := make([]time.Duration, n)
	readErr := make([]error, n)
	var closed atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c
		start := time.Now()
		io.WriteString(c, "POST /v1/decisions HTTP/1.1\r\nHost: "+addr+"\r\nX-Drip: ")
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Only the bridge ends this read, unless it never closes the
			// connection: then the deadline does, and the test says so.
			c.SetReadDeadline(time.Now().Add(orphanAfter))
			_, readErr[i] = io.Copy(io.Discard, c)
			closedAfter[i] = time.Since(start)
			closed.Add(1)
		}()
	}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				for _, c := range conns {
					c.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
					c.Write([]byte("a"))
				}
			}
		}
	}()
	r := advCall(t, "POST", b.url+"/v1/decisions", tok, decideBody)
	if r.status != 200 {
		t.Errorf("real request during the slowloris: %d %s, want 200", r.status, r.body)
	}
	if k := closed.Load(); k != 0 {
		t.Errorf("the real request was answered after %d of the %d dripping connections were closed; want it served while all were held", k, n)
	}
	wg.Wait()
	for i, d := range closedAfter {
		var ne net.Error
		if errors.As(readErr[i], &ne) && ne.Timeout() {
			t.Errorf("dripping connection %d still open after %v, want it closed at the header timeout %v", i, d, headerTimeout)
			break
		}
		if d < headerTimeout*9/10 {
			t.Errorf("dripping connection %d closed after %v, before the header timeout %v", i, d, headerTimeout)
			break
		}
	}
	if g := waitMetric(t, b.url, tok, "go_goroutines", baseG, 15*time.Second); g > baseG {
		t.Errorf("goroutines %v after the slowloris, quiet bridge at most %v", g, baseG)
	}
	if fds := waitMetric(t, b.url, tok, "process_open_fds", baseFD, 15*time.Second); fds > baseFD {
		t.Errorf("open fds %v after the slowloris, baseline %v", fds, baseFD)
	}
	if got := prov.Hits(fp.PathDecisions); got != 2 {
		t.Errorf("provider decisions = %d, want 2", got)
	}
	if v := readLedger(t, e.db()); len(v.rows) != 2 || v.open != 0 {
		t.Errorf("ledger: %d rows, %d open; want 2 settled", len(v.rows), v.open)
	}
}

// filler is an endless body of the letter a.
type filler struct{}

func (filler) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// Case 7. Slow and oversized request bodies: a body dripped slower than
// the read timeout is cut there; 64 MiB + 1 gets 413 (announced by
// Content-Length: without buffering it; chunked: at the cap).
// Nothing reaches the provider and no reservation is left open. Each part
// has its own bridge: the oversized bodies get timers far longer than
// sending 64 MiB takes on a loaded machine, so that only the cap can end
// them (with the slow part's 1.5 s read timeout, a loaded machine got 408).
func TestAdversarialSlowAndOversizedBodiesCutNothingUpstream(t *testing.T) {
	t.Run("slow body cut at the read timeout", func(t *testing.T) {
		// The deadline is far from the read timeout: the body read ends
		// with the server closing the connection, and closing it before
		// the deadline shows that the read timeout ended it.
		const readTimeout, deadline = 1500 * time.Millisecond, 30 * time.Second
		e := newE2E(t)
		prov, b, tok := advBridge(e, "deadline: 30s, read_timeout: 1500ms", "")
		addr := hostPort(b.url)
		hits := prov.Hits(fp.PathDecisions)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		start := time.Now()
		fmt.Fprintf(c, "POST /v1/decisions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, tok, len(decideBody))
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			// One byte a tick, never the last one: the body never ends.
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for i := 0; i < len(decideBody)-1; i++ {
				if _, err := c.Write([]byte{decideBody[i]}); err != nil {
					return
				}
				select {
				case <-tick.C:
				case <-stop:
					return
				}
			}
		}()
		statuses, closed := answers(c, deadline+10*time.Second)
		took := time.Since(start)
		t.Logf("slow body: answers %v, closed %v, after %v", statuses, closed, took)
		if !closed {
			t.Fatalf("slow body: the connection was still open %v after the %v deadline (answers %v); want it closed at the read timeout %v", 10*time.Second, deadline, statuses, readTimeout)
		}
		if took < readTimeout*9/10 || took >= deadline {
			t.Errorf("slow body ended after %v, want at the read timeout %v (before the %v deadline)", took, readTimeout, deadline)
		}
		if len(statuses) > 1 || len(statuses) == 1 && statuses[0] != 408 {
			t.Errorf("slow body: answers %v; want at most one 408 request_timeout", statuses)
		}
		checkNothingUpstream(t, e, prov, hits, b.url, tok)
	})
	t.Run("64 MiB + 1", func(t *testing.T) {
		// The read timeout and the deadline are far from what sending
		// 64 MiB takes on a loaded machine: the size cap, not a timer,
		// must end these requests.
		e := newE2E(t)
		prov, b, tok := advBridge(e, "deadline: 120s, read_timeout: 120s", "")
		hits := prov.Hits(fp.PathDecisions)
		for _, tt := range []struct {
			name      string
			announced bool
		}{{"with Content-Length", true}, {"chunked", false}} {
			t.Run(tt.name, func(t *testing.T) {
				// Twice: the client is still sending when the answer comes, and
				// must read the 413, not a connection reset.
				for range 2 {
					const size = 64<<20 + 1
					req, _ := http.NewRequest("POST", b.url+"/v1/decisions", io.LimitReader(filler{}, size))
					req.Header.Set("Authorization", "Bearer "+tok)
					if tt.announced {
						req.ContentLength = size
					}
					resp, err := oneShot.Do(req)
					if err != nil {
						t.Fatalf("no answer: %v", err)
					}
					out, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 413 || errCode(string(out)) != httpx.CodeRequestTooLarge {
						t.Errorf("%d %s, want 413 request_too_large", resp.StatusCode, out)
					}
				}
			})
		}
		checkNothingUpstream(t, e, prov, hits, b.url, tok)
	})
}

// checkNothingUpstream checks that refused bodies since the warm-up never
// reached the provider or the ledger, and that the bridge still serves.
func checkNothingUpstream(t *testing.T, e *e2e, prov *fp.Server, hits int, url, tok string) {
	t.Helper()
	if got := prov.Hits(fp.PathDecisions) - hits; got != 0 {
		t.Errorf("refused bodies reached the provider %d times", got)
	}
	if v := readLedger(t, e.db()); len(v.rows) != 1 || v.open != 0 {
		t.Errorf("ledger: %d rows, %d open; want only the warm-up, settled", len(v.rows), v.open)
	}
	if r := advCall(t, "POST", url+"/v1/decisions", tok, decideBody); r.status != 200 {
		t.Errorf("after the hostile bodies: %d %s", r.status, r.body)
	}
}

// Case 8. A provider that accepts the request and never answers: the
// caller gets 504 deadline_exceeded on time, the request is not replayed to
// another credential, the provider sees the call cancelled, and the ledger
// row holds unknown usage.
func TestAdversarialProviderNeverAnswersDeadlineOnTimeNoReplay(t *testing.T) {
	const deadline = 2 * time.Second
	e := newE2E(t)
	prov, b, tok := advBridge(e, "deadline: 2s", "")
	hits := prov.Hits(fp.PathDecisions)
	prov.SetDefault("", "", fp.Stall())
	start := time.Now()
	r := advCall(t, "POST", b.url+"/v1/decisions", tok, decideBody)
	took := time.Since(start)
	if r.status != 504 || errCode(r.body) != httpx.CodeDeadlineExceeded {
		t.Errorf("%d %s, want 504 deadline_exceeded", r.status, r.body)
	}
	// On time: not before the deadline, and long before any other timer
	// could answer (the write timeout is 75 s, the stall endless); the
	// margin is for a loaded machine, the 504 code says which timer fired.
	if took < deadline || took > deadline+5*time.Second {
		t.Errorf("answered after %v, want at the %v deadline", took, deadline)
	}
	if got := prov.Hits(fp.PathDecisions) - hits; got != 1 {
		t.Errorf("%d provider calls, want 1: a stalled call must not be replayed", got)
	}
	stalled := waitProviderCanceled(t, prov)
	id := stalled.Header.Get("X-Request-ID")
	row, ok := readLedger(t, e.db()).byID[id]
	if !ok || !row.Settled || row.Status != 504 || row.ErrorCode != httpx.CodeDeadlineExceeded || row.TotalTokens.Known || row.Attempts != 1 {
		t.Errorf("ledger row for the stalled call = %+v (found %v), want settled 504 deadline_exceeded, unknown tokens, 1 attempt", row, ok)
	}
}

// waitLog waits until the process has logged a line containing s (the
// access log line is written after the request's ledger row is settled).
func (p *proc) waitLog(s string, within time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(within)
	for !strings.Contains(p.stderr.String(), s) {
		if time.Now().After(deadline) {
			p.t.Fatalf("no log line with %q within %v", s, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Case 9. The client disconnects after the provider received the request:
// the provider sees its call cancelled, the request is not replayed, and
// the ledger row is still committed (the write does not use the cancelled
// request context).
func TestAdversarialClientDisconnectCancelsProviderRowCommitted(t *testing.T) {
	e := newE2E(t)
	prov, _ := e.provider("")
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	tok := e.token()
	advCall(t, "POST", b.url+"/v1/decisions", tok, decideBody)
	hits := prov.Hits(fp.PathDecisions)
	prov.SetDefault("", "", fp.Stall())
	received := make(chan fp.Received, 1)
	prov.OnRequest(func(r fp.Received) {
		if r.Path == fp.PathDecisions {
			select {
			case received <- r:
			default:
			}
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := tryCall(ctx, "POST", b.url+"/v1/decisions", tok, decideBody)
		errc <- err
	}()
	var got fp.Received
	select {
	case got = <-received:
	case <-time.After(10 * time.Second):
		t.Fatal("the provider never received the request")
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("client call ended with %v, want its own cancellation", err)
	}
	canceled := waitProviderCanceled(t, prov)
	id := got.Header.Get("X-Request-ID")
	if canceled.Header.Get("X-Request-ID") != id {
		t.Errorf("cancelled request %s, want %s", canceled.Header.Get("X-Request-ID"), id)
	}
	b.waitLog("request_id="+id, 10*time.Second)
	if n := prov.Hits(fp.PathDecisions) - hits; n != 1 {
		t.Errorf("%d provider calls, want 1", n)
	}
	row, ok := readLedger(t, e.db()).byID[id]
	if !ok || !row.Settled || row.Status != 499 || row.ErrorCode != httpx.CodeClientClosedRequest || row.TotalTokens.Known {
		t.Errorf("ledger row = %+v (found %v), want settled 499 client_closed_request with unknown tokens", row, ok)
	}
}

// waitProviderCanceled waits for the provider to see a call cancelled by
// its caller and returns that call; 30 s only bounds a failing run.
func waitProviderCanceled(t *testing.T, prov *fp.Server) fp.Received {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := prov.WaitCanceled(ctx)
	if err != nil {
		t.Fatalf("the provider never saw the call cancelled: %v", err)
	}
	return r
}

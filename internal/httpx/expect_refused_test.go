package httpx

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/secret"
)

// A request with "Expect: 100-continue" that the guard refuses (wrong
// token, foreign Host, foreign Origin) gets its answer with "Connection:
// close" and no 100 Continue, so the client never sends the body. The
// connection must then close at once: net/http would otherwise wait for
// that body after the answer (to reuse the connection) until the read
// timeout, holding the connection, and a bridge stop behind it, for
// read_timeout (30s).
func TestGuardRefusalUnderExpectContinueClosesAtOnce(t *testing.T) {
	srv := httptest.NewUnstartedServer(nil)
	srv.Config.ReadTimeout = 2 * time.Minute
	_, p, _ := net.SplitHostPort(srv.Listener.Addr().String())
	var port int
	fmt.Sscan(p, &port)
	g := &Guard{Port: port, Authenticate: func(_ *http.Request, tok secret.Value) (string, bool, error) {
		return "default", tok.Equal(secret.New("good")), nil
	}}
	srv.Config.Handler = g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	srv.Start()
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	for _, tt := range []struct{ name, headers string }{
		{"wrong token", "Host: " + addr + "\r\nAuthorization: Bearer wrong\r\n"},
		{"foreign host", "Host: evil.example:" + p + "\r\n"},
		{"foreign origin", "Host: " + addr + "\r\nOrigin: https://evil.example\r\nAuthorization: Bearer good\r\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, "POST /v1/decisions HTTP/1.1\r\n"+tt.headers+"Content-Type: application/json\r\nContent-Length: 10\r\nExpect: 100-continue\r\n\r\n")
			// Bounded well below the server's read timeout: the close is
			// awaited as an event (EOF), the deadline only fails the test.
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			if resp.StatusCode < 400 || !resp.Close {
				t.Fatalf("status %d, Connection: close %v; want a refusal that closes", resp.StatusCode, resp.Close)
			}
			if _, err := br.ReadByte(); err != io.EOF {
				if errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("the connection is still open after the refusal said Connection: close (the server waits for a body it never asked for)")
				}
				t.Fatalf("after the answer: %v, want EOF", err)
			}
		})
	}
}

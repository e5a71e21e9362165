package httpx

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

	"github.com/rotorhq/rotor/internal/secret"
)

// Issue 8, case 5: net/http serves a request carrying both Content-Length
// and Transfer-Encoding by the latter and keeps the connection, so a second
// request smuggled behind it would be served too. The guard closes the
// connection after answering any request with a Transfer-Encoding (RFC 9112
// section 6.1).
func TestGuardClosesConnectionAfterTransferEncodedRequest(t *testing.T) {
	srv := httptest.NewUnstartedServer(nil)
	_, p, _ := net.SplitHostPort(srv.Listener.Addr().String())
	var port int
	fmt.Sscan(p, &port)
	g := &Guard{Port: port, Authenticate: func(*http.Request, secret.Value) (string, bool, error) { return "default", true, nil }}
	var served atomic.Int32
	srv.Config.Handler = g.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		io.Copy(io.Discard, r.Body)
	}))
	srv.Start()
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	req := "POST / HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer x\r\n"
	tests := []struct {
		name, first string
		wantOpen    bool
	}{
		{"Content-Length and Transfer-Encoding", req + "Content-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", false},
		{"Transfer-Encoding alone", req + "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", false},
		{"Content-Length alone keeps the connection", req + "Content-Length: 5\r\n\r\nhello", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			served.Store(0)
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			io.WriteString(c, tt.first+req+"Content-Length: 0\r\nConnection: close\r\n\r\n")
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			br := bufio.NewReader(c)
			var statuses []int
			for {
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					break
				}
				io.Copy(io.Discard, resp.Body)
				statuses = append(statuses, resp.StatusCode)
			}
			want := 1
			if tt.wantOpen {
				want = 2
			}
			if len(statuses) != want || int(served.Load()) != want {
				t.Errorf("answers %v, handler ran %d times; want %d", statuses, served.Load(), want)
			}
			if !tt.wantOpen && !strings.EqualFold(fmt.Sprint(statuses), "[200]") {
				t.Errorf("answers %v, want [200]", statuses)
			}
		})
	}
}

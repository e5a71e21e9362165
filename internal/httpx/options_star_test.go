package httpx

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"

	"github.com/rotorhq/rotor/internal/secret"
)

// "OPTIONS *" goes through the guard like any request: net/http's own
// answer to it (200, empty, no security headers) would skip the Host
// check, so a name the server does not answer to still got an answer.
func TestServeOptionsStarPassesTheGuard(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	g := &Guard{Port: port, Authenticate: func(*http.Request, secret.Value) (string, bool, error) { return "default", true, nil }}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		errc <- Serve(ctx, ln, g.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})), ServeOptions{})
	}()
	defer func() { cancel(); <-errc }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "OPTIONS * HTTP/1.1\r\nHost: evil.example:%d\r\nConnection: close\r\n\r\n", port)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("OPTIONS * with a foreign Host: %d %q %q, want 403 host_not_allowed", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
}

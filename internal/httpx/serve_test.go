package httpx

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// acceptSignal is a listener that reports each connection it accepts.
type acceptSignal struct {
	net.Listener
	accepted chan struct{}
}

func (l acceptSignal) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.accepted <- struct{}{}
	}
	return c, err
}

// A stop whose drain runs out while a connection has sent only part of
// its headers (one just opened) cut no request: Serve returns nil, not
// "requests still running were cut off" (exit 1). A request in its
// handler at the end of the drain is still reported.
func TestServeDrainIgnoresConnectionsWithoutARequest(t *testing.T) {
	serve := func(t *testing.T, h http.Handler, client func(addr string)) error {
		t.Helper()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		sl := acceptSignal{ln, make(chan struct{}, 1)}
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() {
			errc <- Serve(ctx, sl, h, ServeOptions{Drain: 50 * time.Millisecond, Settle: 50 * time.Millisecond})
		}()
		client(ln.Addr().String())
		<-sl.accepted
		cancel()
		select {
		case err := <-errc:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("Serve did not return")
			return nil
		}
	}
	dialPartial := func(addr string) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Write([]byte("POST /v1/decisions HT")); err != nil {
			t.Fatal(err)
		}
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	if err := serve(t, ok, dialPartial); err != nil {
		t.Errorf("drain with only a half-sent request line: %v, want nil (nothing was cut)", err)
	}

	inHandler := make(chan struct{})
	blocked := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(inHandler)
		<-r.Context().Done()
	})
	err := serve(t, blocked, func(addr string) {
		go http.Post("http://"+addr+"/", "text/plain", strings.NewReader("x"))
		<-inHandler
	})
	if err == nil || !strings.Contains(err.Error(), "cut off") {
		t.Errorf("drain with a request in its handler: %v, want the cut reported", err)
	}
}

// A handler cut at shutdown while it writes to a caller that stopped
// reading learns of it only when Close ends the connection; it then
// writes its ledger row. Serve waits for it (Settle again, 2s at least) before
// it returns and the caller closes the ledger: a cut stream's row was left
// unsettled when the process won the race.
func TestServeWaitsForHandlersCutOnAStalledCaller(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	writing, writeFailed, proceed := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := make([]byte, 64<<10)
		for i := 0; ; i++ {
			if i == 1 {
				close(writing)
			}
			if _, err := w.Write(chunk); err != nil {
				break
			}
			w.(http.Flusher).Flush()
		}
		close(writeFailed)
		<-proceed // the row being written
		finished.Store(true)
	})
	ctx, cancel := context.WithCancel(context.Background())
	serveDone := make(chan error, 1)
	go func() {
		serveDone <- Serve(ctx, ln, h, ServeOptions{Drain: 50 * time.Millisecond, Settle: 50 * time.Millisecond, WriteTimeout: time.Minute})
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	<-writing // the caller reads nothing from here on
	cancel()
	<-writeFailed
	// Without the wait Serve returns at once now; give it the chance.
	select {
	case err := <-serveDone:
		t.Fatalf("Serve returned (%v) while a cut handler was still writing its row", err)
	case <-time.After(20 * time.Millisecond):
	}
	close(proceed)
	if err := <-serveDone; err == nil || !strings.Contains(err.Error(), "cut off") {
		t.Errorf("Serve = %v, want the cut reported", err)
	}
	if !finished.Load() {
		t.Error("Serve returned before the cut handler finished")
	}
}

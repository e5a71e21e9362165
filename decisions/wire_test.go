package decisions

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"sync"
	"testing"
)

// writeLog records every write a provider connection makes.
type writeLog struct {
	mu     sync.Mutex
	writes [][]byte
}

type loggedConn struct {
	net.Conn
	log *writeLog
}

func (c loggedConn) Write(p []byte) (int, error) {
	c.log.mu.Lock()
	c.log.writes = append(c.log.writes, bytes.Clone(p))
	c.log.mu.Unlock()
	return c.Conn.Write(p)
}

// The provider call leaves in one write, headers and body together: one
// syscall and one segment per call on both sides (issue 7). net/http
// flushes the headers on their own before a body it does not know to be in
// memory.
func TestProviderCallIsOneWrite(t *testing.T) {
	log := &writeLog{}
	client := NewHTTPClient()
	tr := client.Transport.(*http.Transport)
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return loggedConn{c, log}, nil
	}
	h := newHarness(t, opts{httpClient: client})
	body := decision("api/decide-mini")
	for range 3 {
		wantStatus(t, h.post(body), 200, "")
	}
	log.mu.Lock()
	defer log.mu.Unlock()
	var posts int
	for i, w := range log.writes {
		if !bytes.HasPrefix(w, []byte("POST ")) {
			continue
		}
		posts++
		head, sent, ok := bytes.Cut(w, []byte("\r\n\r\n"))
		if !ok || len(sent) == 0 {
			t.Errorf("write %d holds the headers only (%d bytes); the body followed in another write", i, len(head))
		}
	}
	if posts != 3 {
		t.Errorf("%d provider calls seen, want 3", posts)
	}
}

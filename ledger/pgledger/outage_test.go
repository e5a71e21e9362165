package pgledger

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/testutil"
	"github.com/rotorhq/rotor/internal/testutil/pgtest"
	"github.com/rotorhq/rotor/ledger"
)

// proxy forwards TCP connections to the test PostgreSQL; down closes its
// listener and every connection (the server as a client sees it stopped),
// up listens again on the same address.
type proxy struct {
	t      *testing.T
	addr   string
	target string
	// stalled: bytes are read and dropped, so the server seems to hang.
	stalled atomic.Bool
	mu      sync.Mutex
	ln      net.Listener
	conns   []net.Conn
}

func newProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, target: target}
	p.up()
	p.addr = p.ln.Addr().String()
	t.Cleanup(p.down)
	return p
}

// proxiedStore opens a Store with opts on a fresh, migrated schema
// through a proxy the test can stall or take down.
func proxiedStore(t *testing.T, opts Options) (*Store, *proxy) {
	t.Helper()
	u, _ := pgtest.Schema(t)
	if _, _, err := Migrate(context.Background(), u, Options{}); err != nil {
		t.Fatal(err)
	}
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, pu.Host)
	pu.Host = p.addr
	return openURL(t, pu.String(), opts), p
}

func (p *proxy) up() {
	addr := "127.0.0.1:0"
	if p.addr != "" {
		addr = p.addr
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		p.t.Fatal(err)
	}
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { p.copy(s, c); s.Close() }()
			go func() { p.copy(c, s); c.Close() }()
		}
	}()
}

func (p *proxy) copy(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.stalled.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *proxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestServerDownIsUnavailableThenServesAgain: with the server gone, every
// method fails promptly with ErrUnavailable (none hangs past its
// context's deadline); once it is back, the same Store serves again.
func TestServerDownIsUnavailableThenServesAgain(t *testing.T) {
	ctx := context.Background()
	s, p := proxiedStore(t, Options{})
	exp := time.Now().Add(time.Hour)
	if err := s.Reserve(ctx, ledger.Reservation{RequestID: "before", Expires: exp, Operation: "chat"}, nil); err != nil {
		t.Fatal(err)
	}
	p.down()
	calls := map[string]func(context.Context) error{
		"Reserve": func(ctx context.Context) error {
			return s.Reserve(ctx, ledger.Reservation{RequestID: "down", Expires: exp, Operation: "chat"}, nil)
		},
		"Settle": func(ctx context.Context) error {
			return s.Settle(ctx, ledger.Settlement{RequestID: "before", Status: 200})
		},
		"Budgets": func(ctx context.Context) error { _, err := s.Budgets(ctx); return err },
		"PutBudget": func(ctx context.Context) error {
			return s.PutBudget(ctx, ledger.BudgetRecord{Name: "b", Kind: "requests", Limit: 1, Window: "1h"}, false)
		},
		"LookupToken": func(ctx context.Context) error { _, _, err := s.LookupToken(ctx, [32]byte{}); return err },
		"Report": func(ctx context.Context) error {
			_, err := s.Report(ctx, ledger.ReportQuery{From: time.Now().Add(-time.Hour), To: time.Now()})
			return err
		},
		"View":       func(ctx context.Context) error { return s.View(ctx, func(ledger.WindowReader) error { return nil }) },
		"GetLearned": func(ctx context.Context) error { _, _, err := s.GetLearned(ctx, "x", time.Now()); return err },
	}
	for name, call := range calls {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := call(cctx)
		cancel()
		if !errors.Is(err, ledger.ErrUnavailable) {
			t.Errorf("%s with the server down = %v, want ErrUnavailable", name, err)
		}
	}
	p.up()
	if err := s.Settle(ctx, ledger.Settlement{RequestID: "before", Status: 200}); err != nil {
		t.Fatalf("Settle after the server is back: %v", err)
	}
	if err := s.Reserve(ctx, ledger.Reservation{RequestID: "after", Expires: exp, Operation: "chat"}, nil); err != nil {
		t.Fatalf("Reserve after the server is back: %v", err)
	}
	rows, err := s.Rows(ctx, time.Now().Add(-time.Hour), time.Now().Add(time.Hour), 0)
	if err != nil || len(rows) != 2 || !rows[0].Settled && !rows[1].Settled {
		t.Fatalf("rows after = %+v, %v; want before (settled) and after", rows, err)
	}
}

// TestHungServerFailsAtTheDeadline: a server that stops answering fails a
// call with ErrUnavailable at its context's deadline, never hangs it; the
// Store serves again once the server answers.
func TestHungServerFailsAtTheDeadline(t *testing.T) {
	ctx := context.Background()
	s, p := proxiedStore(t, Options{MaxConns: 2, ConnectTimeout: time.Second})
	// Cut the proxied connections before the Store closes: pgx closes a
	// connection left mid-query by the stall only after its 15 s close
	// timeout, which the test would otherwise wait out in its cleanup.
	t.Cleanup(p.down)
	exp := time.Now().Add(time.Hour)
	p.stalled.Store(true)
	for _, call := range []func(context.Context) error{
		func(ctx context.Context) error {
			return s.Reserve(ctx, ledger.Reservation{RequestID: "hung", Expires: exp, Operation: "chat"}, nil)
		},
		func(ctx context.Context) error { _, err := s.Budgets(ctx); return err },
	} {
		cctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		err := call(cctx)
		cancel()
		if !errors.Is(err, ledger.ErrUnavailable) {
			t.Fatalf("call to a hung server = %v, want ErrUnavailable", err)
		}
	}
	p.stalled.Store(false)
	if err := s.Reserve(ctx, ledger.Reservation{RequestID: "after", Expires: exp, Operation: "chat"}, nil); err != nil {
		t.Fatalf("Reserve once the server answers: %v", err)
	}
}

// TestCloseAfterAHangDoesNotWait: after a call failed on a server that
// stopped answering, Close returns without waiting out pgx's 15 s close
// of the connection the call left behind, so a bridge or command exits
// promptly; the server stays hung until the test ends.
func TestCloseAfterAHangDoesNotWait(t *testing.T) {
	var logs testutil.SyncBuffer
	s, p := proxiedStore(t, Options{MaxConns: 2, ConnectTimeout: time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	p.stalled.Store(true)
	cctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	err := s.Reserve(cctx, ledger.Reservation{RequestID: "hung", Expires: time.Now().Add(time.Hour), Operation: "chat"}, nil)
	cancel()
	if !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("call to a hung server = %v, want ErrUnavailable", err)
	}
	closed := make(chan struct{})
	go func() {
		s.Close()
		close(closed)
	}()
	// pgx alone takes 15 s; Close waits closeWait (1 s). The bound is
	// generous for a loaded machine and still short of pgx's.
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close still waits on the connection the hung server left behind")
	}
	// It says so: a connection left behind is not silent.
	if !strings.Contains(logs.String(), "still closing") {
		t.Errorf("Close gave up waiting without a log line; logs:\n%s", logs.String())
	}
}

// An error the driver returns is printed with every password the URL
// holds removed: the user's password and sslpassword (an encrypted client
// key's passphrase, which pgx reads from the URL), as written and decoded.
func TestScrubRemovesEveryPassword(t *testing.T) {
	u := "postgres://alice:pa%40ss@db/rotor?sslkey=/k.pem&sslpassword=key%20phrase"
	msg := scrub("failed: pa%40ss pa@ss key%20phrase key phrase", u)
	for _, secret := range []string{"pa%40ss", "pa@ss", "key%20phrase", "key phrase"} {
		if strings.Contains(msg, secret) {
			t.Errorf("scrubbed message %q still holds %q", msg, secret)
		}
	}
	if got := scrub("pa@ss", "postgres://alice:pa@ss@[::1"); strings.Contains(got, "pa@ss") {
		t.Errorf("a URL that does not parse: %q", got)
	}
}

package e2e

// The adversarial suite's helpers: bridges with short timers, raw
// exchanges, ledger and metric readers, process control.

import (
	"bufio"
	"context"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/internal/testutil/ledgertest"
	"github.com/rotorhq/rotor/ledger"
)

var longFlag = flag.Bool("long", false, "run the long variant of the adversarial suite (also ROTOR_ADVERSARIAL_LONG=1)")

// advLong reports whether the long variant runs: 50+ kill -9 cycles and
// longer loads.
func advLong() bool { return *longFlag || os.Getenv("ROTOR_ADVERSARIAL_LONG") == "1" }

// advProvider is e.provider with the runtime section of rotor.yaml
// replaced, for the short server timeouts the suite needs (real config
// keys: runtime.read_header_timeout, runtime.read_timeout,
// runtime.deadline).
// advBridge starts a fake provider (advProvider's runtime and extra
// config), a bridge on it, and one request through it that must answer 200
// (it warms the catalogs); it returns the provider, the bridge and the
// client token.
func advBridge(e *e2e, runtime, extra string) (*fp.Server, *proc, string) {
	e.t.Helper()
	prov, _ := advProvider(e, runtime, extra)
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	tok := e.token()
	if r := advCall(e.t, "POST", b.url+"/v1/decisions", tok, decideBody); r.status != 200 {
		e.t.Fatalf("warm-up: %d %s", r.status, r.body)
	}
	return prov, b, tok
}

func advProvider(e *e2e, runtime, extra string) (*fp.Server, map[string]string) {
	e.t.Helper()
	prov, keys := e.provider(extra)
	if runtime != "" {
		path := filepath.Join(e.home, "rotor.yaml")
		b, err := os.ReadFile(path)
		if err != nil {
			e.t.Fatal(err)
		}
		const line = "runtime: {deadline: 10s}\n"
		if !strings.Contains(string(b), line) {
			e.t.Fatalf("rotor.yaml from e.provider has no %q to replace:\n%s", line, b)
		}
		s := strings.Replace(string(b), line, "runtime: {"+runtime+"}\n", 1)
		if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
			e.t.Fatal(err)
		}
	}
	return prov, keys
}

// oneShot is a client that opens a new connection for every request, so
// that the bridge holds no idle keep-alive connection (and no goroutine)
// for the test between requests.
var oneShot = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// advCall is call over oneShot.
func advCall(t *testing.T, method, url, token, body string, hdr ...string) httpReply {
	t.Helper()
	r, err := tryCall(context.Background(), method, url, token, body, hdr...)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return r
}

// tryCall is advCall that returns transport errors (a killed bridge, a
// dropped connection) instead of failing the test.
func tryCall(ctx context.Context, method, url, token, body string, hdr ...string) (httpReply, error) {
	req, err := newCall(ctx, method, url, token, body, hdr...)
	if err != nil {
		return httpReply{}, err
	}
	resp, err := oneShot.Do(req)
	if err != nil {
		return httpReply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return httpReply{}, err
	}
	return httpReply{resp.StatusCode, resp.Header, string(b)}, nil
}

// rawExchange writes raw bytes on a new connection to addr and reads one
// HTTP answer, all within timeout.
func rawExchange(addr, raw string, timeout time.Duration) (*http.Response, string, error) {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return nil, "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(timeout))
	// The server may answer and close before it has read everything: keep
	// going and read what it said.
	_, _ = io.WriteString(c, raw)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b), nil
}

func hostPort(url string) string { return strings.TrimPrefix(url, "http://") }

// ledgerView is the ledger as a user's tools see it: the raw rows, the
// rollups budgets read, and SQLite's own integrity check.
type ledgerView struct {
	rows      []ledger.Row
	byID      map[string]ledger.Row
	open      int // reservations never settled
	unknown   int // rows of unknown tokens, open ones included
	totals    ledger.Totals
	integrity string
}

func readLedger(t *testing.T, path string) ledgerView {
	t.Helper()
	ctx := context.Background()
	s, err := ledger.Open(ctx, path, ledger.Options{})
	if err != nil {
		t.Fatalf("open ledger: %v", err)
	}
	defer s.Close()
	var v ledgerView
	if err := ledgertest.DB(t, path).QueryRowContext(ctx, "PRAGMA integrity_check").Scan(&v.integrity); err != nil {
		t.Fatalf("integrity_check: %v", err)
	}
	now := time.Now()
	if v.rows, err = s.Rows(ctx, now.Add(-24*time.Hour), now.Add(time.Hour), 0); err != nil {
		t.Fatalf("rows: %v", err)
	}
	v.byID = map[string]ledger.Row{}
	for _, r := range v.rows {
		if _, dup := v.byID[r.RequestID]; dup {
			t.Errorf("request %s has two ledger rows", r.RequestID)
		}
		v.byID[r.RequestID] = r
		if !r.Settled {
			v.open++
		}
		if !r.TotalTokens.Known {
			v.unknown++
		}
	}
	err = s.View(ctx, func(r ledger.WindowReader) error {
		var err error
		v.totals, err = r.Totals(ledger.Window{From: now.Add(-24 * time.Hour), To: now.Add(time.Hour)})
		return err
	})
	if err != nil {
		t.Fatalf("totals: %v", err)
	}
	return v
}

// requestIDs returns the X-Request-ID of every decisions request the
// provider received, in order.
func requestIDs(prov *fp.Server) []string {
	var ids []string
	for _, r := range prov.Requests() {
		if r.Path == fp.PathDecisions {
			ids = append(ids, r.Header.Get("X-Request-ID"))
		}
	}
	return ids
}

// metric reads one unlabelled gauge from the bridge's /metrics.
func metric(t *testing.T, url, tok, name string) float64 {
	t.Helper()
	r := advCall(t, "GET", url+"/metrics", tok, "")
	for _, line := range strings.Split(r.body, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}

// quietMetric reads a gauge of the quiet bridge several times, back to
// back, and returns the highest reading: the baseline a leak never comes
// back down to. One reading is no baseline, because reading perturbs what
// it measures: the registry gathers its collectors in random order on a
// varying number of goroutines of its own, and the connection of the
// reading before may still be closing; an idle bridge's go_goroutines
// spans ten values or so. A single low reading as the baseline failed the
// adversarial tests on a loaded machine with nothing leaked (17 against
// 16, the goroutine dump holding only the bridge's usual goroutines).
func quietMetric(t *testing.T, url, tok, name string) float64 {
	t.Helper()
	var most float64
	for range 20 {
		most = max(most, metric(t, url, tok, name))
	}
	return most
}

// waitMetric polls a gauge until it is at most want (connections closing
// is asynchronous) and returns the last value read.
func waitMetric(t *testing.T, url, tok, name string, want float64, within time.Duration) float64 {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		v := metric(t, url, tok, name)
		if v <= want || time.Now().After(deadline) {
			return v
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitExit waits for the process to end and returns how it ended.
func (p *proc) waitExit(within time.Duration) error {
	p.t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		return err
	case <-time.After(within):
		p.t.Fatalf("rotor did not exit within %v", within)
		return nil
	}
}

// kill9 kills the process with SIGKILL and waits for it.
func (p *proc) kill9() {
	p.t.Helper()
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.waitExit(10 * time.Second)
}

// alive reports whether the process is still running.
func (p *proc) alive() bool {
	select {
	case err := <-p.done:
		p.done <- err
		return false
	default:
		return true
	}
}

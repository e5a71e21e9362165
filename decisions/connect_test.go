package decisions

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/internal/httpx"
)

// byPath sends catalog fetches through one transport and provider calls
// through another.
type byPath struct{ models, calls http.RoundTripper }

func (b byPath) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Path == fp.PathModels {
		return b.models.RoundTrip(r)
	}
	return b.calls.RoundTrip(r)
}

// stallingDials returns a provider client whose calls never get a
// connection: each dial waits, as a TCP or TLS handshake with a provider
// that does not answer does, until the test ends. Catalog fetches go
// through an ordinary transport, so discovery works. dialing receives a
// value as each dial starts.
func stallingDials(t *testing.T) (client *http.Client, dialing <-chan struct{}) {
	t.Helper()
	started := make(chan struct{}, 16)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	stall := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		select {
		case started <- struct{}{}:
		default:
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-stop:
			return nil, errors.New("test over")
		}
	}}
	return &http.Client{Transport: byPath{models: NewHTTPClient().Transport, calls: stall}, CheckRedirect: NoRedirects}, started
}

// openReservation waits for dialing, then returns the request id of the
// one reservation the ledger holds open.
func (h *harness) openReservation(dialing <-chan struct{}) string {
	h.t.Helper()
	select {
	case <-dialing:
	case <-time.After(10 * time.Second):
		h.t.Fatal("no provider call started")
	}
	rows := h.rows()
	if len(rows) != 1 || rows[0].Settled {
		h.t.Fatalf("rows while the call connects: %+v, want one open reservation", rows)
	}
	return rows[0].RequestID
}

// wantReleased waits until the reservation id is resolved, and fails if it
// was settled into a usage row instead of released.
func (h *harness) wantReleased(id string) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		found := false
		for _, r := range h.rows() {
			if r.RequestID != id {
				continue
			}
			if r.Settled {
				h.t.Fatalf("a call that never reached the provider left a usage row: %+v", r)
			}
			found = true
		}
		if !found {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("reservation %s neither released nor settled", id)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A call given up while its connection is still being opened sent not one
// byte to the provider: the reservation is released and no usage row
// remains (a row of unknown usage would make every cost budget fail
// closed), and a deadline that passes then is answered without
// x-should-retry: false, since nothing ran.
func TestCallGivenUpWhileConnectingLeavesNoRow(t *testing.T) {
	t.Run("client gone", func(t *testing.T) {
		client, dialing := stallingDials(t)
		h := newHarness(t, opts{httpClient: client})
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		done := make(chan error, 1)
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.srv.URL+Endpoint, strings.NewReader(decision("api/decide-mini")))
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		id := h.openReservation(dialing)
		cancel()
		if err := <-done; err == nil {
			t.Fatal("request answered after the client left")
		}
		h.wantReleased(id)
	})
	t.Run("deadline", func(t *testing.T) {
		client, dialing := stallingDials(t)
		h := newHarness(t, opts{httpClient: client, deadline: 2 * time.Second})
		// Warm catalogs: the deadline must pass while the call
		// connects, not during discovery on a loaded machine.
		if status, body := getModels(t, h); status != 200 {
			t.Fatalf("GET /v1/models: %d %s", status, body)
		}
		done := make(chan reply, 1)
		go func() { done <- h.post(decision("api/decide-mini")) }()
		id := h.openReservation(dialing)
		r := <-done
		wantStatus(t, r, 504, httpx.CodeDeadlineExceeded)
		if r.header.Get("x-should-retry") == "false" {
			t.Errorf("504 with x-should-retry: false, although nothing reached the provider")
		}
		h.wantReleased(id)
	})
}

// roundTrip is an http.RoundTripper from a func.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A call whose connection could not be opened because its TLS handshake
// failed (a proxy or certificate problem, a port that speaks plain HTTP)
// sent nothing either: another credential serves the request, and when
// none can, the answer is 502 with no usage row, not a row of unknown
// usage that would make every cost budget fail closed.
func TestHandshakeFailureIsNotASend(t *testing.T) {
	plain := NewHTTPClient().Transport
	// tlsTo sends the calls of the given keys over TLS to the fake
	// provider, which speaks plain HTTP: each handshake fails.
	tlsTo := func(keys ...string) *http.Client {
		calls := roundTrip(func(r *http.Request) (*http.Response, error) {
			for _, k := range keys {
				if r.Header.Get("Authorization") == "Bearer "+k {
					r = r.Clone(r.Context())
					r.URL.Scheme = "https"
				}
			}
			return plain.RoundTrip(r)
		})
		return &http.Client{Transport: byPath{models: plain, calls: calls}, CheckRedirect: NoRedirects}
	}
	creds := defaultCreds()
	t.Run("another credential serves", func(t *testing.T) {
		h := newHarness(t, opts{creds: creds, httpClient: tlsTo(creds[0].key)})
		r := h.post(decision("api/decide-mini"))
		wantStatus(t, r, 200, "")
		if got := r.header.Get("X-Rotor-Credential"); got != creds[1].name {
			t.Errorf("served by %q, want %s after %s's handshake failed", got, creds[1].name, creds[0].name)
		}
	})
	t.Run("none can", func(t *testing.T) {
		keys := make([]string, len(creds))
		for i, c := range creds {
			keys[i] = c.key
		}
		h := newHarness(t, opts{creds: creds, httpClient: tlsTo(keys...)})
		r := h.post(decision("api/decide-mini"))
		wantStatus(t, r, 502, httpx.CodeUpstreamError)
		if r.header.Get("x-should-retry") == "false" {
			t.Errorf("502 with x-should-retry: false, although nothing reached the provider")
		}
		if rows := h.rows(); len(rows) != 0 {
			t.Errorf("rows after every handshake failed: %+v, want none (nothing was sent)", rows)
		}
	})
}

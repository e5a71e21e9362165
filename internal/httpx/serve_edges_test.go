package httpx

import (
	"bytes"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/rotorhq/rotor/internal/clock"
)

// A taken port is a usage error (exit 2, with the hint to pass
// --listen 127.0.0.1:0), and still says EADDRINUSE underneath.
func TestListenLoopbackTakenPortIsAUsageError(t *testing.T) {
	held, err := ListenLoopback("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	ln, err := ListenLoopback(held.Addr().String(), false)
	if ln != nil {
		ln.Close()
	}
	var le *ListenError
	if !errors.As(err, &le) || !le.Usage || le.NonLoopback || !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("listening on a taken port: %#v, want a usage ListenError wrapping EADDRINUSE", err)
	}
}

// The access line and the metrics take the status that went out: the
// first WriteHeader (net/http ignores a later one), not the last.
func TestAccessLogRecordsTheStatusSent(t *testing.T) {
	logs := &bytes.Buffer{}
	m := &codeMetrics{}
	al := AccessLog{Server: "test", Logger: slog.New(slog.NewTextHandler(logs, nil)), Metrics: m, Clock: clock.Real()}
	h := al.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusAccepted)
		w.WriteHeader(http.StatusInternalServerError) // superfluous: not sent
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("POST", "/v1/decisions", nil))
	if rec.Code != http.StatusAccepted || !strings.Contains(logs.String(), "status=202") || len(m.got) != 1 || m.got[0] != "202 " {
		t.Errorf("sent %d; logged %q, counted %q; want 202 in both", rec.Code, logs, m.got)
	}
}

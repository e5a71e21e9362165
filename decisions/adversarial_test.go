package decisions

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	fp "github.com/rotorhq/rotor/internal/fakeprovider"
)

// readCounter is an endless request body that counts the bytes read.
type readCounter struct{ n atomic.Int64 }

func (c *readCounter) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	c.n.Add(int64(len(p)))
	return len(p), nil
}

// Issue 8, case 7: a body announced larger than 64 MiB is refused with 413
// without being buffered, so it takes nothing from the buffer bound that
// real requests share (before the fix the route buffered the whole 64 MiB
// first: with a 1 MiB bound it answered 503 server_overloaded, and sixteen
// such requests took the default 1 GiB bound from everyone). It is drained
// only up to the cap.
func TestAnnouncedOversizedBodyRefusedWithoutBuffering(t *testing.T) {
	h := newHarness(t, opts{maxBuffered: 1 << 20})
	body := &readCounter{}
	req := httptest.NewRequest(http.MethodPost, "/v1/decisions", body)
	req.ContentLength = MaxBody + 1
	w := httptest.NewRecorder()
	h.router.ServeHTTP(w, req)
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "request_too_large") {
		t.Errorf("answer %d %s, want 413 request_too_large", w.Code, w.Body)
	}
	if n := body.n.Load(); n > MaxBody+1+32<<10 {
		t.Errorf("the route read %d bytes of an endless body, want at most the cap", n)
	}
	if n := h.fp.Hits(fp.PathModels) + h.fp.Hits(fp.PathDecisions); n != 0 {
		t.Errorf("provider hit %d times, want 0", n)
	}
	if n := len(h.rows()); n != 0 {
		t.Errorf("%d ledger rows, want 0", n)
	}
	if r := h.post(`{"model":"api/decide-mini","input":"x","question":{"type":"predicate"}}`); r.status != 200 {
		t.Errorf("a normal request after it: %d %s", r.status, r.body)
	}
}

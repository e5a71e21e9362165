package decisions

import (
	"database/sql"
	"testing"
	"time"

	"github.com/rotorhq/rotor/internal/testutil"
)

// Issue 14, item 5: budget admission under a ledger locked by another
// process ends at the request's deadline, not after busy_timeout (one
// minute here) on top of it. The deadline is long enough for the warm-up on
// a loaded machine; the busy_timeout far enough past it that no scheduling
// delay blurs the two.
func TestBudgetAdmissionHonoursRequestDeadline(t *testing.T) {
	h := newHarness(t, opts{deadline: 2 * time.Second, busyTimeout: time.Minute})
	if r := h.post(decision("api/decide-mini")); r.status != 200 { // warm: catalogs, writer
		t.Fatalf("warm-up: %d %s", r.status, r.body)
	}
	db, err := sql.Open("sqlite", h.store.Path()+"?_pragma=busy_timeout(0)&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	release := testutil.HoldWriteLock(t, db, db.Close)
	before := h.fp.Hits("/v1/decisions")
	start := time.Now()
	r := h.post(decision("api/decide-mini"))
	waited := time.Since(start)
	release()
	if r.status != 504 || r.err.Code == nil || *r.err.Code != "deadline_exceeded" {
		t.Errorf("admission past the deadline: %d %s, want 504 deadline_exceeded", r.status, r.body)
	}
	if waited > 30*time.Second {
		t.Errorf("the request waited %s: admission ran past its 2s deadline toward the ledger's one-minute busy_timeout", waited)
	}
	if n := h.fp.Hits("/v1/decisions") - before; n != 0 {
		t.Errorf("%d provider calls for a request never admitted", n)
	}
	if rows := h.rows(); len(rows) != 1 {
		t.Errorf("%d ledger rows, want only the warm-up's", len(rows))
	}
}

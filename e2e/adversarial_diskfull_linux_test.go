package e2e

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	fp "github.com/rotorhq/rotor/internal/fakeprovider"
	"github.com/rotorhq/rotor/internal/httpx"
)

// setFileSizeLimit sets the soft RLIMIT_FSIZE of a running process (as
// prlimit(1) does), keeping its hard limit, so the limit can be raised
// again without privileges.
func setFileSizeLimit(t *testing.T, pid int, soft uint64) {
	t.Helper()
	var cur syscall.Rlimit
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_FSIZE, 0, uintptr(unsafe.Pointer(&cur)), 0, 0); errno != 0 {
		t.Fatalf("prlimit get: %v", errno)
	}
	lim := syscall.Rlimit{Cur: min(soft, cur.Max), Max: cur.Max}
	if _, _, errno := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), syscall.RLIMIT_FSIZE, uintptr(unsafe.Pointer(&lim)), 0, 0, 0); errno != 0 {
		t.Fatalf("prlimit set: %v", errno)
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// Case 12. Disk full: the running bridge gets RLIMIT_FSIZE just above
// its database's size, so SQLite cannot append to the WAL (writes fail
// with EFBIG; Go's runtime ignores the SIGXFSZ that comes with them).
// Admission fails closed with 503 ledger_unavailable, nothing reaches the
// provider, the process stays up, and it serves again once the limit is
// lifted (space returns).
func TestAdversarialDiskFullAdmissionFailsClosedAndRecovers(t *testing.T) {
	e := newE2E(t)
	prov, _ := advProvider(e, "deadline: 10s", "")
	// A database with its schema checkpointed into the file, as after any
	// earlier run (a command that writes: reads never create a ledger).
	e.mustRun("bridge", "token", "create", "--label", "setup")
	b := e.start("bridge", "start", "--listen", "127.0.0.1:0")
	tok := e.token()
	// Traffic until the WAL is larger than the database file, so that a
	// limit just above the database's size leaves no room for the next
	// commit.
	var dbSize, walSize int64
	for i := 0; i < 100; i++ {
		if r := advCall(t, "POST", b.url+"/v1/decisions", tok, decideBody); r.status != 200 {
			t.Fatalf("warm-up %d: %d %s", i, r.status, r.body)
		}
		dbSize, walSize = fileSize(t, e.db()), fileSize(t, e.db()+"-wal")
		if walSize > dbSize+16<<10 {
			break
		}
	}
	limit := uint64(dbSize + 4096)
	if uint64(walSize) <= limit {
		t.Fatalf("WAL %d bytes, database %d: the WAL never outgrew the limit", walSize, dbSize)
	}
	hits, rows := prov.Hits(fp.PathDecisions), len(readLedger(t, e.db()).rows)
	setFileSizeLimit(t, b.cmd.Process.Pid, limit)
	for i := range 3 {
		r := advCall(t, "POST", b.url+"/v1/decisions", tok, decideBody)
		if r.status != 503 || errCode(r.body) != httpx.CodeLedgerUnavailable || r.header.Get("Retry-After") == "" {
			t.Errorf("disk full, request %d: %d %s, want 503 ledger_unavailable with Retry-After", i, r.status, r.body)
		}
	}
	if !b.alive() {
		t.Fatalf("the bridge died when the disk filled:\n%s", b.stderr)
	}
	if r := advCall(t, "GET", b.url+"/healthz", "", ""); r.status != 200 {
		t.Errorf("healthz while the disk is full: %d", r.status)
	}
	if got := prov.Hits(fp.PathDecisions) - hits; got != 0 {
		t.Errorf("%d requests reached the provider while the ledger could not record", got)
	}
	if v := readLedger(t, e.db()); len(v.rows) != rows || v.integrity != "ok" {
		t.Errorf("ledger while full: %d rows (had %d), integrity %q", len(v.rows), rows, v.integrity)
	}
	if logs := b.stderr.String(); !strings.Contains(logs, "admission failed closed") {
		t.Errorf("the bridge's log does not say why admissions fail:\n%s", logs)
	}
	// Space returns.
	setFileSizeLimit(t, b.cmd.Process.Pid, ^uint64(0)) // RLIM_INFINITY
	// Until the bridge serves again; 30 s only bounds a failing run.
	deadline := time.Now().Add(30 * time.Second)
	r := advCall(t, "POST", b.url+"/v1/decisions", tok, decideBody)
	for r.status != 200 && time.Now().Before(deadline) {
		r = advCall(t, "POST", b.url+"/v1/decisions", tok, decideBody)
	}
	if r.status != 200 {
		t.Fatalf("after space returned: %d %s, want 200", r.status, r.body)
	}
	if got := prov.Hits(fp.PathDecisions) - hits; got != 1 {
		t.Errorf("provider decisions after recovery = %d, want 1", got)
	}
	v := readLedger(t, e.db())
	if len(v.rows) != rows+1 || v.open != 0 || v.integrity != "ok" {
		t.Errorf("ledger after recovery: %d rows (want %d), %d open, integrity %q", len(v.rows), rows+1, v.open, v.integrity)
	}
}

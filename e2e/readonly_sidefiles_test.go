package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A user whose ledger was read-only (0400) runs ledger report (works),
// then gives the file its write bit back: every command must work again.
// Runs the binary as nobody (needs root and setpriv, else skipped).
func TestReadOnlyReportLeavesNoUnwritableSideFiles(t *testing.T) {
	setpriv, err := exec.LookPath("setpriv")
	if os.Getuid() != 0 || err != nil {
		t.Skip("needs root and setpriv")
	}
	e := newE2E(t)
	e.mustRun("init")
	seedUsage(t, e.db(), time.Now().UTC().Add(-2*time.Hour), 3)
	dir := filepath.Dir(e.home)
	for _, p := range []string{dir, e.home, e.db(), filepath.Join(e.home, "rotor.yaml"), filepath.Join(e.home, "bridge.token")} {
		if err := os.Chown(p, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	// Let nobody reach the home: the test's own folders below the system's
	// temporary folder get o+x; that folder and those above it are never
	// changed (a chmod of /tmp would drop its sticky bit).
	top := filepath.Clean(os.TempDir())
	for p := filepath.Dir(dir); p != top && strings.HasPrefix(p, top+string(filepath.Separator)); p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, fi.Mode().Perm()|0o011); err != nil {
			t.Fatal(err)
		}
	}
	os.Remove(e.db() + "-wal")
	os.Remove(e.db() + "-shm")
	asNobody := func(args ...string) result {
		return e.exec(e.env, setpriv, append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", e.bin}, args...)...)
	}
	if err := os.Chmod(e.db(), 0o400); err != nil {
		t.Fatal(err)
	}
	if r := asNobody("ledger", "report", "--format", "csv"); r.code != 0 {
		t.Fatalf("report on a read-only ledger: exit %d %s", r.code, r.stderr)
	}
	if err := os.Chmod(e.db(), 0o600); err != nil {
		t.Fatal(err)
	}
	r := asNobody("ledger", "report", "--format", "csv")
	if r.code != 0 || !strings.Contains(r.stdout, "decisions,3") {
		t.Errorf("report once the ledger is writable again: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

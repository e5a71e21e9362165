package ledger

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A backup that fails on a full disk (a 64 KiB tmpfs; needs root, else
// skipped) leaves nothing beside FILE: not the partial copy, not its
// rollback journal.
func TestBackupOnAFullDiskLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(context.Background(), filepath.Join(dir, "rotor.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	// a ledger bigger than the target disk and than SQLite's page cache
	if _, err := s.db.ExecContext(ctx, `WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i+1 FROM c WHERE i < 99999)
INSERT INTO usage (request_id, ts_ms, state, expires_ms, operation) SELECT printf('r%07d', i), 1000 + i, 1, 0, 'decisions' FROM c`); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := syscall.Mount("tmpfs", out, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a small tmpfs: %v", err)
	}
	defer syscall.Unmount(out, 0)
	err = s.Backup(ctx, filepath.Join(out, "b.db"))
	if err == nil {
		t.Fatal("backup onto a full disk succeeded")
	}
	t.Logf("backup: %v", err)
	ents, _ := os.ReadDir(out)
	for _, e := range ents {
		t.Errorf("left behind by a failed backup: %s", e.Name())
	}
}

package ledger

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/testutil"
)

// Issue 14, item 8.

func TestZeroByteLedgerRefusedNeverRecreated(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rotor.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, path, Options{})
	if err == nil {
		s.Close()
		t.Fatal("Open(zero-byte file) succeeded: the ledger would start over, empty")
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "empty") {
		t.Errorf("error %q does not name the empty file", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Errorf("the refused file changed: %v, %v", fi, err)
	}
	for _, side := range []string{"-wal", "-shm"} {
		if _, err := os.Stat(path + side); err == nil {
			t.Errorf("%s created beside the refused file", side)
		}
	}
	// A new ledger is still created where there is no file, never empty at
	// any moment, and with no temporary file left behind.
	fresh := filepath.Join(t.TempDir(), "new.db")
	openAt(t, fresh, clock.NewFake(t0)).Close()
	if fi, err := os.Stat(fresh); err != nil || fi.Size() == 0 || fi.Mode().Perm() != 0o600 {
		t.Errorf("new ledger: %v, %v; want a private, non-empty file", fi, err)
	}
	if left, _ := filepath.Glob(fresh + ".new-*"); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	openAt(t, fresh, clock.NewFake(t0)) // and it opens again
}

func TestReadOnlyWalOrShmNamedInError(t *testing.T) {
	for _, side := range []string{"-wal", "-shm"} {
		t.Run(side, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rotor.db")
			s := openAt(t, path, clock.NewFake(t0))
			reserve(t, s, "r1")
			s.Close()
			before, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path+side, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			testutil.MakeReadOnly(t, path+side)
			s2, err := Open(ctx, path, Options{})
			if err == nil {
				s2.Close()
				t.Fatalf("Open with a read-only %s succeeded", side)
			}
			if !strings.Contains(err.Error(), path+side) || !strings.Contains(err.Error(), "read-only") {
				t.Errorf("error %q does not name the read-only %s", err, path+side)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
				t.Error("database changed")
			}
		})
	}
}

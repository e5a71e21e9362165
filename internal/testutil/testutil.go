// Package testutil holds helpers that several packages' tests share. It is
// imported only from _test.go files and imports no top-level rotor
// package (ledgertest, which opens ledgers, is its own package for that
// reason). deadcode without -test lists it, on purpose: only tests use it
// (`deadcode -test ./...` is the check).
package testutil

import (
	"bytes"
	"context"
	"database/sql"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// SyncBuffer is a log sink safe for concurrent writers.
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Lines returns the lines written that contain substr.
func (s *SyncBuffer) Lines(substr string) []string {
	var out []string
	for _, l := range strings.Split(s.String(), "\n") {
		if l != "" && strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// WaitFor waits until what was written after the first from bytes holds
// substr, and returns that part. A server writes its access line after the
// handler returns, which can be after the client has read the whole
// answer, so a test reads the line by waiting for it, never at once.
func (s *SyncBuffer) WaitFor(t testing.TB, from int, substr string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		out := s.String()[from:]
		if strings.Contains(out, substr) {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q written within 10s; written:\n%s", substr, out)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// HoldWriteLock takes SQLite's write lock (BEGIN IMMEDIATE) on db's
// database from a connection of its own, as another rotor process or a
// sqlite3 shell would, and returns the func that commits, releasing it and
// closing db. The lock is released at the end of the test in any case.
func HoldWriteLock(t *testing.T, db *sql.DB, closeDB func() error) (release func()) {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatalf("take the write lock: %v", err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
				t.Errorf("release the write lock: %v", err)
			}
			conn.Close()
			closeDB()
		})
	}
	t.Cleanup(release)
	return release
}

// MakeReadOnly makes path unwritable for this process: chmod for a normal
// user, the immutable attribute for root (which ignores modes), undone at
// the end of the test. It skips the test where neither works.
func MakeReadOnly(t *testing.T, path string) {
	t.Helper()
	if os.Getuid() != 0 {
		if err := os.Chmod(path, 0o444); err != nil {
			t.Fatal(err)
		}
		return
	}
	if out, err := exec.Command("chattr", "+i", path).CombinedOutput(); err != nil {
		t.Skipf("running as root without chattr +i (%v: %s): cannot make a read-only file", err, out)
	}
	t.Cleanup(func() { exec.Command("chattr", "-i", path).Run() })
}

// WaitUntil polls cond until it holds, failing the test after 30 s (a
// bound for a stuck test, not a timing assertion: on a loaded machine
// cond may take a while).
func WaitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Package ledgertest opens real ledgers for other packages' tests. It is
// not in testutil because ledger's own tests import testutil: testutil
// importing ledger would be an import cycle. deadcode without -test lists
// it, on purpose: only tests use it (`deadcode -test ./...` is the check).
package ledgertest

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/rotorhq/rotor/ledger"
)

// Open opens a new ledger file in t.TempDir() with opts (none, or one) and
// closes it when the test ends; its path is Store.Path().
func Open(t testing.TB, opts ...ledger.Options) *ledger.Store {
	t.Helper()
	return OpenAt(t, filepath.Join(t.TempDir(), "rotor.db"), opts...)
}

// OpenAt opens (creating it if need be) the ledger at path, as Open does.
func OpenAt(t testing.TB, path string, opts ...ledger.Options) *ledger.Store {
	t.Helper()
	var o ledger.Options
	switch len(opts) {
	case 0:
	case 1:
		o = opts[0]
	default:
		t.Fatalf("ledgertest: %d Options, want at most one", len(opts))
	}
	s, err := ledger.Open(context.Background(), path, o)
	if err != nil {
		t.Fatal(err)
	}
	// Close is idempotent: a test may close the store itself.
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// DB opens the database file at path as plain SQL, a connection pool of
// its own (as another process or a sqlite3 shell would), for tests that
// read or change what the ledger's API does not offer. It is closed when
// the test ends.
func DB(t testing.TB, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

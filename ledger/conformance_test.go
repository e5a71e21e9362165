package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/testutil/ledgertest"
	"github.com/rotorhq/rotor/ledger"
	"github.com/rotorhq/rotor/ledger/conformance"
)

// TestConformance runs the ledger's conformance suite on SQLite; the same
// suite runs on PostgreSQL in ledger/pgledger.
func TestConformance(t *testing.T) {
	conformance.Run(t, SQLiteEngine())
}

// SQLiteEngine is the SQLite ledger as the conformance suite reaches it: a
// file in the test's temporary folder, each handle a Store of its own on
// it (as another process's), migrated when opened.
func SQLiteEngine() conformance.Engine {
	open := func(ctx context.Context, path string, clk clock.Clock) (ledger.Ledger, error) {
		s, err := ledger.Open(ctx, path, ledger.Options{Clock: clk})
		if err != nil {
			return nil, err
		}
		return s, nil
	}
	return conformance.Engine{
		Name:   "sqlite",
		Create: func(t *testing.T) string { return filepath.Join(t.TempDir(), "rotor.db") },
		Migrate: func(ctx context.Context, path string) error {
			s, err := open(ctx, path, clock.Real())
			if err != nil {
				return err
			}
			return s.Close()
		},
		Open:          open,
		OpenMigrates:  true,
		SchemaVersion: ledger.SchemaVersion(),
		SetSchemaVersion: func(t *testing.T, path string, v int) {
			db := ledgertest.DB(t, path)
			if _, err := db.Exec(fmt.Sprintf("PRAGMA user_version = %d", v)); err != nil {
				t.Fatal(err)
			}
			if err := db.Close(); err != nil {
				t.Fatal(err)
			}
		},
		Queued: func(l ledger.Ledger) int { return l.(*ledger.Store).QueuedWrites() },
		Snapshot: func(t *testing.T, path string) []byte {
			var all []byte
			for _, p := range []string{path, path + "-wal"} {
				b, err := os.ReadFile(p)
				if err != nil && !errors.Is(err, fs.ErrNotExist) {
					t.Fatal(err)
				}
				all = append(all, b...)
			}
			return all
		},
	}
}

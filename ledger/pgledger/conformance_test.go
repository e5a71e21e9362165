package pgledger_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/testutil/pgtest"
	"github.com/rotorhq/rotor/ledger"
	"github.com/rotorhq/rotor/ledger/conformance"
	"github.com/rotorhq/rotor/ledger/pgledger"
)

// TestConformance runs the ledger's conformance suite on PostgreSQL, each
// test in a schema of its own on ROTOR_TEST_POSTGRES (skipped once, with
// a message, when it is unset; failed in CI); the same suite runs on
// SQLite in package ledger.
func TestConformance(t *testing.T) {
	pgtest.Server(t)
	conformance.Run(t, Engine(t))
}

// Engine is the PostgreSQL ledger as the conformance suite reaches it: a
// new schema per test, each handle a Store of its own on it (as another
// machine's), migrated only by Migrate.
func Engine(t *testing.T) conformance.Engine {
	t.Helper()
	return conformance.Engine{
		Name: "postgres",
		Create: func(t *testing.T) string {
			u, _ := pgtest.Schema(t)
			return u
		},
		Migrate: func(ctx context.Context, u string) error {
			_, _, err := pgledger.Migrate(ctx, u, pgledger.Options{})
			return err
		},
		Open: func(ctx context.Context, u string, clk clock.Clock) (ledger.Ledger, error) {
			s, err := pgledger.Open(ctx, u, pgledger.Options{Clock: clk})
			if err != nil {
				return nil, err
			}
			return s, nil
		},
		OpenMigrates:  false,
		SchemaVersion: pgledger.SchemaVersion(),
		SetSchemaVersion: func(t *testing.T, u string, v int) {
			withConn(t, u, func(ctx context.Context, c *pgx.Conn) {
				if _, err := c.Exec(ctx, `UPDATE meta SET value = $1 WHERE key = 'schema_version'`, v); err != nil {
					t.Fatalf("set schema version: %v", err)
				}
			})
		},
		Queued:   func(l ledger.Ledger) int { return l.(*pgledger.Store).QueuedWrites() },
		Snapshot: snapshot,
	}
}

func withConn(t *testing.T, u string, fn func(ctx context.Context, c *pgx.Conn)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	fn(ctx, c)
}

// snapshot dumps every table of the URL's schema (its search_path), each
// table's rows as text in order: equal dumps, unchanged database.
func snapshot(t *testing.T, u string) []byte {
	t.Helper()
	var out bytes.Buffer
	withConn(t, u, func(ctx context.Context, c *pgx.Conn) {
		rows, err := c.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name`)
		if err != nil {
			t.Fatal(err)
		}
		tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, tbl := range tables {
			var dump string
			q := fmt.Sprintf(`SELECT COALESCE(string_agg(x::text, E'\n' ORDER BY x::text), '') FROM %s x`, pgx.Identifier{tbl}.Sanitize())
			if err := c.QueryRow(ctx, q).Scan(&dump); err != nil {
				t.Fatalf("dump %s: %v", tbl, err)
			}
			fmt.Fprintf(&out, "== %s\n%s\n", tbl, dump)
		}
	})
	return out.Bytes()
}

package pgledger_test

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/testutil/pgtest"
	"github.com/rotorhq/rotor/ledger"
	"github.com/rotorhq/rotor/ledger/conformance"
	"github.com/rotorhq/rotor/ledger/pgledger"
)

// TestConformance runs the ledger's conformance suite on PostgreSQL: each
// database a schema of its own on the test server, each handle a Store
// (a pool of its own, as another process's).
func TestConformance(t *testing.T) {
	conformance.Run(t, Engine())
}

// Engine is the PostgreSQL ledger as the conformance suite reaches it.
func Engine() conformance.Engine {
	return conformance.Engine{
		Name:   "postgres",
		Create: func(t *testing.T) string { u, _ := pgtest.Schema(t); return u },
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
			withConn(t, u, func(c *pgx.Conn) {
				if _, err := c.Exec(context.Background(), "UPDATE meta SET value = $1 WHERE key = 'schema_version'", v); err != nil {
					t.Fatal(err)
				}
			})
		},
		Snapshot: func(t *testing.T, u string) []byte {
			var out strings.Builder
			withConn(t, u, func(c *pgx.Conn) {
				ctx := context.Background()
				rows, err := c.Query(ctx, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1`)
				if err != nil {
					t.Fatal(err)
				}
				tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
				if err != nil {
					t.Fatal(err)
				}
				for _, tb := range tables {
					var s string
					q := `SELECT COALESCE(string_agg(t::text, E'\n' ORDER BY t::text), '') FROM ` + pgx.Identifier{tb}.Sanitize() + ` t`
					if err := c.QueryRow(ctx, q).Scan(&s); err != nil {
						t.Fatal(err)
					}
					out.WriteString("== " + tb + "\n" + s + "\n")
				}
			})
			return []byte(out.String())
		},
	}
}

func withConn(t *testing.T, u string, fn func(*pgx.Conn)) {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	fn(c)
}

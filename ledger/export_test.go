package ledger

import (
	"context"
	"database/sql"
)

// Test-only hooks. Other packages' tests reach the database through
// internal/testutil/ledgertest.DB instead.

// AdmitFunc adapts a function to Admitter.
type AdmitFunc func(r WindowReader, res Reservation) error

// Admit calls f.
func (f AdmitFunc) Admit(r WindowReader, res Reservation) error { return f(r, res) }

// SchemaVersion is the schema version this binary writes.
func SchemaVersion() int {
	names, _ := migrations()
	return len(names)
}

// DB returns the store's connection pool.
func (s *Store) DB() *sql.DB { return s.db }

// Pragmas reports the settings of one pooled connection: journal_mode,
// synchronous, busy_timeout and foreign_keys.
func (s *Store) Pragmas(ctx context.Context, conn *sql.Conn) (map[string]string, error) {
	out := map[string]string{}
	for _, p := range []string{"journal_mode", "synchronous", "busy_timeout", "foreign_keys"} {
		var v string
		if err := conn.QueryRowContext(ctx, "PRAGMA "+p).Scan(&v); err != nil {
			return nil, err
		}
		out[p] = v
	}
	return out, nil
}

// QueuedWrites reports how many writes wait behind the writer's running
// batch.
func (s *Store) QueuedWrites() int { return s.w.q.Len() }

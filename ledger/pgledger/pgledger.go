// Package pgledger is rotor's ledger on PostgreSQL (github.com/jackc/pgx/v5):
// the same rows, budgets, client tokens, prices and learned-cooldown state as
// the SQLite ledger, shared by rotor processes on many machines. It
// implements ledger.Ledger; the SQL that differs from SQLite's lives here.
package pgledger

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/ledger"
)

// Options configure Open. The zero value is usable.
type Options struct {
	// Clock, when set, gives row times and windows (tests). Unset, times
	// come from the database's now(), so machines with skewed clocks agree.
	Clock clock.Clock
	// Logger defaults to a discarding logger.
	Logger *slog.Logger
	// MaxConns bounds the connection pool (default 8).
	MaxConns int
	// ConnectTimeout is how long Open retries an unreachable server
	// (default 10s).
	ConnectTimeout time.Duration
	// MaxBatch bounds the writes committed together (default 256).
	MaxBatch int
	// OnCommit, when set, is told the size and duration of every commit.
	OnCommit func(writes int, d time.Duration)
}

// Store is an open PostgreSQL ledger. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
	url  string
}

var errNotYet = errors.New("the PostgreSQL ledger is not built yet")

// Open connects to the database at url (postgres:// or postgresql://) and
// checks its schema.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	_ = ctx
	_ = url
	_ = opts
	return nil, errNotYet
}

var _ = ledger.ErrUnavailable

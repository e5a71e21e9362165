package pgledger

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/dburl"
	"github.com/rotorhq/rotor/ledger"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Options configure Open. The zero value is usable.
type Options struct {
	// Clock, when set, gives row times and windows (tests). Unset, times
	// come from the database's clock, so machines with skewed clocks agree.
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
	clk  clock.Clock
	// local is this machine's clock, by which callers compute a
	// reservation's Expires (Reserve); nil: clk, else the system clock.
	// Tests set it apart from the database's time to skew a machine.
	local clock.Clock
	log   *slog.Logger
	// lockKey serialises admission, learnedKey learned-state writes:
	// both derive from the schema's name.
	lockKey, learnedKey int64
	w                   *writer
	// tokens is the client token list last loaded (hash -> label), for
	// LookupTokenCached; tokMu guards tokVer, the change counter it was
	// loaded at.
	tokens atomic.Pointer[map[[32]byte]string]
	tokMu  sync.Mutex
	tokVer int64
	// warnedUsage: a settlement's unreadable usage was logged once.
	warnedUsage atomic.Bool
	closed      atomic.Bool
	// onSettle is told of every committed settlement (OnSettle).
	onSettle atomic.Pointer[func(ledger.Settled)]
}

var (
	_ ledger.Ledger   = (*Store)(nil)
	_ ledger.Importer = (*Store)(nil)
)

// opTimeout bounds one batch transaction or one read: PostgreSQL that does
// not answer fails the call with ErrUnavailable instead of hanging it.
const opTimeout = 10 * time.Second

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 8
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = 10 * time.Second
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
}

// Open connects to the database at dbURL (postgres:// or postgresql://)
// and checks its schema. It retries an unreachable server for
// Options.ConnectTimeout. It never migrates: a schema older than this
// rotor's is an error wrapping ledger.ErrSchemaTooOld (run `rotor ledger
// migrate`), a newer one a *ledger.SchemaError.
func Open(ctx context.Context, dbURL string, opts Options) (*Store, error) {
	opts.defaults()
	pool, schema, err := connect(ctx, dbURL, opts)
	if err != nil {
		return nil, err
	}
	s := &Store{pool: pool, url: dbURL, clk: opts.Clock, log: opts.Logger}
	s.lockKey, s.learnedKey = lockKey("admission", schema), lockKey("learned", schema)
	have, err := schemaVersion(ctx, pool)
	if err != nil {
		pool.Close()
		return nil, s.wrap("open ledger", err)
	}
	know := len(migrationNames())
	switch {
	case have > know:
		pool.Close()
		return nil, &ledger.SchemaError{Path: dburl.Mask(dbURL), Have: have, Know: know}
	case have < know:
		pool.Close()
		return nil, fmt.Errorf("ledger %s: schema version %d, this rotor needs %d: %w", dburl.Mask(dbURL), have, know, ledger.ErrSchemaTooOld)
	}
	s.w = newWriter(s, opts.MaxBatch, opts.OnCommit)
	return s, nil
}

// Migrate applies the pending migrations to the database at dbURL, in one
// transaction under an advisory lock of the schema (two migrations at once
// wait for each other), and returns the schema version before and after. A
// schema newer than this rotor's is a *ledger.SchemaError, left unchanged.
func Migrate(ctx context.Context, dbURL string, opts Options) (from, to int, err error) {
	opts.defaults()
	pool, schema, err := connect(ctx, dbURL, opts)
	if err != nil {
		return 0, 0, err
	}
	defer pool.Close()
	names := migrationNames()
	fail := func(err error) (int, int, error) {
		var se *ledger.SchemaError
		if errors.As(err, &se) {
			return from, from, err
		}
		return from, from, wrapErr("migrate ledger "+dburl.Mask(dbURL), err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", lockKey("migrate", schema)); err != nil {
		return fail(err)
	}
	if from, err = schemaVersion(ctx, tx); err != nil {
		return fail(err)
	}
	if from > len(names) {
		return fail(&ledger.SchemaError{Path: dburl.Mask(dbURL), Have: from, Know: len(names)})
	}
	for i := from; i < len(names); i++ {
		body, err := migrationFS.ReadFile(names[i])
		if err != nil {
			return fail(err)
		}
		if _, err := tx.Exec(ctx, string(body)); err != nil {
			return fail(fmt.Errorf("migration %s: %w", names[i], err))
		}
	}
	if _, err := tx.Exec(ctx, "UPDATE meta SET value = $1 WHERE key = 'schema_version'", len(names)); err != nil {
		return fail(err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fail(err)
	}
	return from, len(names), nil
}

func migrationNames() []string {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		panic(err)
	}
	sort.Strings(names)
	for i, n := range names {
		if want := fmt.Sprintf("migrations/%04d_", i+1); !strings.HasPrefix(n, want) {
			panic(fmt.Sprintf("migration %s out of sequence, want prefix %s", n, want))
		}
	}
	return names
}

type queryRower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// schemaVersion reads the schema version: 0 when the schema has no ledger.
func schemaVersion(ctx context.Context, q queryRower) (int, error) {
	var v *int64
	err := q.QueryRow(ctx, `SELECT CASE WHEN to_regclass('meta') IS NULL THEN NULL ELSE 1 END`).Scan(&v)
	if err != nil || v == nil {
		return 0, err
	}
	var n int64
	if err := q.QueryRow(ctx, `SELECT value FROM meta WHERE key = 'schema_version'`).Scan(&n); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, nil
		}
		return 0, err
	}
	return int(n), nil
}

// CheckURL reports whether the driver can use dbURL, a postgres URL that
// dburl.Check passed: its parameters (sslmode, connect_timeout,
// pool_max_conns, sslrootcert...) are read as Open reads them, without
// connecting. The error names dbURL masked and wraps dburl.ErrURL, so
// that a bad one is refused as bad input before anything is opened.
func CheckURL(dbURL string) error {
	_, err := parseConfig(dbURL)
	return err
}

// parseConfig reads dbURL's pool configuration; its error is CheckURL's.
func parseConfig(dbURL string) (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		// pgconn repeats the URL ("cannot parse `URL`: why"): keep why.
		why := scrub(err.Error(), dbURL)
		if _, after, ok := strings.Cut(why, "`: "); ok {
			why = after
		}
		return nil, dburl.Errorf(dburl.ErrURL, "%q is not a URL the PostgreSQL driver can use: %s", dburl.Mask(dbURL), why)
	}
	return cfg, nil
}

// connect opens a pool on dbURL and waits, at most opts.ConnectTimeout,
// for the server to answer; it returns the pool and the current schema.
func connect(ctx context.Context, dbURL string, opts Options) (*pgxpool.Pool, string, error) {
	masked := dburl.Mask(dbURL)
	if !dburl.IsPostgres(dbURL) {
		return nil, "", fmt.Errorf("open ledger %s: not a postgres:// or postgresql:// URL", masked)
	}
	cfg, err := parseConfig(dbURL)
	if err != nil {
		return nil, "", fmt.Errorf("open ledger: %w", err)
	}
	cfg.MaxConns = int32(opts.MaxConns)
	cfg.ConnConfig.ConnectTimeout = min(opts.ConnectTimeout, 5*time.Second)
	// A client that vanished mid-batch (a machine gone, a cut network)
	// must not hold the admission lock of every other process for long:
	// the server ends such a session's open transaction after a while.
	if _, set := cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"]; !set {
		cfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt((2 * opTimeout).Milliseconds(), 10)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, "", fmt.Errorf("open ledger %s: %s", masked, scrub(err.Error(), dbURL))
	}
	deadline := time.Now().Add(opts.ConnectTimeout)
	for {
		cctx, cancel := context.WithDeadline(ctx, deadline)
		var schema *string
		err = pool.QueryRow(cctx, "SELECT current_schema()").Scan(&schema)
		cancel()
		if err == nil && schema == nil {
			pool.Close()
			return nil, "", fmt.Errorf("open ledger %s: no schema: the search_path names no schema that exists", masked)
		}
		if err == nil {
			// The ledger's tables resolve through the whole search_path;
			// the admission lock is the current schema's. A ledger found in
			// a later schema would be shared under another lock.
			var found *string
			cctx, cancel := context.WithDeadline(ctx, deadline)
			// Read from pg_class, not with to_regclass: a name lookup that
			// finds nothing leaves a negative entry in this connection's
			// catalog cache, which a migration waiting on the lock in a
			// transaction begun before another one committed the schema
			// would still read (and migrate again: "meta already exists").
			err = pool.QueryRow(cctx, `SELECT n.nspname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relname = 'meta' AND n.nspname = ANY (current_schemas(false))
ORDER BY array_position(current_schemas(false), n.nspname) LIMIT 1`).Scan(&found)
			cancel()
			if errors.Is(err, pgx.ErrNoRows) {
				err = nil
			}
			if err == nil && found != nil && *found != *schema {
				pool.Close()
				return nil, "", fmt.Errorf("open ledger %s: the search_path's first schema %q holds no ledger but %q does: name one schema in search_path", masked, *schema, *found)
			}
			if err == nil {
				return pool, *schema, nil
			}
		}
		if !isUnavailable(err) || ctx.Err() != nil || !time.Now().Add(200*time.Millisecond).Before(deadline) {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	pool.Close()
	if isUnavailable(err) {
		return nil, "", fmt.Errorf("open ledger %s: %w: not reachable for %v: %s", masked, ledger.ErrUnavailable, opts.ConnectTimeout, scrub(err.Error(), dbURL))
	}
	return nil, "", fmt.Errorf("open ledger %s: %s", masked, scrub(err.Error(), dbURL))
}

// scrub removes every password dbURL holds from msg: the password and
// sslpassword, in a URL or a keyword/value string, as written and
// decoded (dburl.Passwords).
func scrub(msg, dbURL string) string {
	if _, err := url.Parse(dbURL); err != nil {
		return "(error hidden: the URL does not parse)"
	}
	for _, p := range dburl.Passwords(dbURL) {
		if p != "" {
			msg = strings.ReplaceAll(msg, p, "xxxxx")
		}
	}
	return msg
}

// lockKey is the advisory-lock key of purpose in schema.
func lockKey(purpose, schema string) int64 {
	h := fnv.New64a()
	io.WriteString(h, "rotor-ledger\x00"+purpose+"\x00"+schema)
	return int64(h.Sum64())
}

// OnSettle has fn told of every settlement this Store commits, after its
// commit, on the committing goroutine (keep it cheap), as the SQLite
// ledger does: metrics count settled tokens and known cost from it, so
// that they add up to the ledger's rows. A batch that rolls back tells
// nothing; its writes retried one by one tell once each.
func (s *Store) OnSettle(fn func(ledger.Settled)) { s.onSettle.Store(&fn) }

// Location returns the URL with its password masked.
func (s *Store) Location() string { return dburl.Mask(s.url) }

// Close waits for queued writes to commit, then closes the pool, waiting
// at most closeWait for its connections to close.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.w.close()
	done := make(chan struct{})
	go func() {
		s.pool.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(closeWait):
		// A connection left mid-query by a server that stopped answering
		// closes in the background: nothing is left to write on it.
		s.log.Warn("ledger: PostgreSQL connections still closing; left to close in the background", "waited", closeWait)
	}
	return nil
}

// closeWait bounds how long Close waits for the pool's connections to
// close. pgx gives a connection whose query a hung server left unanswered
// 15 s to close, which would hold a bridge's exit, or a command's, that
// long after the call already failed.
const closeWait = time.Second

// isUnavailable reports an error of the connection rather than of the
// statement: the server unreachable, restarting, shutting down, a
// terminated connection, a timeout.
func isUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), strings.HasPrefix(pe.Code, "53"),
			pe.Code == "57P01", pe.Code == "57P02", pe.Code == "57P03", pe.Code == "57014":
			return true
		}
		return false
	}
	if errors.Is(err, pgx.ErrNoRows) || errors.Is(err, pgx.ErrTooManyRows) {
		return false
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.As(err, &ce), errors.As(err, &ne), pgconn.Timeout(err), pgconn.SafeToRetry(err),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, net.ErrClosed):
		return true
	}
	// Everything else pgx returns without a server error is about the
	// connection (closed, broken, protocol).
	var scanErr pgx.ScanArgError
	return !errors.As(err, &scanErr)
}

// wrapErr prefixes err with what failed, wrapping ledger.ErrUnavailable
// when the database could not be reached.
func wrapErr(what string, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, ledger.ErrUnavailable) {
		return fmt.Errorf("%s: %w", what, err)
	}
	if isUnavailable(err) {
		return fmt.Errorf("%s: %w: %v", what, ledger.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

func (s *Store) wrap(what string, err error) error {
	return wrapErr(what+" "+s.Location(), err)
}

// readCtx bounds a read: the caller's context, and at most opTimeout.
func readCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, opTimeout)
}

// msNow is the SQL of the database's time in unix milliseconds.
const msNow = `(floor(extract(epoch from clock_timestamp()) * 1000))::bigint`

// nowArg returns the time to store for "now": the test clock's, or nil,
// which statements replace with msNow (COALESCE($n, msNow)).
func (s *Store) nowArg() any {
	if s.clk != nil {
		return s.clk.Now().UnixMilli()
	}
	return nil
}

func (s *Store) checkOpen() error {
	if s.closed.Load() {
		return ledger.ErrClosed
	}
	return nil
}

// SchemaVersion is the schema version this binary writes: its number of
// migrations.
func SchemaVersion() int { return len(migrationNames()) }

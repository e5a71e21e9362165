package ledger

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "modernc.org/sqlite" // the "sqlite" database/sql driver

	"github.com/rotorhq/rotor/internal/clock"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Errors.
var (
	// ErrSchemaTooNew means the database was written by a newer rotor.
	ErrSchemaTooNew = errors.New("database schema is newer than this rotor")
	// ErrUnavailable means the ledger could not record (busy beyond the
	// busy timeout, disk full, I/O error). Callers fail closed.
	ErrUnavailable = errors.New("ledger unavailable")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("ledger closed")
	// ErrReadOnly is returned for writes to a database file this process
	// may not write.
	ErrReadOnly = errors.New("ledger is read-only")
	// ErrTokenRevoked refuses a reservation whose client token is no
	// longer stored.
	ErrTokenRevoked = errors.New("client token revoked")
	// ErrNotFound is returned for a missing budget, token or reservation.
	ErrNotFound = errors.New("not found")
	// ErrExists is returned when a name is taken.
	ErrExists = errors.New("already exists")
)

// SchemaError reports a database whose schema version this binary does not
// know.
type SchemaError struct {
	Path       string
	Have, Know int
}

func (e *SchemaError) Error() string {
	return fmt.Sprintf("%s has schema version %d but this rotor knows only up to %d; upgrade rotor to use it", e.Path, e.Have, e.Know)
}

// Unwrap returns ErrSchemaTooNew.
func (e *SchemaError) Unwrap() error { return ErrSchemaTooNew }

// Options configure Open. The zero value is usable.
type Options struct {
	// Synchronous is SQLite's synchronous setting: "normal" (the default:
	// in WAL mode a committed row survives any process crash, kill -9
	// included; a power loss or OS crash may take the commits since the
	// last checkpoint) or "full" (a committed row survives power loss too,
	// at one fsync per commit).
	Synchronous string
	// BusyTimeout is how long a write waits for another process's lock
	// (default 5s).
	BusyTimeout time.Duration
	// Clock defaults to the real clock.
	Clock clock.Clock
	// Logger defaults to a discarding logger.
	Logger *slog.Logger
	// MaxBatch bounds the writes committed together (default 256).
	MaxBatch int
	// OnCommit, when set, is told the size and duration of every commit
	// (for metrics). It runs on the writer goroutine: keep it cheap.
	OnCommit func(writes int, d time.Duration)
}

// Store is an open ledger. It is safe for concurrent use.
type Store struct {
	db    *sql.DB
	path  string
	clk   clock.Clock
	log   *slog.Logger
	w     *writer
	watch *watcher
	// readOnly is set when the file cannot be opened for writing; writes
	// then fail with ErrReadOnly instead of a driver error.
	readOnly bool
	// tokens is the latest client token list either the watcher or the
	// writer loaded (hash -> label), for LookupTokenCached.
	tokens atomic.Pointer[map[[32]byte]string]
	// warnedUsage: a settlement's unreadable usage was logged once.
	warnedUsage atomic.Bool
	// onSettle is told of every committed settlement (Store.OnSettle).
	onSettle atomic.Pointer[func(Settled)]
}

// Settled is a usage row as its settlement committed it: its operation,
// and its counts with the cost the ledger computed (unknown where it is).
type Settled struct {
	Operation string
	Settlement
}

// OnSettle has fn told of every settlement this Store commits, after its
// commit, on the writer goroutine (keep it cheap): metrics count settled
// tokens and known cost from it, so that they add up to the ledger's rows.
func (s *Store) OnSettle(fn func(Settled)) { s.onSettle.Store(&fn) }

// Open opens (creating if needed) the ledger database at path and applies
// pending migrations. It refuses a database whose schema is newer than this
// binary, without changing it.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("open ledger: path %q must not contain '?' or '#'", path)
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real()
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.BusyTimeout <= 0 {
		opts.BusyTimeout = 5 * time.Second
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 256
	}
	created, err := create(path)
	if err != nil {
		return nil, err
	}
	// A ledger file emptied by accident (a truncating copy, a full disk, a
	// shell redirect) is refused: SQLite would take it for a new database
	// and budgets and usage would silently start from nothing.
	if fi, err := os.Stat(path); err == nil && fi.Size() == 0 && !created {
		return nil, fmt.Errorf("ledger %s is an empty file (0 bytes), not a rotor ledger; rotor does not re-create it: restore it from a backup, or remove it to start an empty ledger", path)
	}
	readOnly := false
	if f, err := os.OpenFile(path, os.O_RDWR, 0); err == nil {
		f.Close()
	} else if errors.Is(err, fs.ErrPermission) {
		readOnly = true
	}
	if !readOnly {
		// SQLite writes the -wal and -shm files of a writable database; one
		// it cannot write fails later with an error that names neither.
		for _, side := range []string{path + "-wal", path + "-shm"} {
			if f, err := os.OpenFile(side, os.O_RDWR, 0); err == nil {
				f.Close()
			} else if errors.Is(err, fs.ErrPermission) && !giveDBMode(path, side) {
				return nil, fmt.Errorf("open ledger %s: %s is read-only for this user, but SQLite must write it beside the database: give it the database file's owner and mode", path, side)
			}
		}
	}
	sync := "NORMAL"
	switch strings.ToLower(opts.Synchronous) {
	case "", "normal":
	case "full":
		sync = "FULL"
	default:
		return nil, fmt.Errorf("open ledger: synchronous must be full or normal, not %q", opts.Synchronous)
	}
	dsn := fmt.Sprintf("%s?_pragma=busy_timeout(%d)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(%s)&_txlock=immediate",
		path, opts.BusyTimeout.Milliseconds(), sync)
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open ledger %s: %w", path, err)
	}
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	db.SetConnMaxIdleTime(0)
	s := &Store{db: db, path: path, clk: opts.Clock, log: opts.Logger, readOnly: readOnly}
	if err := s.migrate(ctx); err != nil {
		db.Close()
		return nil, err
	}
	w, err := newWriter(ctx, s, opts.MaxBatch, opts.BusyTimeout, opts.OnCommit)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open ledger %s: %w", path, err)
	}
	s.w = w
	s.watch = &watcher{s: s}
	return s, nil
}

// giveDBMode gives a side file of ours the database file's mode: SQLite
// made it with the mode the database had then, so a read-only open of a
// 0400 ledger leaves a 0400 -wal and -shm that would refuse every open
// once the ledger is writable again. It reports whether side is now
// writable; a side file of another user stays as it is.
func giveDBMode(path, side string) bool {
	fi, err := os.Stat(path)
	if err != nil || os.Chmod(side, fi.Mode().Perm()) != nil {
		return false
	}
	f, err := os.OpenFile(side, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// noFolder says which folder is missing when err is a file that could not
// be made in it for want of the folder; else it returns err.
func noFolder(err error, dir string) error {
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
			return fmt.Errorf("%w: %s (create it first)", ErrNoFolder, dir)
		}
	}
	return err
}

// create makes the ledger file at path when there is none, and reports
// whether it did. The file appears at path only once SQLite has written its
// header (it is made aside and hard-linked in), so that another process
// never finds it empty. The ledger holds token hashes and usage: the file
// is private (0600), and SQLite gives the -wal and -shm files its mode.
func create(path string) (bool, error) {
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		return false, nil // there is a file, or Open reports why not
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".new-*")
	if err != nil {
		return false, fmt.Errorf("create ledger %s: %w", path, noFolder(err, filepath.Dir(path)))
	}
	name := tmp.Name()
	tmp.Close()
	defer os.Remove(name)
	db, err := sql.Open("sqlite", name+"?_pragma=journal_mode(WAL)")
	if err != nil {
		return false, fmt.Errorf("create ledger %s: %w", path, err)
	}
	var mode string
	err = db.QueryRow("PRAGMA journal_mode").Scan(&mode)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return false, fmt.Errorf("create ledger %s: %w", path, err)
	}
	switch err := os.Link(name, path); {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrExist): // another process made it first
		return false, nil
	}
	// A file system without hard links: create it empty, in place.
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return false, nil
	}
	f.Close()
	return true, nil
}

// Path returns the database file's path.
func (s *Store) Path() string { return s.path }

// Close waits for queued writes to commit, then closes the database.
func (s *Store) Close() error {
	if s.w != nil {
		s.w.close()
	}
	s.watch.mu.Lock()
	s.watch.close()
	s.watch.mu.Unlock()
	return s.db.Close()
}

func migrations() ([]string, error) {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	for i, n := range names {
		if want := fmt.Sprintf("migrations/%04d_", i+1); !strings.HasPrefix(n, want) {
			return nil, fmt.Errorf("migration %s out of sequence, want prefix %s", n, want)
		}
	}
	return names, nil
}

func (s *Store) migrate(ctx context.Context) error {
	names, err := migrations()
	if err != nil {
		return err
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return s.openErr(err)
	}
	defer conn.Close()
	version := func() (int, error) {
		var v int
		err := conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v)
		return v, err
	}
	v, err := version()
	if err != nil {
		return s.openErr(err)
	}
	if v > len(names) {
		return &SchemaError{Path: s.path, Have: v, Know: len(names)}
	}
	if v == len(names) {
		return nil
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return s.openErr(err)
	}
	rollback := func(err error) error {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		return err
	}
	// Another process may have migrated while we waited for the lock.
	if v, err = version(); err != nil {
		return rollback(s.openErr(err))
	}
	if v > len(names) {
		return rollback(&SchemaError{Path: s.path, Have: v, Know: len(names)})
	}
	for i := v; i < len(names); i++ {
		body, err := migrationFS.ReadFile(names[i])
		if err != nil {
			return rollback(err)
		}
		if _, err := conn.ExecContext(ctx, string(body)); err != nil {
			return rollback(fmt.Errorf("ledger %s: migration %s: %w", s.path, names[i], err))
		}
	}
	if _, err := conn.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", len(names))); err != nil {
		return rollback(s.openErr(err))
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		return rollback(s.openErr(err))
	}
	return nil
}

func (s *Store) openErr(err error) error {
	return fmt.Errorf("open ledger %s: %w", s.path, err)
}

// watcher notices changes other connections make to budgets and client
// tokens: it compares PRAGMA data_version on a dedicated connection, and
// only when that moved reads the single config_version row.
type watcher struct {
	s           *Store
	mu          sync.Mutex
	conn        *sql.Conn
	dataVerStmt *sql.Stmt
	cfgVerStmt  *sql.Stmt
	dataVer     int64
	cfgVer      int64
	tokens      map[[32]byte]string
	loaded      bool
}

// close releases the watcher's connection; the next lookup opens a new
// one. The caller holds w.mu.
func (w *watcher) close() {
	if w.conn != nil {
		w.dataVerStmt.Close()
		w.cfgVerStmt.Close()
		w.conn.Close()
		w.conn = nil
	}
}

// ReadOnly reports whether the file could not be opened for writing when
// the store was opened: every write then fails with ErrReadOnly.
func (s *Store) ReadOnly() bool { return s.readOnly }

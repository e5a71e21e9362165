package ledger

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Backuper writes an online, consistent copy of the ledger to a new file
// while other processes keep writing. The SQLite Store implements it.
type Backuper interface {
	Backup(ctx context.Context, path string) error
}

// RowLookup finds one usage row by its request id. The SQLite Store
// implements it.
type RowLookup interface {
	RowByID(ctx context.Context, requestID string) (Row, bool, error)
}

var (
	_ Backuper  = (*Store)(nil)
	_ RowLookup = (*Store)(nil)
)

// ErrFileExists refuses a backup over an existing file.
var ErrFileExists = errors.New("file exists")

// Backup copies the database into a new file at path with VACUUM INTO: one
// read transaction, so the copy holds every write committed before it
// began and none half-written, while writers go on. It refuses a path
// that exists (ErrFileExists).
func (s *Store) Backup(ctx context.Context, path string) error {
	// VACUUM INTO reads a name beginning with "file:" as a SQLite URI (a
	// query, another file, or memory): an absolute path is always the
	// file itself.
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("backup %s: %w", path, err)
	}
	// An empty file of mode 0600 made here (the copy holds client token
	// hashes), never one that was there: VACUUM INTO fills an empty file.
	fd, err := os.OpenFile(abs, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("backup %s: %w", path, ErrFileExists)
	}
	if err != nil {
		return fmt.Errorf("backup %s: %w", path, err)
	}
	if err := fd.Close(); err != nil {
		return fmt.Errorf("backup %s: %w", path, err)
	}
	if _, err := s.db.ExecContext(ctx, `VACUUM INTO ?`, abs); err != nil {
		_ = os.Remove(abs)
		return fmt.Errorf("backup %s: %w", path, err)
	}
	return nil
}

// RowByID returns the usage row of a request, if stored.
func (s *Store) RowByID(ctx context.Context, requestID string) (Row, bool, error) {
	rows, err := s.queryRows(ctx, `WHERE request_id = ?`, requestID)
	if err != nil || len(rows) == 0 {
		return Row{}, false, err
	}
	return rows[0], true, nil
}

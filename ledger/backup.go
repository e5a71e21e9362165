package ledger

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
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
// that exists.
func (s *Store) Backup(ctx context.Context, path string) error {
	if _, err := os.Lstat(path); err == nil {
		return fmt.Errorf("backup %s: %w", path, ErrFileExists)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("backup %s: %w", path, err)
	}
	if _, err := s.db.ExecContext(ctx, `VACUUM INTO ?`, path); err != nil {
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

package ledger

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/rotorhq/rotor/internal/failpoint"
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
// that exists (ErrFileExists). The copy is made under a temporary name
// beside path and linked to path only once whole and synced: a backup
// killed halfway leaves no file at path that reads as an empty ledger.
func (s *Store) Backup(ctx context.Context, path string) error {
	// VACUUM INTO reads a name beginning with "file:" as a SQLite URI (a
	// query, another file, or memory): an absolute path is always the
	// file itself.
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("backup %s: %w", path, err)
	}
	if _, err := os.Lstat(abs); err == nil {
		return fmt.Errorf("backup %s: %w", path, ErrFileExists)
	}
	// An empty file of mode 0600 made here (the copy holds client token
	// hashes), never one that was there: VACUUM INTO fills an empty file.
	tmp, err := os.CreateTemp(filepath.Dir(abs), "."+filepath.Base(abs)+".*.partial")
	if err != nil {
		return fmt.Errorf("backup %s: %w", path, noFolder(err, filepath.Dir(abs)))
	}
	partial := tmp.Name()
	defer os.Remove(partial) // after the link, only the name goes
	// A VACUUM INTO that fails (a full disk) can leave the copy's rollback
	// journal beside it: it goes with the copy.
	defer os.Remove(partial + "-journal")
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("backup %s: %w", path, err)
	}
	if _, err := s.db.ExecContext(ctx, `VACUUM INTO ?`, partial); err != nil {
		return fmt.Errorf("backup %s: %w", path, err)
	}
	if err := syncFile(partial); err != nil {
		return fmt.Errorf("backup %s: %w", path, err)
	}
	failpoint.Hit(failpoint.DuringBackup) // crash tests: the copy is whole, not yet named
	// A link never replaces a file another backup made meanwhile.
	if err := os.Link(partial, abs); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("backup %s: %w", path, ErrFileExists)
		}
		return fmt.Errorf("backup %s: %w", path, err)
	}
	return nil
}

// syncFile flushes a file's content to disk.
func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// RowByID returns the usage row of a request, if stored.
func (s *Store) RowByID(ctx context.Context, requestID string) (Row, bool, error) {
	rows, err := s.queryRows(ctx, `WHERE request_id = ?`, requestID)
	if err != nil || len(rows) == 0 {
		return Row{}, false, err
	}
	return rows[0], true, nil
}

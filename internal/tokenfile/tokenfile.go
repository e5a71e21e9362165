// Package tokenfile creates and reads bearer token files: 32 random bytes,
// mode 0600, refused when others can read them or when they are symlinks.
//
// It imports no top-level rotor package.
package tokenfile

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/rotorhq/rotor/internal/secret"
)

// Prefix marks rotor tokens so that secret scanners can find them.
const Prefix = "rtr_"

// ErrUnsafe is returned for a token file (or its folder) that others can
// read or write, or that is a symlink.
var ErrUnsafe = errors.New("unsafe token file")

// UnsafeError names the path and the problem, never the contents.
type UnsafeError struct {
	Path   string
	Reason string
}

func (e *UnsafeError) Error() string {
	return fmt.Sprintf("%s: %s", e.Path, e.Reason)
}

// Unwrap returns ErrUnsafe.
func (e *UnsafeError) Unwrap() error { return ErrUnsafe }

// Generate returns a new token: the prefix and 32 random bytes in base64url.
func Generate() secret.Value {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("tokenfile: crypto/rand failed: " + err.Error())
	}
	return secret.New(Prefix + base64.RawURLEncoding.EncodeToString(b[:]))
}

// Write creates path with the token and mode 0600 whatever the umask. With
// overwrite false an existing file is an error (fs.ErrExist).
func Write(path string, tok secret.Value, overwrite bool) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".token-*")
	if err != nil {
		return fmt.Errorf("write token: %w", err)
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write token: %w", err)
	}
	if _, err := tmp.WriteString(tok.Reveal() + "\n"); err != nil {
		tmp.Close()
		return fmt.Errorf("write token: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write token: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write token: %w", err)
	}
	if !overwrite {
		// Link fails if path exists, so two writers cannot both win.
		if err := os.Link(tmp.Name(), path); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("token file %s: %w", path, fs.ErrExist)
			}
			return fmt.Errorf("write token: %w", err)
		}
		return nil
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write token: %w", err)
	}
	return nil
}

// Read reads a token file after checking that it is a regular file (not a
// symlink) of mode 0600 or stricter, owned by this user, in a folder that
// others cannot write. Errors name the path, never the contents.
func Read(path string) (secret.Value, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return secret.Value{}, fmt.Errorf("token file: %w", err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return secret.Value{}, &UnsafeError{path, "is a symlink; use the file itself"}
	}
	if !fi.Mode().IsRegular() {
		return secret.Value{}, &UnsafeError{path, "is not a regular file"}
	}
	if OpenToOthers(fi) {
		return secret.Value{}, &UnsafeError{path, fmt.Sprintf("mode %04o lets others read it; run: chmod 600 %s", fi.Mode().Perm(), path)}
	}
	if !ownedByMe(fi) {
		return secret.Value{}, &UnsafeError{path, "is owned by another user"}
	}
	if err := CheckDir(filepath.Dir(path)); err != nil {
		return secret.Value{}, err
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return secret.Value{}, fmt.Errorf("token file: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 32 {
		return secret.Value{}, &UnsafeError{path, "holds a token shorter than 32 characters; create a new one with rotor init --force"}
	}
	return secret.New(tok), nil
}

// CheckDir refuses a folder that others can read, write or enter.
func CheckDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("token folder: %w", err)
	}
	if OpenToOthers(fi) {
		return &UnsafeError{dir, fmt.Sprintf("folder mode %04o lets others in; run: chmod 700 %s", fi.Mode().Perm(), dir)}
	}
	return nil
}

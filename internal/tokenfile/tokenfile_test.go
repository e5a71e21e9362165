package tokenfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func safeDir(t *testing.T) string {
	d := t.TempDir()
	if err := os.Chmod(d, 0o700); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestGenerateIsLongAndRandom(t *testing.T) {
	a, b := Generate(), Generate()
	if a.Equal(b) {
		t.Fatal("two tokens are equal")
	}
	if !strings.HasPrefix(a.Reveal(), Prefix) || len(a.Reveal()) < len(Prefix)+43 {
		t.Errorf("token %d chars, want prefix and 32 bytes of base64", a.Len())
	}
}

func TestWriteIs0600UnderUmaskZero(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	path := filepath.Join(safeDir(t), "bridge.token")
	tok := Generate()
	if err := Write(path, tok, false); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %04o, want 0600", fi.Mode().Perm())
	}
	got, err := Read(path)
	if err != nil || !got.Equal(tok) {
		t.Fatalf("Read = %v, %v", got, err)
	}
	if err := Write(path, Generate(), false); !errors.Is(err, fs.ErrExist) {
		t.Errorf("second Write without overwrite = %v, want ErrExist", err)
	}
}

func TestReadRefusesUnsafeFiles(t *testing.T) {
	dir := safeDir(t)
	good := filepath.Join(dir, "good")
	tok := Generate()
	if err := Write(good, tok, false); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		setup func() string
	}{
		{"readable by others", func() string {
			p := filepath.Join(dir, "loose")
			os.WriteFile(p, []byte(tok.Reveal()), 0o644)
			os.Chmod(p, 0o644)
			return p
		}},
		{"symlink", func() string {
			p := filepath.Join(dir, "link")
			os.Symlink(good, p)
			return p
		}},
		{"folder open to others", func() string {
			d := filepath.Join(t.TempDir(), "open")
			os.Mkdir(d, 0o755)
			os.Chmod(d, 0o755)
			p := filepath.Join(d, "tok")
			Write(p, tok, false)
			return p
		}},
		{"too short", func() string {
			p := filepath.Join(dir, "short")
			os.WriteFile(p, []byte("abc"), 0o600)
			return p
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.setup()
			_, err := Read(p)
			if !errors.Is(err, ErrUnsafe) {
				t.Fatalf("Read = %v, want ErrUnsafe", err)
			}
			if strings.Contains(err.Error(), tok.Reveal()) {
				t.Error("error shows the token")
			}
			if !strings.Contains(err.Error(), filepath.Base(p)) && !strings.Contains(err.Error(), filepath.Dir(p)) {
				t.Errorf("error %q does not name the path", err)
			}
		})
	}
}

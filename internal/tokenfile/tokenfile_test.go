package tokenfile

import (
	"errors"
	"fmt"
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

// Group bits count as much as world bits: a token file or home folder that
// the owner's group may read, write or enter is refused like a world-readable
// one, and 0600/0400 files in a 0700 folder are fine.
func TestReadRefusesGroupOrWorldBits(t *testing.T) {
	tok := Generate()
	for _, tc := range []struct {
		file, dir os.FileMode
		ok        bool
	}{
		{0o600, 0o700, true},
		{0o400, 0o700, true},
		{0o640, 0o700, false},
		{0o620, 0o700, false},
		{0o610, 0o700, false},
		{0o604, 0o700, false},
		{0o602, 0o700, false},
		{0o600, 0o750, false},
		{0o600, 0o710, false},
		{0o600, 0o705, false},
		{0o600, 0o701, false},
	} {
		t.Run(fmt.Sprintf("file %04o dir %04o", tc.file, tc.dir), func(t *testing.T) {
			d := filepath.Join(t.TempDir(), "home")
			if err := os.Mkdir(d, 0o700); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(d, "bridge.token")
			if err := Write(p, tok, false); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, tc.file); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(d, tc.dir); err != nil {
				t.Fatal(err)
			}
			got, err := Read(p)
			if tc.ok {
				if err != nil || !got.Equal(tok) {
					t.Fatalf("Read = %v, %v; want the token", got, err)
				}
				return
			}
			if !errors.Is(err, ErrUnsafe) {
				t.Fatalf("Read = %v, want ErrUnsafe", err)
			}
			if strings.Contains(err.Error(), tok.Reveal()) {
				t.Error("error shows the token")
			}
		})
	}
}

// A hand-made token must hold at least 32 characters once the surrounding
// white space is trimmed; the refusal never shows the short one.
func TestReadTokenLengthBoundary(t *testing.T) {
	dir := safeDir(t)
	for _, tc := range []struct {
		n  int
		ok bool
	}{{31, false}, {32, true}, {33, true}} {
		t.Run(fmt.Sprint(tc.n), func(t *testing.T) {
			raw := strings.Repeat("k", tc.n)
			p := filepath.Join(dir, fmt.Sprintf("tok%d", tc.n))
			if err := os.WriteFile(p, []byte("  "+raw+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := Read(p)
			if tc.ok {
				if err != nil || got.Reveal() != raw {
					t.Fatalf("Read of %d chars = len %d, %v; want the token", tc.n, got.Len(), err)
				}
				return
			}
			if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "shorter than 32") {
				t.Fatalf("Read of %d chars = %v, want ErrUnsafe naming the minimum", tc.n, err)
			}
			if strings.Contains(err.Error(), raw) {
				t.Error("error shows the short token")
			}
		})
	}
}

// A token file owned by another user is refused even with safe modes. Only
// root can hand a file to another user, so the test needs root.
func TestReadRefusesAnotherUsersFile(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("chown to another user needs root")
	}
	dir := safeDir(t)
	p := filepath.Join(dir, "bridge.token")
	if err := Write(p, Generate(), false); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, 65534, 65534); err != nil {
		t.Skip("chown:", err)
	}
	_, err := Read(p)
	if !errors.Is(err, ErrUnsafe) || !strings.Contains(err.Error(), "owned by another user") {
		t.Fatalf("Read = %v, want ErrUnsafe naming the owner", err)
	}
}

// Write, with and without overwrite, leaves the token file alone in its
// folder (no .token-* temporaries) and overwrite replaces the old token.
func TestWriteReplacesAndLeavesNoTemporaries(t *testing.T) {
	dir := safeDir(t)
	p := filepath.Join(dir, "bridge.token")
	first, second := Generate(), Generate()
	if err := Write(p, first, false); err != nil {
		t.Fatal(err)
	}
	if err := Write(p, second, false); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("Write without overwrite over a file = %v, want ErrExist", err)
	}
	if got, err := Read(p); err != nil || !got.Equal(first) {
		t.Fatalf("after a refused Write, Read = %v, %v; want the first token", got, err)
	}
	if err := Write(p, second, true); err != nil {
		t.Fatal(err)
	}
	if got, err := Read(p); err != nil || !got.Equal(second) {
		t.Fatalf("after Write with overwrite, Read = %v, %v; want the new token", got, err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if len(names) != 1 || names[0] != "bridge.token" {
		t.Errorf("folder holds %q, want just bridge.token", names)
	}
}

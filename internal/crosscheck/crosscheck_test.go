package crosscheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The module in testdata/unixonly builds for Linux and macOS but not for
// Windows, in two ways: a syscall type Windows lacks, and a file that only
// Windows builds.
func TestCheckFindsWhatBreaksOneOSOnly(t *testing.T) {
	for _, tc := range []struct {
		goos string
		want []string // a substring of each problem, in order
	}{
		{"linux", nil},
		{"darwin", nil},
		{"windows", []string{"guarded_windows.go:5:", "owner.go:13:", "Stat_t"}},
	} {
		t.Run(tc.goos, func(t *testing.T) {
			problems, err := Check("testdata/unixonly", tc.goos, "amd64", "./...")
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(problems, "\n")
			if tc.want == nil && len(problems) != 0 {
				t.Fatalf("GOOS=%s: want no problems, got:\n%s", tc.goos, got)
			}
			rest := got
			for _, w := range tc.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("GOOS=%s: want %q in (after what came before):\n%s", tc.goos, w, got)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

// A package go list cannot load (an import that does not exist) is a
// problem, not silence.
func TestCheckReportsWhatGoListCannotLoad(t *testing.T) {
	problems, err := Check("testdata/missingimport", "darwin", "amd64", "./...")
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(problems, "\n"); !strings.Contains(got, "example.com/nowhere") {
		t.Fatalf("want the missing import named, got:\n%s", got)
	}
}

// Where nothing can be checked, outside a module or in one without
// packages, Check says so rather than passing.
func TestCheckFailsWhereNothingIsChecked(t *testing.T) {
	empty := t.TempDir()
	if err := os.WriteFile(filepath.Join(empty, "go.mod"), []byte("module example.com/empty\n\ngo 1.22\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, dir := range map[string]string{"outside a module": t.TempDir(), "a module without packages": empty} {
		problems, err := Check(dir, "darwin", "amd64", "./...")
		if err == nil && len(problems) == 0 {
			t.Errorf("%s: want an error or a problem, got neither", name)
		}
	}
}

// A GOOS the toolchain does not know is an error: go list would take it
// as a build tag and check a system that does not exist.
func TestCheckRefusesAPortGoDoesNotHave(t *testing.T) {
	for _, port := range [][2]string{{"plan10", "amd64"}, {"darwin", "x86"}} {
		if _, err := Check("testdata/unixonly", port[0], port[1], "./..."); err == nil || !strings.Contains(err.Error(), "is not a port go supports") {
			t.Errorf("GOOS=%s GOARCH=%s: want an error, got %v", port[0], port[1], err)
		}
	}
}

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// rotorPkg is the command the tests build and run.
const rotorPkg = "github.com/rotorhq/rotor/cmd/rotor"

// failpointTag is the build tag the crash tests build with: it compiles
// internal/failpoint's ROTOR_FAILPOINT into the binary, which release
// builds leave out.
const failpointTag = "failpoint"

// The exit codes a user meets (cmd/rotor/errors.go, README "Exit codes").
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
)

var (
	binDir  string                // holds the binaries; TestMain removes it
	buildMu sync.Mutex            // one go build at a time
	built   = map[string]string{} // build tags -> binary
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rotor-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// rotorBinary builds rotor with the comma-separated build tags (none: the
// release binary) the first time a test asks for that set, and returns its
// path. Each set gets its own folder and the file is named rotor, so that
// the scripts find it on PATH.
func rotorBinary(tags string) (string, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	if bin, ok := built[tags]; ok {
		return bin, nil
	}
	sub := "release"
	if tags != "" {
		sub = "tags-" + strings.ReplaceAll(tags, ",", "-")
	}
	bin := filepath.Join(binDir, sub, "rotor")
	if err := os.MkdirAll(filepath.Dir(bin), 0o700); err != nil {
		return "", err
	}
	args := []string{"build", "-o", bin}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	args = append(args, rotorPkg)
	if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	built[tags] = bin
	return bin, nil
}

// The release binary is built without build tags and the crash tests' one
// with the failpoint tag, as `go version -m` records them.
func TestRotorBinaryBuildTags(t *testing.T) {
	for _, tc := range []struct {
		name string
		tags []string
		want string
	}{
		{"release", nil, ""},
		{"failpoint", []string{failpointTag}, failpointTag},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newE2E(t, tc.tags...)
			out, err := exec.Command("go", "version", "-m", e.bin).Output()
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			for _, line := range strings.Split(string(out), "\n") {
				if f := strings.Fields(line); len(f) >= 2 && f[0] == "build" && strings.HasPrefix(f[1], "-tags=") {
					got = strings.TrimPrefix(f[1], "-tags=")
				}
			}
			if got != tc.want {
				t.Errorf("%s binary built with tags %q, want %q", tc.name, got, tc.want)
			}
		})
	}
}

package tokenfile

import (
	"os/exec"
	"testing"
)

// Issue 14, item 20: the whole project builds for Windows and macOS (the
// owner check here used syscall.Stat_t, which Windows lacks). Only Linux
// runs the tests, so rotor-crosscheck type-checks every package and its
// dependencies for the other two from source, as go list's build
// constraints choose the files (internal/crosscheck; a cross build
// compiled SQLite once per OS, about a minute each on a cold build cache).
// It runs outside the race detector, which would make it four times
// slower.
func TestBuildsForWindowsAndMacOS(t *testing.T) {
	cmd := exec.Command("go", "run", "./cmd/rotor-crosscheck", "windows", "darwin")
	cmd.Dir = "../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("go run ./cmd/rotor-crosscheck windows darwin: %v\n%s", err, out)
	}
}

package tokenfile

import (
	"os"
	"os/exec"
	"testing"
)

// Issue 14, item 20: the whole project builds for Windows and macOS (the
// owner check here used syscall.Stat_t, which Windows lacks). .ci/run builds
// both before the tests, so here the build cache answers, as long as the
// flags are exactly .ci/run's: -gcflags='all=-N -l' (unoptimised, which
// still catches every type and compile error, and compiles SQLite faster).
// Change them in both places or neither.
func TestBuildsForWindowsAndMacOS(t *testing.T) {
	if testing.Short() {
		t.Skip("cross builds compile SQLite for each OS once; skipped with -short")
	}
	for _, goos := range []string{"windows", "darwin"} {
		cmd := exec.Command("go", "build", "-gcflags=all=-N -l", "./...")
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH=amd64")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("GOOS=%s go build -gcflags='all=-N -l' ./...: %v\n%s", goos, err, out)
		}
	}
}

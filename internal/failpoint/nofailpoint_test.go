//go:build !failpoint

package failpoint

import (
	"os"
	"os/exec"
	"testing"
)

// TestReleaseBuildIgnoresArmedPoint: without the build tag, arming a
// point in the environment kills nothing.
func TestReleaseBuildIgnoresArmedPoint(t *testing.T) {
	for _, p := range Points {
		t.Run(p, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
			cmd.Env = append(os.Environ(), "FAILPOINT_HELPER=1", Env+"="+p)
			out, err := cmd.Output()
			if want := "after-admission\nduring-upstream\nafter-answer\n"; err != nil || string(out) != want {
				t.Errorf("armed %s: survived %q (%v), want %q", p, out, err, want)
			}
		})
	}
}

// TestFailpointBuildKills runs the tagged tests, so that the kills the
// crash tests rely on are checked by a plain go test ./... too.
func TestFailpointBuildKills(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the package's tests with -tags failpoint")
	}
	cmd := exec.Command("go", "test", "-tags", "failpoint", "-count=1", "-run", "^TestHitKillsOnlyAtTheArmedPoint$", ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go test -tags failpoint: %v\n%s", err, out)
	}
}

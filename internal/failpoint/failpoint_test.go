//go:build failpoint

package failpoint

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

func TestHitKillsOnlyAtTheArmedPoint(t *testing.T) {
	tests := []struct {
		armed  string
		stdout string
		killed bool
	}{
		{"", "after-admission\nduring-upstream\nafter-answer\n", false},
		{"no-such-point", "after-admission\nduring-upstream\nafter-answer\n", false},
		{AfterAdmission, "", true},
		{DuringUpstream, "after-admission\n", true},
		{AfterAnswer, "after-admission\nduring-upstream\n", true},
	}
	for _, tt := range tests {
		t.Run("armed="+tt.armed, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
			cmd.Env = append(os.Environ(), "FAILPOINT_HELPER=1", Env+"="+tt.armed)
			out, err := cmd.Output()
			if string(out) != tt.stdout {
				t.Errorf("survived %q, want %q", out, tt.stdout)
			}
			var ee *exec.ExitError
			killed := errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL
			if killed != tt.killed {
				t.Errorf("killed by SIGKILL = %v (%v), want %v", killed, err, tt.killed)
			}
		})
	}
}

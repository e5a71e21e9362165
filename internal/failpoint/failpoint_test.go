package failpoint

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// TestHelperProcess is run as a child by TestHitKillsOnlyAtTheArmedPoint:
// it hits every point in order and prints each one it survived.
func TestHelperProcess(t *testing.T) {
	if os.Getenv("FAILPOINT_HELPER") != "1" {
		t.Skip("helper process for TestHitKillsOnlyAtTheArmedPoint")
	}
	for _, p := range Points {
		Hit(p)
		os.Stdout.WriteString(p + "\n")
	}
	os.Exit(0)
}

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

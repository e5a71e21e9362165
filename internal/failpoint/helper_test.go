package failpoint

import (
	"os"
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

package main

import (
	"os/exec"
	"path/filepath"
	"testing"
)

// TestStopTakesTheSIGTERMItSentAsAStop: stopping a child sends SIGTERM and
// closes its stdin. The fake provider and the bare proxy may die of that
// SIGTERM (it can land after the child restored the default action on its
// way out, and in a race-built child even an ignored SIGTERM kills it at
// exit: TestBenchStreamCells failed so under load); they hold nothing to
// flush, so for them that is a clean stop. For rotor, whose clean exit
// flushes the ledger, it stays an error.
func TestStopTakesTheSIGTERMItSentAsAStop(t *testing.T) {
	for _, termIsStop := range []bool{true, false} {
		// A child that prints its URL and dies of SIGTERM's default action.
		cmd := exec.Command("sh", "-c", "echo http://127.0.0.1:1; exec sleep 60")
		c, err := startChild(t.Context(), "child", cmd, filepath.Join(t.TempDir(), "child.log"))
		if err != nil {
			t.Fatal(err)
		}
		c.termIsStop = termIsStop
		err = c.stop()
		if termIsStop && err != nil {
			t.Errorf("a child that may die of the stop's SIGTERM: stop() = %v, want nil", err)
		}
		if !termIsStop && err == nil {
			t.Error("rotor killed by SIGTERM: stop() = nil, want the signal reported")
		}
	}
}

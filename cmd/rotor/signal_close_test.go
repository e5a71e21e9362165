package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/rotorhq/rotor/ledger"
)

// slowLedger is a ledger whose Close blocks until the process is told to
// stop; it is never used otherwise.
type slowLedger struct {
	ledger.Ledger
	closing chan struct{}
}

func (l *slowLedger) Close() error {
	close(l.closing)
	select {} // the process ends on a signal, or the test's timeout ends it
}

// TestSignalsDuringALedgerCloseAreStillRotors: rotor's signal handling
// lasts until the ledger is closed. A SIGINT that comes while the ledger
// closes is taken as the first signal (the command is done: nothing more
// to cancel), and a SIGTERM after it as the second, which exits at once
// with status 143 and its line (130 and the SIGINT's, should the two
// arrive the other way round). Before, the handling stopped first, and
// the SIGINT killed rotor by the default action halfway through the
// close, without a word. It runs in a child process, where the signals
// go.
func TestSignalsDuringALedgerCloseAreStillRotors(t *testing.T) {
	if os.Getenv("ROTOR_TEST_SLOW_CLOSE") == "1" {
		f := NewFactory(&IOStreams{In: strings.NewReader(""), Out: &bytes.Buffer{}, ErrOut: os.Stderr})
		slow := &slowLedger{closing: make(chan struct{})}
		f.store = slow
		go func() {
			<-slow.closing
			_ = syscall.Kill(os.Getpid(), syscall.SIGINT)
			_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
		}()
		mainWith(f, []string{"version"})
		t.Fatal("mainWith returned while its ledger was still closing")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSignalsDuringALedgerCloseAreStillRotors$", "-test.timeout=60s")
	cmd.Env = append(os.Environ(), "ROTOR_TEST_SLOW_CLOSE=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child: %v, want exit status 143 (or 130); stderr:\n%s", err, stderr.String())
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		t.Fatalf("child killed by %v while its ledger closed, want rotor's own exit 143; stderr:\n%s", ws.Signal(), stderr.String())
	}
	// The two signals are sent one after the other; should the kernel
	// deliver them the other way round, the SIGINT is the second.
	line := map[int]string{143: "rotor: second terminated: exiting now", 130: "rotor: second interrupt: exiting now"}[exit.ExitCode()]
	if line == "" {
		t.Fatalf("child exit status %d, want 143 (or 130); stderr:\n%s", exit.ExitCode(), stderr.String())
	}
	if !strings.Contains(stderr.String(), line) {
		t.Errorf("exit status %d, but stderr lacks %q:\n%s", exit.ExitCode(), line, stderr.String())
	}
}

// Package failpoint kills the process at a named point of the request path,
// so that crash tests can stop rotor exactly where a crash would hurt most
// (issue 8, the kill -9 crash loop).
//
// A point is armed by naming it in the environment variable ROTOR_FAILPOINT
// of the rotor process; the variable is read once, when the program starts.
// When it is unset (always, in normal use) Hit is one comparison with an
// empty string. When the armed point is hit, the process sends itself
// SIGKILL: no deferred function runs, nothing is flushed, exactly as if the
// machine's OOM killer or an operator's kill -9 had struck there.
//
// It imports no other rotor package.
package failpoint

import (
	"os"
)

// Env names the environment variable that arms a point.
const Env = "ROTOR_FAILPOINT"

// The points rotor's request path marks.
const (
	// AfterAdmission: the reservation is committed; no provider call yet.
	AfterAdmission = "after-admission"
	// DuringUpstream: the provider has received the request and sent its
	// answer's headers; rotor has not read the answer.
	DuringUpstream = "during-upstream"
	// AfterAnswer: rotor has the provider's whole answer and has not yet
	// settled the reservation or answered its caller.
	AfterAnswer = "after-answer"
)

// Points lists every point, for tests.
var Points = []string{AfterAdmission, DuringUpstream, AfterAnswer}

// armed is read once: a point cannot be armed or disarmed while running.
var armed = os.Getenv(Env)

// Hit kills the process when name is the armed point, and returns at once
// otherwise.
func Hit(name string) {
	if armed == "" || name != armed {
		return
	}
	kill()
}

// kill sends SIGKILL to this process and never returns.
func kill() {
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Kill()
	}
	// SIGKILL to oneself is delivered before the kill call returns to user
	// space on Linux; should it not be, stop here rather than run on.
	select {}
}

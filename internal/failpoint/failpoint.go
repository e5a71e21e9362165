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
// Hit is compiled in only with the build tag failpoint, which the crash
// tests set when they build rotor (go build -tags failpoint); a default
// build, every release binary, has a Hit that does nothing, so no variable
// in a user's environment can make rotor kill itself.
//
// It imports no other rotor package.
package failpoint

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

// Points lists every point of the request path, for tests.
var Points = []string{AfterAdmission, DuringUpstream, AfterAnswer}

// DuringBackup, outside the request path: rotor ledger backup has written
// its copy under a temporary name and not yet given it the name asked for.
const DuringBackup = "during-backup"

//go:build failpoint

package failpoint

import "os"

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

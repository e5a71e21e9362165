package main

import (
	"fmt"
	"os"
	"testing"
)

// TestMain keeps every test away from the user's own rotor files: run
// binds --home, so a test that names none takes the default home, which
// is $XDG_CONFIG_HOME/rotor; here that is a folder of the test run's own,
// and the variables that would point elsewhere are unset.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rotor-cmd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("XDG_CONFIG_HOME", dir)
	for _, v := range []string{"ROTOR_HOME", "ROTOR_DB", "ROTOR_CONFIG", "ROTOR_TOKEN"} {
		os.Unsetenv(v)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

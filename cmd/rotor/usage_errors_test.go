package main

import (
	"context"
	"strings"
	"testing"
)

// Every usage mistake exits 2 with a message naming what to change, on
// stderr with a pointer to --help, and prints nothing on stdout; a command group given no
// subcommand prints its help and exits 0.
func TestUsageMistakesExit2NamingWhatToChange(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"budget", "frob"}, `unknown command "frob" for "rotor budget"`},
		{[]string{"budget", "lis"}, "did you mean list?"},
		{[]string{"budget", "lst"}, "did you mean list?"},
		{[]string{"ledger", "reprot"}, "did you mean report?"},
		{[]string{"frob"}, `unknown command "frob" for "rotor"`},
		{[]string{"buget"}, "did you mean budget?"},
		{[]string{"budget", "remove"}, "budget remove: missing argument; usage: rotor budget remove NAME"},
		{[]string{"budget", "remove", "a", "b"}, `budget remove: unexpected argument "b"`},
		{[]string{"version", "extra"}, `version: unexpected argument "extra"`},
		{[]string{"pricing", "list", "x", "y"}, `pricing list: unexpected argument "x" "y"`},
		{[]string{"bridge", "token", "create"}, "bridge token create: --label is required"},
		{[]string{"budget", "add", "--requests", "1", "--window", "1h", "--name", ""}, "--name: give a value, not an empty string"},
		{[]string{"budget", "add", "--requests", "1", "--window", "1h", "--name", " \t"}, "--name: give a value, not an empty string"},
		{[]string{"budget", "add", "--requests", "99999999999999999999", "--window", "1h"}, `"--requests" flag: out of range`},
		{[]string{"budget", "add", "--requests", "1e3", "--window", "1h"}, "want a whole number in decimal digits"},
		{[]string{"help", "frob"}, `unknown help topic "frob"`},
	} {
		f, out, errOut := testFactory(t)
		code := run(context.Background(), f, tc.args)
		if code != ExitUsage || !strings.Contains(errOut.String(), tc.want) || out.Len() != 0 {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2, nothing on stdout, stderr saying %q", tc.args, code, out, errOut, tc.want)
		}
		if !strings.Contains(errOut.String(), "Run 'rotor --help' or add --help") {
			t.Errorf("%q: stderr %q does not point to --help", tc.args, errOut)
		}
	}
	f, out, errOut := testFactory(t)
	if code := run(context.Background(), f, []string{"budget"}); code != 0 || !strings.Contains(out.String(), "Available Commands") || errOut.Len() != 0 {
		t.Errorf("rotor budget: exit %d, stdout %q, stderr %q; want its help and exit 0", code, out, errOut)
	}
}

// bridge start --runtime-url "" is the in-process runtime, the one string
// flag whose empty value means something: the empty-value check lets it
// through.
func TestEmptyRuntimeURLIsAllowed(t *testing.T) {
	f, _, _ := testFactory(t)
	root := NewCmdRoot(f)
	start, _, err := root.Find([]string{"bridge", "start"})
	if err != nil {
		t.Fatal(err)
	}
	if err := start.Flags().Set("runtime-url", ""); err != nil {
		t.Fatal(err)
	}
	if err := checkFlags(start); err != nil {
		t.Errorf("--runtime-url \"\": %v, want it allowed", err)
	}
	if err := start.Flags().Set("listen", " "); err != nil {
		t.Fatal(err)
	}
	if err := checkFlags(start); exitCode(err) != ExitUsage || !strings.Contains(err.Error(), "--listen") {
		t.Errorf("--listen \" \": %v, want a usage error naming --listen", err)
	}
}

package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRunExitStatus(t *testing.T) {
	for _, tc := range []struct {
		name        string
		args        []string
		status      int
		out, errOut string
	}{
		{"clean on unix", []string{"-C", "../../internal/crosscheck/testdata/unixonly", "darwin", "linux"}, 0, "GOOS=darwin GOARCH=amd64: type-checks\nGOOS=linux GOARCH=amd64: type-checks\n", ""},
		{"broken on windows", []string{"-C", "../../internal/crosscheck/testdata/unixonly", "windows", "darwin"}, 1, "GOOS=darwin GOARCH=amd64: type-checks", "GOOS=windows GOARCH=amd64: "},
		{"an unknown flag", []string{"-os", "windows"}, 2, "", "flag provided but not defined: -os"},
		{"a GOOS go does not know", []string{"-C", "../../internal/crosscheck/testdata/unixonly", "plan10"}, 1, "", "GOOS=plan10 GOARCH=amd64 is not a port go supports"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if got := run(tc.args, &out, &errOut); got != tc.status {
				t.Fatalf("status %d, want %d; stderr:\n%s", got, tc.status, errOut.String())
			}
			if !strings.Contains(out.String(), tc.out) || (tc.out == "" && out.Len() > 0) {
				t.Errorf("stdout %q, want %q", out.String(), tc.out)
			}
			if !strings.Contains(errOut.String(), tc.errOut) || (tc.errOut == "" && errOut.Len() > 0) {
				t.Errorf("stderr %q, want %q", errOut.String(), tc.errOut)
			}
		})
	}
}

// Command rotor-crosscheck type-checks rotor for the operating systems CI
// does not test on: every package of the module in the current folder and
// every package it imports, as built for each GOOS named (default darwin
// and windows) with cgo off, from source, without compiling any of them
// (internal/crosscheck). internal/tokenfile's TestBuildsForWindowsAndMacOS
// runs it among the tests, and so does CI.
//
//	go run ./cmd/rotor-crosscheck                  darwin and windows, amd64
//	go run ./cmd/rotor-crosscheck -arch arm64 darwin
//
// It prints each type error and exits 1 if there is any, 2 on a usage
// error, 0 when every GOOS checks clean.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/rotorhq/rotor/internal/crosscheck"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("rotor-crosscheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	arch := fs.String("arch", "amd64", "GOARCH to check for")
	dir := fs.String("C", ".", "the module's folder")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rotor-crosscheck [-arch GOARCH] [-C DIR] [GOOS...]   (default GOOS: darwin windows)")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	goos := fs.Args()
	if len(goos) == 0 {
		goos = []string{"darwin", "windows"}
	}
	status := 0
	for _, g := range goos {
		problems, err := crosscheck.Check(*dir, g, *arch, "./...")
		if err != nil {
			fmt.Fprintf(stderr, "rotor-crosscheck: %v\n", err)
			return 1
		}
		for _, p := range problems {
			fmt.Fprintf(stderr, "GOOS=%s GOARCH=%s: %s\n", g, *arch, p)
		}
		if len(problems) > 0 {
			status = 1
			continue
		}
		fmt.Fprintf(stdout, "GOOS=%s GOARCH=%s: type-checks\n", g, *arch)
	}
	return status
}

// Command rotor is a CLI-first local bridge and budget ledger for LLM
// provider credentials. See README.md.
package main

import (
	"fmt"
	"os"
	"runtime/pprof"
)

func main() {
	os.Exit(profiledMain())
}

// profiledMain runs Main, under a CPU profile when ROTOR_CPUPROFILE names
// a file: a benchmark aid (scripts/bench.sh -cpuprofile, issue 7) that
// profiles the real binary without serving pprof handlers. The profile is
// written when Main returns, so `rotor bridge start` must stop cleanly
// (SIGINT or SIGTERM).
func profiledMain() int {
	if path := os.Getenv("ROTOR_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "rotor: ROTOR_CPUPROFILE: %v\n", err)
			return 1
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "rotor: ROTOR_CPUPROFILE: %v\n", err)
			f.Close()
			return 1
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	return Main(os.Args[1:], DefaultIO())
}

// Command rotor is a CLI-first local bridge and budget ledger for LLM
// provider credentials. See README.md.
package main

import (
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
)

func main() {
	os.Exit(profiledMain())
}

// profiledMain runs Main, under a CPU profile when ROTOR_CPUPROFILE names
// a file, and writes the allocations profile to ROTOR_MEMPROFILE: benchmark
// aids (scripts/bench.sh -cpuprofile and -memprofile, issue 7) that profile
// the real binary without serving pprof handlers. Profiles are written
// when Main returns, so `rotor bridge start` must stop cleanly (SIGINT or
// SIGTERM).
func profiledMain() int {
	if path := os.Getenv("ROTOR_MEMPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "rotor: ROTOR_MEMPROFILE: %v\n", err)
			return 1
		}
		defer func() {
			runtime.GC() // the profile counts allocations up to the last GC
			err := pprof.Lookup("allocs").WriteTo(f, 0)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "rotor: ROTOR_MEMPROFILE: %v\n", err)
			}
		}()
	}
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

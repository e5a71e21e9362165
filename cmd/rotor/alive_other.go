//go:build !unix

package main

import "os"

// processAlive reports whether a process with this pid may run; where
// rotor cannot ask without a signal, a process it can open counts.
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	p.Release()
	return true
}

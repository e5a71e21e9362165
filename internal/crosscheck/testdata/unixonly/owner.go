// Package unixonly builds on Linux and macOS only: it reads the owner of a
// file through syscall.Stat_t, which Windows lacks (rotor's token file
// check once did, issue 14).
package unixonly

import (
	"os"
	"syscall"
)

// Owner returns the uid that owns fi.
func Owner(fi os.FileInfo) uint32 {
	return fi.Sys().(*syscall.Stat_t).Uid
}

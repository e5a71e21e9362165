//go:build unix

package tokenfile

import (
	"io/fs"
	"os"
	"syscall"
)

// OpenToOthers reports whether users other than the owner may read, write
// or enter fi, by its permission bits.
func OpenToOthers(fi fs.FileInfo) bool { return fi.Mode().Perm()&0o077 != 0 }

// ownedByMe reports whether this process's user owns the file.
func ownedByMe(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return !ok || int(st.Uid) == os.Getuid()
}

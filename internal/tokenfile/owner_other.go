//go:build !unix

package tokenfile

import "io/fs"

// OpenToOthers is false outside Unix: Windows guards files with ACLs, and
// Go reports every writable file there as mode 0666, so the permission bits
// say nothing about other users. A home folder under the user's profile is
// private by its ACL.
func OpenToOthers(fs.FileInfo) bool { return false }

// ownedByMe cannot tell the owner outside Unix (no file uid): it accepts
// the file.
func ownedByMe(fs.FileInfo) bool { return true }

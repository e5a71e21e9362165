//go:build !failpoint

package failpoint

// Hit does nothing: this build has no failpoints (see the package doc).
func Hit(string) {}

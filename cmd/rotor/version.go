package main

import (
	"fmt"
	"runtime/debug"
)

// version is set at build time with -ldflags "-X main.version=...". Left
// empty, the module version from the binary's build info is used.
var version string

// buildInfo is what a binary knows about its own build.
type buildInfo struct {
	// Version is the ldflags version, else the module version Go stamped
	// (v1.2.3, a pseudo-version, or (devel)), else "dev".
	Version string
	// Revision and Modified come from the VCS stamp (vcs.revision,
	// vcs.modified); Revision is empty when the build had none.
	Revision string
	Modified bool
}

// readBuildInfo reads the ldflags version and runtime/debug's build info,
// so that a plain `go build` or `go install` still says what it is.
func readBuildInfo() buildInfo {
	info, _ := debug.ReadBuildInfo()
	return versionFrom(version, info)
}

// versionFrom combines the ldflags version (may be empty) with the build
// info (may be nil).
func versionFrom(ldflags string, info *debug.BuildInfo) buildInfo {
	b := buildInfo{Version: ldflags}
	if info != nil {
		if b.Version == "" {
			b.Version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				b.Revision = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if b.Version == "" {
		b.Version = "dev"
	}
	return b
}

// String is the line `rotor version` prints after "rotor ".
func (b buildInfo) String() string {
	if b.Revision == "" {
		return b.Version
	}
	s := fmt.Sprintf("%s (revision %s", b.Version, b.Revision)
	if b.Modified {
		s += ", modified"
	}
	return s + ")"
}

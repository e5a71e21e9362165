package main

import (
	"runtime/debug"
	"testing"
)

// Issue 14, item 19: without ldflags, rotor version says the module
// version and VCS revision that Go stamped into the binary (the built
// binary's half is in e2e/cli_test.go).
func TestVersionFromBuildInfoWithoutLdflags(t *testing.T) {
	info := &debug.BuildInfo{Main: debug.Module{Version: "v1.4.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "05e800e0c0ffee"}, {Key: "vcs.modified", Value: "true"}}}
	for _, tc := range []struct {
		ldflags string
		info    *debug.BuildInfo
		want    string
	}{
		{"", info, "v1.4.0 (revision 05e800e0c0ffee, modified)"},
		{"v9", info, "v9 (revision 05e800e0c0ffee, modified)"},
		{"", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "(devel)"},
		{"", nil, "dev"},
	} {
		if got := versionFrom(tc.ldflags, tc.info).String(); got != tc.want {
			t.Errorf("versionFrom(%q, %v) = %q, want %q", tc.ldflags, tc.info, got, tc.want)
		}
	}
}

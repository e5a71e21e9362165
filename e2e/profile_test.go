package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// ROTOR_CPUPROFILE and ROTOR_MEMPROFILE (scripts/bench.sh -cpuprofile and
// -memprofile) write pprof files when the command ends; a path that cannot
// be created fails the command before it runs.
func TestProfileVariablesWriteProfiles(t *testing.T) {
	dir := t.TempDir()
	e := newE2E(t)
	cpu, mem := filepath.Join(dir, "cpu.pprof"), filepath.Join(dir, "mem.pprof")
	e.env = append(e.env, "ROTOR_CPUPROFILE="+cpu, "ROTOR_MEMPROFILE="+mem)
	e.mustRun("version")
	for _, p := range []string{cpu, mem} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// pprof files are gzipped protocol buffers.
		if !bytes.HasPrefix(b, []byte{0x1f, 0x8b}) {
			t.Errorf("%s: %d bytes, not a gzipped profile", filepath.Base(p), len(b))
		}
	}

	for _, name := range []string{"ROTOR_CPUPROFILE", "ROTOR_MEMPROFILE"} {
		e := newE2E(t)
		e.env = append(e.env, name+"="+filepath.Join(dir, "missing", "x.pprof"))
		r := e.run("version")
		if r.code != 1 || !strings.Contains(r.stderr, name) || r.stdout != "" {
			t.Errorf("%s into a missing folder: exit %d, stdout %q, stderr %q; want exit 1 naming %s before the command runs", name, r.code, r.stdout, r.stderr, name)
		}
	}
}

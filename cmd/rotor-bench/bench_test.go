package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMain lets the test binary serve as the bench's children: rotor-bench
// re-executes itself (here, the test binary) with -serve-provider or
// -serve-bare-proxy.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && (os.Args[1] == "-serve-provider" || os.Args[1] == "-serve-bare-proxy") {
		os.Exit(realMain(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// A tiny run of the whole bench: the Decisions cells, the chat-stream
// cells (direct, bare proxy and rotor at 1 and 2 clients) and stalled
// streams held open through rotor. No timing is asserted, only that every
// cell ran, every stream was complete, the ledger holds a row per answer,
// and the last line carries each figure.
func TestBenchStreamCells(t *testing.T) {
	if testing.Short() {
		t.Skip("builds rotor and runs the bench's processes")
	}
	dir := t.TempDir()
	rotor := filepath.Join(dir, "rotor")
	if out, err := exec.Command("go", "build", "-o", rotor, "github.com/rotorhq/rotor/cmd/rotor").CombinedOutput(); err != nil {
		t.Fatalf("go build rotor: %v\n%s", err, out)
	}
	var stdout, stderr bytes.Buffer
	code := realMain([]string{
		"-rotor", rotor, "-work", filepath.Join(dir, "work"),
		"-rounds", "1", "-requests", "20", "-warmup", "2", "-concurrency", "1,16",
		"-stream-requests", "6", "-stream-warmup", "1", "-stream-concurrency", "1,16",
		"-stream-events", "20", "-stream-inflight", "8",
	}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{
		"| streams/s | TTFB p50 µs |",
		"| 16 | rotor bridge start |",
		"rotor with 8 stalled streams in flight",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	// The held streams' memory is broken down from rotor's own metrics.
	mem := regexp.MustCompile(`of which Go's heap in use ([0-9.]+) MiB, goroutine stacks ([0-9.]+) MiB`).FindStringSubmatch(out)
	if mem == nil || mem[1] == "0.0" || mem[2] == "0.0" {
		t.Errorf("report lacks the held streams' heap and stacks (got %q):\n%s", mem, out)
	}
	if strings.Contains(out, "MISMATCH") {
		t.Errorf("ledger rows do not match rotor's answers:\n%s", out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	num := `[0-9]+\.[0-9]+`
	re := regexp.MustCompile(`^throughput_ratio_c16=` + num + ` throughput_ratio_c64=NaN added_p50_ratio_c1=-?` + num +
		` stream_throughput_ratio_c16=` + num + ` stream_ttfb_ratio_c1=-?` + num + ` stream_rss_mib_8=` + num + `$`)
	if !re.MatchString(last) {
		t.Errorf("last line %q does not match %s", last, re)
	}
}

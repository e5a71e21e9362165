package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/rotorhq/rotor/learned/sim"
)

var lastLine = regexp.MustCompile(`^learned_min_served_margin_pp=-?\d+\.\d+ learned_max_waste_ratio=\d+\.\d+$`)

func last(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// scripts/sim-cooldown.sh runs as users run it, with a short span: bash
// with set -euo pipefail, its table, and the exact last line; an unknown
// flag exits 2.
func TestSimCooldownScript(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash")
	}
	script := filepath.Join("..", "..", "scripts", "sim-cooldown.sh")
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(src), "#!/usr/bin/env bash\n") || !strings.Contains(string(src), "\nset -euo pipefail\n") {
		t.Error("sim-cooldown.sh must be bash with set -euo pipefail")
	}
	out, err := exec.Command("bash", script, "--span", "10m", "--rates", "1", "--schedule", "0:120,300:40,450:200").Output()
	if err != nil {
		t.Fatalf("sim-cooldown.sh: %v", err)
	}
	if !strings.Contains(string(out), "| schedule | 1 req/s | learned adapt |") {
		t.Errorf("no table row for the schedule:\n%s", out)
	}
	if l := last(string(out)); !lastLine.MatchString(l) {
		t.Errorf("last line %q", l)
	}
	err = exec.Command("bash", script, "--no-such-flag").Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Errorf("unknown flag: %v, want exit 2", err)
	}
}

func TestRunFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"-span", "5m", "-rates", "5", "-seed", "2", "-random", "1"}, 0},
		{[]string{"-schedule", "10:5"}, 2},
		{[]string{"-rates", "0"}, 2},
		{[]string{"-span", "0s"}, 2},
		{[]string{"extra"}, 2},
		{[]string{"-seeds", "0"}, 2},
		{[]string{"-random", "-1"}, 2},
		{[]string{"-scenarios", "burst"}, 2},
		{[]string{"-scenarios", "none"}, 2},
		{[]string{"-scenarios", "bursty", "-schedule", "0:60"}, 2},
		{[]string{"-span", "5m", "-rates", "5", "-scenarios", "none", "-random", "1"}, 0},
		{[]string{"-chance", "-1s"}, 2},
		{[]string{"-chance", "2m"}, 2},
		{[]string{"-chance", "soon"}, 2},
		{[]string{"-retries", "200,100"}, 2},
		{[]string{"-retries", "0"}, 2},
		{[]string{"-retries", "soon"}, 2},
		{[]string{"-noisy", "800-400"}, 2},
		{[]string{"-noisy", "0-100"}, 2},
		{[]string{"-noisy", "100-3601"}, 2},
		{[]string{"-noisy", "100"}, 2},
		{[]string{"-noisy", "1.5-9"}, 2},
		{[]string{"-noisy", "100-200", "-schedule", "0:60"}, 2},
	} {
		var out, errOut bytes.Buffer
		if got := run(c.args, &out, &errOut); got != c.code {
			t.Errorf("run(%q) = %d, want %d; stderr %s", c.args, got, c.code, errOut.String())
		}
		if c.code == 0 && !lastLine.MatchString(last(out.String())) {
			t.Errorf("run(%q) last line %q", c.args, last(out.String()))
		}
	}
}

// -seeds runs several seeds, each with random schedules of its own, and
// prints the mean table instead of the full one, with the same last line.
func TestRunSeeds(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run([]string{"-span", "10m", "-rates", "1", "-seeds", "2", "-seed", "5", "-random", "2"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	s := out.String()
	for _, want := range []string{
		"seeds 5-6:",
		"- random 5: ", "- random 6: ", "- seed 6: random 7, random 8\n",
		"| steady 30 | 1 req/s | 2 | ",
		"| random schedules | 1 req/s | 4 | ",
		"all 22 cells: ",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "| fixed 60 s |") {
		t.Errorf("-seeds printed the full table:\n%s", s)
	}
	if !lastLine.MatchString(last(s)) {
		t.Errorf("last line %q", last(s))
	}
}

// -chance runs learned adapt a second time with every cooldown rounded up
// to a multiple of it and prints, before the table, how far that moved
// each row; the table still judges learned adapt itself, and the last
// line is still the summary.
func TestRunChance(t *testing.T) {
	// Bursty at 1 req/s for 2 h: seeds where the rounding moves the
	// served share, so that a table judging the rounded run would differ.
	plain, s := runWithAndWithout(t, []string{"-span", "2h", "-rates", "1", "-seeds", "2", "-scenarios", "bursty"}, "-chance", "100ms")
	// The mean table and the summary are the run's without -chance.
	printsBefore(t, plain, s, "Chance: learned adapt, rests rounded up to 100ms against learned adapt,", "learned adapt against fixed 60 s")
	if !strings.Contains(s, "| bursty | 1 req/s | 2 | ") || strings.Contains(s, "| bursty | 1 req/s | 2 | +0.000 | 0.000 | 0.00 | 0 |") {
		t.Errorf("no chance row for bursty, or one where the rounding moved nothing:\n%s", s)
	}
}

// printsBefore checks that with, the output with a flag, prints heading
// before table, and from table on the same as without, which lacks
// heading.
func printsBefore(t *testing.T, without, with, heading, table string) {
	t.Helper()
	h, i, j := strings.Index(with, heading), strings.Index(with, table), strings.Index(without, table)
	if h < 0 || i < h || j < 0 {
		t.Fatalf("no %q before %q:\n%s", heading, table, with)
	}
	if with[i:] != without[j:] {
		t.Errorf("the flag changed what follows %q:\n%s\nwant\n%s", table, with[i:], without[j:])
	}
	if strings.Contains(without, heading) {
		t.Errorf("%q without the flag:\n%s", heading, without)
	}
}

// runWithAndWithout runs args, then args with extra, and returns both
// outputs.
func runWithAndWithout(t *testing.T, args []string, extra ...string) (without, with string) {
	t.Helper()
	var plain, out, errOut bytes.Buffer
	if code := run(args, &plain, &errOut); code != 0 {
		t.Fatalf("run(%q): exit %d: %s", args, code, errOut.String())
	}
	if code := run(append(args, extra...), &out, &errOut); code != 0 {
		t.Fatalf("run(%q) with %q: exit %d: %s", args, extra, code, errOut.String())
	}
	return plain.String(), out.String()
}

// -oracle runs a cooldown told each reset and prints its own mean table
// against fixed 60 s before the table; the table and the last line still
// judge learned adapt.
func TestRunOracle(t *testing.T) {
	plain, s := runWithAndWithout(t, []string{"-span", "1h", "-rates", "1", "-scenarios", "noisy,steady 150"}, "-oracle")
	heading := "oracle (the reset known) against fixed 60 s and ladder 60 s x 2^n, per scenario and rate"
	if strings.Index(s, "| scenario | traffic | policy |") < strings.Index(s, heading) {
		t.Fatalf("no oracle table before the table:\n%s", s)
	}
	if !strings.Contains(s, "| noisy | 1 req/s | oracle (the reset known) | ") {
		t.Errorf("no oracle row in the table:\n%s", s)
	}
	// The verdicts and the last line are the run's without -oracle.
	printsBefore(t, plain, s, heading, "learned adapt against fixed 60 s")
}

// -retries runs a policy told when to retry and prints its own mean
// table against fixed 60 s before the table; the table and the last line
// still judge learned adapt.
func TestRunRetries(t *testing.T) {
	plain, s := runWithAndWithout(t, []string{"-span", "1h", "-rates", "1", "-seeds", "2", "-scenarios", "noisy,steady 150"}, "-retries", "145,175,195,200")
	heading := "retries at 145, 175, 195, 200 s against fixed 60 s and ladder 60 s x 2^n, per scenario and rate"
	printsBefore(t, plain, s, heading, "learned adapt against fixed 60 s")
	if !strings.Contains(s[:strings.Index(s, "learned adapt against")], "| noisy | 1 req/s | 2 | ") {
		t.Errorf("no noisy row in the retries' table:\n%s", s)
	}
}

// -lost prints, before the table, each policy's requests not served and
// those lost to idle time; the table and the last line are the run's
// without it.
func TestRunLost(t *testing.T) {
	plain, s := runWithAndWithout(t, []string{"-span", "1h", "-rates", "1", "-scenarios", "steady 150"}, "-lost")
	printsBefore(t, plain, s, "Requests not served, over every cell:", "| scenario | traffic | policy |")
	if !strings.Contains(s, "| policy | not served | lost to idle time | idle credential-hours | requests lost per idle credential-hour |") {
		t.Errorf("the lost table lacks its columns:\n%s", s)
	}
	// Fixed 60 s idles 30 s an episode at a reset of 150 s and loses
	// requests to it; every policy has its row.
	if !regexp.MustCompile(`\n\| fixed 60 s \| [0-9.]+% \| [0-9.]*[1-9][0-9.]*% \| [0-9.]+ \| [0-9.]+ \|\n`).MatchString(s) {
		t.Errorf("no fixed 60 s row with requests lost to idle:\n%s", s)
	}
	for _, pol := range sim.Policies() {
		if !strings.Contains(s, "\n| "+pol.Name+" | ") {
			t.Errorf("no %s row:\n%s", pol.Name, s)
		}
	}
}

// -credentials prints, before the table, each policy's rows per
// credential; the table and the last line are the run's without it.
func TestRunCredentials(t *testing.T) {
	plain, s := runWithAndWithout(t, []string{"-span", "1h", "-rates", "0.2", "-scenarios", "steady 150"}, "-credentials")
	printsBefore(t, plain, s, "Per credential, over every cell", "| scenario | traffic | policy |")
	for _, pol := range sim.Policies() {
		for k := range sim.Credentials {
			if !regexp.MustCompile(fmt.Sprintf(`\n\| %s \| key-%d \| [1-9][0-9]* \| [0-9]+ \| [0-9]+ \|\n`, regexp.QuoteMeta(pol.Name), k)).MatchString(s) {
				t.Errorf("no %s row for key-%d with requests served:\n%s", pol.Name, k, s)
			}
		}
	}
}

// -scenarios runs only the built-in scenarios it names, in the table's
// order, with -random's schedules as usual; "none" runs only those.
func TestRunScenarios(t *testing.T) {
	for _, c := range []struct {
		args      []string
		rows, not []string
	}{
		{[]string{"-scenarios", "step 300->60, noisy"}, []string{"| noisy | 1 req/s | fixed 60 s |", "| step 300->60 | 1 req/s | fixed 60 s |"}, []string{"| steady 30 |", "| bursty |", "| random"}},
		{[]string{"-scenarios", "none", "-random", "1"}, []string{"| random 1 | 1 req/s | fixed 60 s |"}, []string{"| steady 30 |", "| noisy |"}},
		{[]string{"-scenarios", "none", "-noisy", "400-800"}, []string{"| noisy 400-800 | 1 req/s | fixed 60 s |", "- noisy 400-800: R uniform in 400-800 s, drawn anew"}, []string{"| steady 30 |", "| noisy |"}},
	} {
		var out, errOut bytes.Buffer
		if code := run(append([]string{"-span", "10m", "-rates", "1"}, c.args...), &out, &errOut); code != 0 {
			t.Fatalf("run(%q): exit %d: %s", c.args, code, errOut.String())
		}
		s := out.String()
		for _, row := range c.rows {
			if !strings.Contains(s, row) {
				t.Errorf("run(%q) lacks %q:\n%s", c.args, row, s)
			}
		}
		for _, row := range c.not {
			if strings.Contains(s, row) {
				t.Errorf("run(%q) has %q:\n%s", c.args, row, s)
			}
		}
		if strings.Index(s, "| noisy |") > strings.Index(s, "| step 300->60 |") {
			t.Errorf("run(%q) left the table's order", c.args)
		}
		if !lastLine.MatchString(last(s)) {
			t.Errorf("run(%q) last line %q", c.args, last(s))
		}
	}
}

// -runs prints, before the table, fixed 60 s's and adapt's idle time and
// refusals per episode by run; the table and the last line are the run's
// without it.
func TestRunRuns(t *testing.T) {
	plain, s := runWithAndWithout(t, []string{"-span", "1h", "-rates", "1", "-scenarios", "step 300->60"}, "-runs")
	printsBefore(t, plain, s, "Episodes by run (", "| scenario | traffic | policy |")
	if !strings.Contains(s, "| run | fixed 60 s: episodes | idle s per episode | wasted per episode | learned adapt: episodes |") ||
		!strings.Contains(s, "\n| 0 | ") || !strings.Contains(s, "\n| 5 or more | ") {
		t.Errorf("the runs table lacks its columns or rows:\n%s", s)
	}
	// The step at 30 min (a 1 h span) is a fall below half for each
	// credential that exhausts after it.
	if !strings.Contains(s, "| change | fixed 60 s: episodes |") || !regexp.MustCompile(`\n\| fell below half \| [1-3] \| `).MatchString(s) {
		t.Errorf("the changes table lacks its columns or the step's fall:\n%s", s)
	}
}

package e2e

import (
	"bufio"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// scripts/adversarial.sh runs the whole suite: every TestAdversarial* test
// and every fuzz target in the repository is in its list, every test it
// names exists, and it refuses an unknown argument. (It does not run the
// suite: that is the suite's own job.)
func TestAdversarialScriptRunsEveryCase(t *testing.T) {
	script := filepath.Join("..", "scripts", "adversarial.sh")
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(src), "#!/usr/bin/env bash\n") || !strings.Contains(string(src), "\nset -euo pipefail\n") {
		t.Error("adversarial.sh must be bash with set -euo pipefail")
	}
	if err := exec.Command("bash", script, "--no-such-flag").Run(); err == nil {
		t.Error("an unknown argument was accepted")
	} else if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Errorf("unknown argument: %v, want exit 2", err)
	}
	out, err := exec.Command("bash", script, "--list").Output()
	if err != nil {
		t.Fatalf("--list: %v", err)
	}
	runs := map[string][]*regexp.Regexp{} // package -> -run patterns
	fuzzes := map[string]bool{}           // "package target"
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 3 {
			t.Fatalf("--list line %q", sc.Text())
		}
		switch f[0] {
		case "test":
			runs[f[1]] = append(runs[f[1]], regexp.MustCompile(f[2]))
		case "fuzz":
			fuzzes[f[1]+" "+f[2]] = true
		default:
			t.Fatalf("--list line %q", sc.Text())
		}
	}
	// Every test function of the repository, by package.
	root := ".."
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz)\w+)\(`)
	funcs := map[string]map[string]bool{}
	filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() && strings.HasPrefix(d.Name(), ".") && p != root {
			return fs.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, _ := os.ReadFile(p)
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		pkg := "./" + filepath.ToSlash(rel)
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			if funcs[pkg] == nil {
				funcs[pkg] = map[string]bool{}
			}
			funcs[pkg][m[1]] = true
		}
		return nil
	})
	covered := func(pkg, name string) bool {
		for _, re := range runs[pkg] {
			if re.MatchString(name) {
				return true
			}
		}
		return false
	}
	for pkg, names := range funcs {
		for name := range names {
			if strings.HasPrefix(name, "TestAdversarial") && !covered(pkg, name) {
				t.Errorf("adversarial.sh does not run %s in %s", name, pkg)
			}
			if strings.HasPrefix(name, "Fuzz") && !fuzzes[pkg+" "+name] {
				t.Errorf("adversarial.sh does not fuzz %s in %s", name, pkg)
			}
		}
	}
	// Every test the script names exists, so that a rename cannot
	// silently drop a case.
	name := regexp.MustCompile(`(?:Test|Fuzz)\w+`)
	for pkg, res := range runs {
		for _, re := range res {
			for _, n := range name.FindAllString(re.String(), -1) {
				if n != "TestAdversarial" && !funcs[pkg][n] {
					t.Errorf("adversarial.sh runs %s in %s, which does not exist", n, pkg)
				}
			}
		}
	}
	for pf := range fuzzes {
		pkg, n, _ := strings.Cut(pf, " ")
		if !funcs[pkg][n] {
			t.Errorf("adversarial.sh fuzzes %s in %s, which does not exist", n, pkg)
		}
	}
}

// Package spectest keeps spec-to-test maps honest: each package that holds
// rules of a spec document lists every rule with the tests that cover it
// (or the package that owns it), and Check fails when a named test does
// not exist.
//
// It is used only from _test.go files and imports no rotor package.
package spectest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Rule is one rule of a spec document.
type Rule struct {
	// Rule quotes or paraphrases the spec.
	Rule string
	// Tests are tests of the calling package that cover it.
	Tests []string
	// Owner names the package (and its tests) that covers it when Tests
	// is empty or partial.
	Owner string
}

// Funcs returns the function declarations of the package in the current
// directory: of its test files when tests is set, else of its other files.
func Funcs(t *testing.T, tests bool) []*ast.FuncDecl {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var out []*ast.FuncDecl
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") != tests {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				out = append(out, fd)
			}
		}
	}
	return out
}

// Check fails t for a rule with neither tests nor owner, and for a named
// test that the package does not define.
func Check(t *testing.T, rules []Rule) {
	t.Helper()
	tests := map[string]bool{}
	for _, fd := range Funcs(t, true) {
		if fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Test") {
			tests[fd.Name.Name] = true
		}
	}
	for _, r := range rules {
		if len(r.Tests) == 0 && r.Owner == "" {
			t.Errorf("rule %q has neither a test nor an owner", r.Rule)
		}
		for _, name := range r.Tests {
			if !tests[name] {
				t.Errorf("rule %q names %s, which does not exist", r.Rule, name)
			}
		}
		for pkg, names := range ownerTests(r.Owner) {
			have := testsIn(t, pkg)
			for _, name := range names {
				if !have[name] {
					t.Errorf("rule %q names %s: %s, which does not exist", r.Rule, pkg, name)
				}
			}
		}
	}
}

// ownerTests reads an owner string, "pkg: TestA, TestB (why); other: TestC",
// into the tests it names per package folder. A part without a colon names
// a package alone.
func ownerTests(owner string) map[string][]string {
	out := map[string][]string{}
	for _, part := range strings.Split(owner, ";") {
		pkg, list, ok := strings.Cut(part, ":")
		if !ok || len(strings.Fields(pkg)) == 0 {
			continue
		}
		pkg = strings.Fields(pkg)[0] // "decisions (why)": the folder
		for _, f := range strings.FieldsFunc(list, func(r rune) bool { return r == ',' || r == ' ' || r == '(' || r == ')' }) {
			if strings.HasPrefix(f, "Test") {
				out[pkg] = append(out[pkg], f)
			}
		}
	}
	return out
}

// testsIn returns the Test functions of the test files in folder pkg of
// the module that holds the current directory.
func testsIn(t *testing.T, pkg string) map[string]bool {
	t.Helper()
	root, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			t.Fatal("no go.mod above the current directory")
		}
		root = parent
	}
	files, err := filepath.Glob(filepath.Join(root, filepath.FromSlash(pkg), "*_test.go"))
	if err != nil || len(files) == 0 {
		t.Errorf("owner package %s has no test files", pkg)
		return nil
	}
	out := map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Test") {
				out[fd.Name.Name] = true
			}
		}
	}
	return out
}

// R builds a Rule: the rule's words, the tests that cover it, and the
// owning package when another package holds it ("" otherwise).
func R(rule string, tests []string, owner string) Rule {
	return Rule{Rule: rule, Tests: tests, Owner: owner}
}

// Forbid fails t for every goroutine the package's non-test functions
// start, every use of a package-qualified name in forbidden ("time.Sleep"),
// and every selection of a field or method named in fields (".Header"):
// a package that must never wait, call out or parse headers says so once.
func Forbid(t *testing.T, forbidden map[string]bool, fields ...string) {
	t.Helper()
	for _, fd := range Funcs(t, false) {
		ast.Inspect(fd, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s starts a goroutine", fd.Name.Name)
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && forbidden[id.Name+"."+n.Sel.Name] {
					t.Errorf("%s uses %s.%s", fd.Name.Name, id.Name, n.Sel.Name)
				}
				for _, f := range fields {
					if n.Sel.Name == f {
						t.Errorf("%s uses .%s", fd.Name.Name, f)
					}
				}
			}
			return true
		})
	}
}

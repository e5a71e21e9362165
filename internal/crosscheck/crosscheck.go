// Package crosscheck type-checks a module's packages as they would build
// for another operating system, without compiling them: rotor runs on
// Linux, macOS and Windows, but only Linux runs its tests, and a type of
// one OS's syscall package (syscall.Stat_t, which Windows lacks) breaks
// the others' builds.
//
// A cross build (GOOS=windows go build ./...) finds the same errors but
// compiles every dependency for each OS first: SQLite's generated code
// alone took about a minute per OS on a cold build cache, two of CI's
// fourteen minutes. Type-checking from source with go/types takes seconds.
// What it cannot see is what only the compiler or linker checks (a
// function declared without a body and no assembly for that OS); rotor
// has no assembly, and its OS-specific code is Go behind build
// constraints, which go list applies here exactly as go build does.
//
// It imports the standard library only, and runs the go command (go list,
// go tool dist list).
package crosscheck

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// listed is the part of go list's JSON that Check reads.
type listed struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	ImportMap  map[string]string
	Module     *struct{ GoVersion string }
	Error      *struct{ Err string }
}

// Check type-checks the packages patterns match in the module at dir,
// and every package they import, as built for goos and goarch with cgo
// off. It returns each type error, in the module's packages or any they
// import (the standard library's included), as "file:line:col: message",
// and each package go list could not load; err reports a port the
// toolchain lacks or a failure to list the packages.
func Check(dir, goos, goarch string, patterns ...string) (problems []string, err error) {
	if err := supported(goos, goarch); err != nil {
		return nil, err
	}
	pkgs, err := list(dir, goos, goarch, patterns)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	checked := map[string]*types.Package{"unsafe": types.Unsafe}
	sizes := types.SizesFor("gc", goarch)
	for _, p := range pkgs {
		if p.ImportPath == "unsafe" {
			continue
		}
		if p.Error != nil {
			problems = append(problems, fmt.Sprintf("%s: %s", p.ImportPath, p.Error.Err))
			continue
		}
		files, perr := parse(fset, p)
		if perr != nil {
			problems = append(problems, perr.Error())
			continue
		}
		conf := types.Config{
			Importer: importFunc(func(path string) (*types.Package, error) {
				if m, ok := p.ImportMap[path]; ok {
					path = m
				}
				if t, ok := checked[path]; ok {
					return t, nil
				}
				return nil, fmt.Errorf("package %s is not among the listed dependencies", path)
			}),
			Sizes: sizes,
			Error: func(e error) { problems = append(problems, e.Error()) },
		}
		if p.Module != nil && p.Module.GoVersion != "" {
			conf.GoVersion = "go" + p.Module.GoVersion
		}
		t, _ := conf.Check(p.ImportPath, fset, files, nil)
		checked[p.ImportPath] = t
	}
	return problems, nil
}

// supported reports an error unless goos/goarch is a port of the go
// command's toolchain: go list takes any GOOS as a build tag, and a
// misspelt one would check a system that does not exist.
func supported(goos, goarch string) error {
	out, err := exec.Command("go", "tool", "dist", "list").Output()
	if err != nil {
		return fmt.Errorf("go tool dist list: %v", err)
	}
	for _, port := range strings.Fields(string(out)) {
		if port == goos+"/"+goarch {
			return nil
		}
	}
	return fmt.Errorf("GOOS=%s GOARCH=%s is not a port go supports (go tool dist list)", goos, goarch)
}

// list runs go list -deps for patterns in dir, for goos and goarch: the
// packages in dependency order, each with the files that build there.
func list(dir, goos, goarch string, patterns []string) ([]listed, error) {
	args := append([]string{"list", "-e", "-deps", "-json=ImportPath,Dir,GoFiles,ImportMap,Module,Error"}, patterns...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS="+goos, "GOARCH="+goarch, "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("GOOS=%s go list: %v: %s", goos, err, strings.TrimSpace(stderr.String()))
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			if len(pkgs) == 0 {
				return nil, fmt.Errorf("GOOS=%s go list %s in %s: no packages: %s", goos, strings.Join(patterns, " "), dir, strings.TrimSpace(stderr.String()))
			}
			return pkgs, nil
		} else if err != nil {
			return nil, fmt.Errorf("GOOS=%s go list: %v", goos, err)
		}
		pkgs = append(pkgs, p)
	}
}

// parse parses the Go files of p that build for the listed OS.
func parse(fset *token.FileSet, p listed) ([]*ast.File, error) {
	files := make([]*ast.File, 0, len(p.GoFiles))
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// importFunc adapts a function to types.Importer.
type importFunc func(path string) (*types.Package, error)

func (f importFunc) Import(path string) (*types.Package, error) { return f(path) }

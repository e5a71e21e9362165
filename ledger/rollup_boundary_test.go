package ledger

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestRollupTablesStayBehindTheBoundary: only rollup.go (the writes),
// rollup_window.go (the windows' reads), report.go (the report's reads)
// and rollup_pruned.go (pruned usage for `ledger copy`, which moves the
// frontiers itself), the files doc.go maps, name the rollup tables or their
// frontiers in SQL. A query elsewhere would read or write them without
// knowing the frontiers that make them exact.
func TestRollupTablesStayBehindTheBoundary(t *testing.T) {
	allowed := map[string]bool{"rollup.go": true, "rollup_window.go": true, "report.go": true, "rollup_pruned.go": true}
	names := []string{"usage_minute", "usage_hour", "fold_until", "hour_rollup_until"}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || allowed[f] {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			for _, name := range names {
				if strings.Contains(lit.Value, name) {
					t.Errorf("%s: SQL names %s outside rollup*.go and report.go", fset.Position(lit.Pos()), name)
				}
			}
			return true
		})
	}
}

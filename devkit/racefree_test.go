package devkit_test

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRaceFreePackagesStartNoGoroutine: every package scripts/race-free
// lists (their tests run without the race detector) starts no goroutine of
// its own. Its code has no `go` statement and imports none of sync,
// sync/atomic or golang.org/x/sync; its tests have no `go` statement
// outside benchmarks and call neither t.Parallel nor b.RunParallel. A
// package that starts one goes back to the race detector's run.
func TestRaceFreePackagesStartNoGoroutine(t *testing.T) {
	const module = "github.com/archivist/archivist/"
	f, err := os.Open("../scripts/race-free")
	if err != nil {
		t.Fatalf("the list scripts/test reads: %v", err)
	}
	defer f.Close()
	var pkgs []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line, _, _ := strings.Cut(sc.Text(), "#")
		if line = strings.TrimSpace(line); line != "" {
			pkgs = append(pkgs, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(pkgs) == 0 {
		t.Fatal("scripts/race-free lists no package")
	}
	for _, pkg := range pkgs {
		if strings.HasPrefix(pkg, module) || strings.Contains(pkg, "..") {
			t.Errorf("%s: list a path relative to %s", pkg, module)
			continue
		}
		for _, problem := range startsGoroutines(t, filepath.Join("..", pkg)) {
			t.Errorf("%s (scripts/race-free): %s; run it under the race detector (take it off the list)", pkg, problem)
		}
	}
}

// startsGoroutines is what in dir's Go files starts goroutines or shares
// memory between them.
func startsGoroutines(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(files) == 0 {
		t.Errorf("%s: no Go files (%v)", dir, err)
		return nil
	}
	var problems []string
	fset := token.NewFileSet()
	for _, name := range files {
		file, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		test := strings.HasSuffix(name, "_test.go")
		if !test {
			for _, imp := range file.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if path == "sync" || path == "sync/atomic" || strings.HasPrefix(path, "golang.org/x/sync") {
					problems = append(problems, fset.Position(imp.Pos()).String()+": imports "+path)
				}
			}
		}
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if test && ok && strings.HasPrefix(fn.Name.Name, "Benchmark") {
				continue // benchmarks are not run by the tests
			}
			ast.Inspect(decl, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.GoStmt:
					problems = append(problems, fset.Position(n.Pos()).String()+": a go statement")
				case *ast.SelectorExpr:
					if test && (n.Sel.Name == "Parallel" || n.Sel.Name == "RunParallel") {
						problems = append(problems, fset.Position(n.Pos()).String()+": runs tests in parallel")
					}
				}
				return true
			})
		}
	}
	return problems
}

package web

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/archtest"
)

// workImports are the imports of a work-doing domain package
// (archtest.WorkPackages) the web still has, keyed "FILE PATH", each with
// why it cannot go through an op yet.
var workImports = map[string]string{}

// TestWebImportsNoDomainWork: no non-test file of the web imports a
// work-doing domain package unless workImports lists it with its reason;
// every trial, gate, certificate and evaluation the pages show comes from
// an app op's response.
func TestWebImportsNoDomainWork(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	sub, _ := filepath.Glob(filepath.Join("plot", "*.go"))
	got, err := archtest.Violations(append(files, sub...), workImports)
	if err != nil {
		t.Fatal(err)
	}
	for _, msg := range got {
		t.Error(msg)
	}
}

// storeReaders are the functions of the web package that still reach the
// shared resources (service.Deps' Store or DataDir) instead of an app op,
// each with why. Everything else is an adapter over internal/app.
var storeReaders = map[string]string{}

// TestWebIsThin: the web package imports no store package, and only the
// functions listed in storeReaders touch the store or the data directory
// directly (every page, action and data endpoint else calls app ops, so
// role, line scope and limits are the application's). A new direct read
// fails here until it moves onto an op or is listed with its reason.
func TestWebIsThin(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	sub, _ := filepath.Glob(filepath.Join("plot", "*.go"))
	files = append(files, sub...)
	fset := token.NewFileSet()
	used := map[string][]string{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if strings.HasPrefix(path, "github.com/aml-project/aml/internal/store") {
				t.Errorf("%s imports %s: the web reads through internal/app", name, path)
			}
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok || (sel.Sel.Name != "Store" && sel.Sel.Name != "DataDir") {
					return true
				}
				// s.d.Store, d.Store: the service.Deps of the server.
				var base string
				switch x := sel.X.(type) {
				case *ast.SelectorExpr:
					if id, ok := x.X.(*ast.Ident); ok {
						base = id.Name + "." + x.Sel.Name
					}
				case *ast.Ident:
					base = x.Name
				}
				if base == "s.d" || base == "d" {
					used[fn.Name.Name] = append(used[fn.Name.Name], fset.Position(sel.Pos()).String())
				}
				return true
			})
		}
	}
	var names []string
	for n := range used {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if _, ok := storeReaders[n]; !ok {
			t.Errorf("%s reads the store directly (%s): call an app op, or list it in storeReaders with the reason", n, strings.Join(used[n], ", "))
		}
	}
	for n := range storeReaders {
		if _, ok := used[n]; !ok {
			t.Errorf("storeReaders lists %s, which no longer reads the store: remove it", n)
		}
	}
}

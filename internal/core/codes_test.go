package core

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// moduleRoot is the directory holding go.mod above the test's directory.
func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("no go.mod above the test directory")
		}
		dir = up
	}
}

// goFiles parses every non-test Go file under internal/ and cmd/ and calls
// f with its path relative to the module root ('/'-separated).
func goFiles(t *testing.T, f func(rel string, fset *token.FileSet, file *ast.File)) {
	t.Helper()
	root := moduleRoot(t)
	for _, top := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".") {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return nil
			}
			fset := token.NewFileSet()
			file, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			f(filepath.ToSlash(rel), fset, file)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

var codeName = regexp.MustCompile(`^Code[A-Z]`)

// TestCodesRegistered: every error code of the repository is a constant of
// codes.go and registered there; a package that names a code of its own
// does so as an alias of core's constant; an error built with a literal
// code uses a registered one.
func TestCodesRegistered(t *testing.T) {
	declared := map[string]string{} // code → constant in codes.go
	goFiles(t, func(rel string, fset *token.FileSet, file *ast.File) {
		coreName := "core"
		for _, im := range file.Imports {
			if strings.Trim(im.Path.Value, `"`) == "github.com/aml-project/aml/internal/core" && im.Name != nil {
				coreName = im.Name.Name
			}
		}
		inCore := file.Name.Name == "core" && strings.HasPrefix(rel, "internal/core/")
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GenDecl:
				if n.Tok != token.CONST && n.Tok != token.VAR {
					return true
				}
				for _, spec := range n.Specs {
					vs := spec.(*ast.ValueSpec)
					for i, name := range vs.Names {
						if !codeName.MatchString(name.Name) || i >= len(vs.Values) {
							continue
						}
						pos := fset.Position(name.Pos())
						where := rel + ":" + strconv.Itoa(pos.Line)
						v := vs.Values[i]
						if rel == "internal/core/codes.go" {
							lit, ok := v.(*ast.BasicLit)
							if !ok || lit.Kind != token.STRING {
								t.Errorf("%s: %s must be a string literal", where, name.Name)
								continue
							}
							s, _ := strconv.Unquote(lit.Value)
							if other, dup := declared[s]; dup {
								t.Errorf("%s: %s and %s are both %q", where, other, name.Name, s)
							}
							declared[s] = name.Name
							continue
						}
						if inCore {
							t.Errorf("%s: declare code %s in codes.go", where, name.Name)
							continue
						}
						if !isCoreCode(v, coreName) {
							t.Errorf("%s: %s must be an alias of a core.Code… constant: declare and register the code in internal/core/codes.go", where, name.Name)
						}
					}
				}
			case *ast.CallExpr:
				sel, ok := n.Fun.(*ast.SelectorExpr)
				var fn string
				if ok {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == coreName {
						fn = sel.Sel.Name
					}
				} else if id, ok := n.Fun.(*ast.Ident); ok && inCore {
					fn = id.Name
				}
				switch fn {
				case "Errorf", "FieldErrorf", "Wrap", "Invalid":
				default:
					return true
				}
				if len(n.Args) > 0 {
					checkLiteral(t, rel, fset, n.Args[0])
				}
			case *ast.CompositeLit:
				if !isCoreError(n.Type, coreName, inCore) {
					return true
				}
				for _, el := range n.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok {
						if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Code" {
							checkLiteral(t, rel, fset, kv.Value)
						}
					}
				}
			}
			return true
		})
	})
	if len(declared) == 0 {
		t.Fatal("no code constants found in internal/core/codes.go")
	}
	for code, name := range declared {
		if _, ok := Lookup(code); !ok {
			t.Errorf("%s (%s) is not in the registry of codes.go", name, code)
		}
	}
	if len(declared) != len(registry) {
		t.Errorf("codes.go declares %d codes, the registry holds %d", len(declared), len(registry))
	}
}

// isCoreCode reports whether e is core.Code… (with core imported as
// coreName).
func isCoreCode(e ast.Expr, coreName string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	x, ok := sel.X.(*ast.Ident)
	return ok && x.Name == coreName && codeName.MatchString(sel.Sel.Name)
}

func isCoreError(typ ast.Expr, coreName string, inCore bool) bool {
	switch x := typ.(type) {
	case *ast.SelectorExpr:
		id, ok := x.X.(*ast.Ident)
		return ok && id.Name == coreName && x.Sel.Name == "Error"
	case *ast.Ident:
		return inCore && x.Name == "Error"
	}
	return false
}

func checkLiteral(t *testing.T, rel string, fset *token.FileSet, e ast.Expr) {
	t.Helper()
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return
	}
	s, _ := strconv.Unquote(lit.Value)
	if _, ok := Lookup(s); !ok {
		t.Errorf("%s:%d: error code %q is not registered in internal/core/codes.go", rel, fset.Position(lit.Pos()).Line, s)
	}
}

func TestRegistry(t *testing.T) {
	seen := map[string]bool{}
	for _, c := range Codes() {
		if seen[c.Code] {
			t.Errorf("%s registered twice", c.Code)
		}
		seen[c.Code] = true
		if c.Doc == "" || strings.Contains(c.Doc, "\n") || strings.Contains(c.Doc, "|") {
			t.Errorf("%s: the description must be one line without '|': %q", c.Code, c.Doc)
		}
		if c.Kind.Doc() == "" {
			t.Errorf("%s: unknown kind %q", c.Code, c.Kind)
		}
	}
	kinds := map[Kind]bool{}
	for _, k := range Kinds() {
		if kinds[k] {
			t.Errorf("kind %s listed twice", k)
		}
		kinds[k] = true
	}
	if got := KindOf(Errorf(CodeNotFound, "x")); got != KindNotFound {
		t.Errorf("KindOf(not found) = %s", got)
	}
	if got := KindOf(os.ErrNotExist); got != KindInternal {
		t.Errorf("KindOf(plain error) = %s", got)
	}
	if got := KindOf(nil); got != "" {
		t.Errorf("KindOf(nil) = %q", got)
	}
	if got := KindOfCode("AML_FROM_THE_FUTURE"); got != KindInternal {
		t.Errorf("unregistered code: kind %s, want internal", got)
	}
}

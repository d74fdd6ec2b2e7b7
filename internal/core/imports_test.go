package core

import (
	"go/ast"
	"go/token"
	"strconv"
	"strings"
	"testing"
)

// httpTransports are the only places under internal/ that may import
// net/http: they speak HTTP and map error kinds to statuses
// (auth.HTTPStatus). Everything else reports errors by code and kind.
var httpTransports = []string{
	"internal/api/",
	"internal/apiclient/", // the HTTP client of the API
	"internal/web/",
	"internal/mcp/",
	"internal/auth/middleware.go",
}

// TestNoHTTPOutsideTransports fails when a non-test file of a non-transport
// package under internal/ imports net/http (or one of its subpackages).
func TestNoHTTPOutsideTransports(t *testing.T) {
	goFiles(t, func(rel string, fset *token.FileSet, file *ast.File) {
		if !strings.HasPrefix(rel, "internal/") {
			return
		}
		for _, allowed := range httpTransports {
			if strings.HasPrefix(rel, allowed) {
				return
			}
		}
		for _, im := range file.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			if p == "net/http" || strings.HasPrefix(p, "net/http/") {
				t.Errorf("%s:%d imports %s: only transports (%s) may; use a core code whose kind gives the status",
					rel, fset.Position(im.Pos()).Line, p, strings.Join(httpTransports, ", "))
			}
		}
	})
}

// interfacePkgs may be imported only by the interfaces above them: data
// flows one way (ingest → dataset → jobs → ident/eval → registry → twin →
// application → its text rendering → interfaces), so no domain package knows of the application
// layer, HTTP, MCP, the web UI or cobra. The application layer's own
// subpackages (internal/app/linemap: a map file as a line.apply request)
// are part of it.
var interfacePkgs = map[string][]string{
	"github.com/aml-project/aml/internal/app":       {"internal/app/", "internal/api/", "internal/apiclient/", "internal/mcp/", "internal/web/", "internal/demo/", "internal/render/", "cmd/"},
	"github.com/aml-project/aml/internal/render":    {"internal/mcp/", "internal/web/", "cmd/"},
	"github.com/aml-project/aml/internal/api":       {"internal/apiclient/", "cmd/"},
	"github.com/aml-project/aml/internal/apiclient": {"cmd/"},
	"github.com/aml-project/aml/internal/mcp":       {"cmd/"},
	"github.com/aml-project/aml/internal/web":       {"cmd/"},
	"github.com/aml-project/aml/internal/demo":      {"cmd/"},
	"github.com/spf13/cobra":                        {"cmd/"},
}

// TestLayers fails when a non-test file imports a layer above its own.
func TestLayers(t *testing.T) {
	goFiles(t, func(rel string, fset *token.FileSet, file *ast.File) {
		for _, im := range file.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			allowed, ok := interfacePkgs[p]
			if !ok {
				continue
			}
			fine := false
			for _, a := range allowed {
				fine = fine || strings.HasPrefix(rel, a)
			}
			if !fine {
				t.Errorf("%s:%d imports %s: only %v may", rel, fset.Position(im.Pos()).Line, p, allowed)
			}
		}
	})
}

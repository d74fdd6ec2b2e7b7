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

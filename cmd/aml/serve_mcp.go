package main

import (
	"net/http"

	amlapp "github.com/aml-project/aml/internal/app"
	amlmcp "github.com/aml-project/aml/internal/mcp"
	"github.com/aml-project/aml/internal/service"
)

// aml serve mounts the MCP tools at /mcp (streamable HTTP, behind the API's
// authentication; the tools act as each request's principal through the
// application layer).
func init() {
	serveMCP = func(d *service.Deps) http.Handler {
		return amlmcp.HTTPHandler(amlapp.New(d, amlapp.Options{Version: version}))
	}
	amlmcp.Version = version
}

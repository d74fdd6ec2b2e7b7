package main

import amlmcp "github.com/aml-project/aml/internal/mcp"

// aml serve mounts the MCP tools at /mcp (streamable HTTP, behind the API's
// authentication; the tools act as each request's principal).
func init() {
	serveMCP = amlmcp.HTTPHandler
	amlmcp.Version = version
}

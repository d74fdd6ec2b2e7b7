// Package api is AML's HTTP API: JSON under /api/v1, Server-Sent Events at
// /api/v1/events, Prometheus metrics at /metrics, and the mounts of the MCP
// server (/mcp) and the web UI (/ui/) — one http.Handler for `aml serve`.
//
// Design:
//
//   - One route table (routes.go) is the truth. Each row names the method,
//     path, the auth.Action it takes, its documented query parameters and
//     request body type, and the handler. The chi router, the OpenAPI 3
//     document (/api/v1/openapi.json) and the role checks are all built from
//     it, so the document cannot list a route the server lacks or miss one
//     it has (a test walks the chi tree against the document).
//   - Authorisation happens twice, both through auth.Principal.Allow: the
//     role check before the handler runs (a viewer asking to build a
//     dataset is refused before anything is read), and the line check once
//     the handler knows the resource's line (call.line). Lists are
//     filtered to the caller's lines instead. Handlers never decide roles.
//   - Handlers call the same domain functions as the CLI (dataset.Build,
//     jobs.Runner, registry, snapshot.Take, engine.RunTrial, gate.Evaluate,
//     the store's certificate and channel methods, govern.Execute, shadow,
//     recal) with the caller's Principal.Name as the actor, so the audit
//     log and "the requester cannot approve" hold for API callers too.
//   - Errors are {code, message, field} with the status of the core.Error
//     code; bodies are size-limited (413), callers rate-limited per token
//     (429), and a panic in a handler becomes a 500 for that request only.
//   - Events: the bus never blocks publishers; an SSE client whose buffer
//     overflows is told so and disconnected (it must re-read the state it
//     follows), instead of slowing the job that publishes.
package api

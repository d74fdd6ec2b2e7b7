// Package api is AML's HTTP API: JSON under /api/v1, Server-Sent Events at
// /api/v1/events, Prometheus metrics at /metrics, and the mounts of the MCP
// server (/mcp) and the web UI (/ui/) — one http.Handler for `aml serve`.
//
// Design:
//
//   - The API is an adapter over the application layer (internal/app). One
//     route table (routes.go) is the truth: each row names the method, the
//     path and the app op it calls. The chi router, the OpenAPI 3 document
//     (/api/v1/openapi.json, generated from the ops' request and response
//     types) and the CLI's --server client (internal/apiclient) are all
//     built from it; tests walk it against the ops and the document.
//   - One handler serves every JSON route: it refuses a caller whose role
//     may never take the op's action before the body is read, decodes the
//     request type from the path ("{id}" is the field named id), the query
//     string (GET, DELETE) or the JSON body (POST, PUT; a query parameter
//     there is refused), calls the op and encodes its answer. The op checks
//     the role again, validates, checks the line scope of what it touches,
//     takes the heavy-operation slots and publishes events — once, for every
//     interface. Handlers decide nothing.
//   - Three routes stream: the CSV upload (the options are query
//     parameters, the body goes to the ingest.csv op as a stream, limited),
//     the event stream and the public document and liveness probe.
//   - Errors are {code, message, field} with the status of the code's kind
//     (auth.HTTPStatus; docs/errors.md); a denied write or a failed
//     verification also carries its report as "result". Bodies are
//     size-limited (413), callers rate-limited per token (429; the UI's
//     requests with a principal spend from the same bucket), and a panic
//     in a handler becomes a 500 for that request only.
//   - Events: the bus never blocks publishers; an SSE client whose buffer
//     overflows is told so and disconnected (it must re-read the state it
//     follows), instead of slowing the job that publishes.
package api

// Package mcp serves AML's agent tools over the Model Context Protocol
// (github.com/modelcontextprotocol/go-sdk): over stdio for an agent that
// starts "aml mcp" as a subprocess, and over streamable HTTP at /mcp of
// "aml serve" (HTTPHandler, mounted by internal/api behind its auth
// middleware).
//
// # Tools
//
// The package is a thin adapter over the application layer
// (internal/app): each tool is a row of a table (tools.go) naming an app
// operation, and registration is generic. A tool's input schema is
// app.Schema of the op's request type and its output schema that of the
// op's response type; a call decodes the arguments into the request type
// (unknown fields refused) and runs the op as the server's principal.
// Nothing here re-implements a use case, a role check or a validation rule:
// a tool takes the same fields, under the same names, as the API route and
// the CLI command of the same op. Each tool names its op in its _meta
// ("aml/op").
//
//	tool                      app op           hints
//	aml_node_catalog          node.list        read-only
//	aml_dataset_build         dataset.build    additive
//	aml_dataset_stats         dataset.report   read-only
//	aml_job_submit            job.submit       additive
//	aml_job_status            job.show         read-only
//	aml_job_logs              job.logs         read-only
//	aml_job_cancel            job.cancel       destructive, idempotent
//	aml_leaderboard           model.compare    read-only
//	aml_model_reference       model.reference  read-only
//	twin_scene_list           scene.list       read-only
//	twin_scene_read           scene.show       read-only
//	twin_snapshot_create      snapshot.take    additive
//	twin_trial_run            trial.run        additive
//	mpc_optimize              optimize         additive
//	twin_gate_evaluate        gate.evaluate    additive
//	twin_calibration_request  calibrate        idempotent
//	twin_certificate_request  cert.issue       additive
//
// Arguments are the request type's json fields: "id" for the resource an
// op is about (aml_job_status {"id": JOB}, twin_scene_read {"id": SCENE}),
// "model", "snapshot", "objective", "scene", "trial", "line" for the
// others, durations as Go duration strings ("maxAge": "60s", "ttl": "15m",
// "timeout": "30m") and instants as epoch milliseconds or RFC 3339 ("at",
// "from"). aml_dataset_build takes {"spec": {...}, "maxWindows",
// "maxBytesMiB"}, the spec being the dataset spec of
// docs/dataset-format.md unchanged.
//
// Every tool declares openWorldHint false: it acts on AML's own store and
// files, never on the machine. Results are structured content of the op's
// response type; a response that is not a JSON object would be wrapped as
// {"result": ...} (OutputSchema) so that the structured content is always
// an object. The output schema treats a type with its own MarshalJSON
// (metrics as raw JSON, numbers that encode NaN as null) as "any value" so
// that the declared schema matches what is actually sent.
//
// # What the application enforces
//
// A server is built for one auth.Principal (NewServer) and every call goes
// through the op's one path in internal/app: the role check (the op's
// auth.Action), the request's validation, the line scope of the resource
// concerned (lists filtered to the principal's lines) and, for heavy ops
// (dataset builds, snapshots, trials, optimisation, the gate, calibration,
// the reference prediction), one of the App's heavy-operation slots,
// shared with every other interface on the same App: a call waits for a
// slot and gives up with AML_STORE_UNAVAILABLE when its context ends
// first. The principal's name is the actor recorded in the store and the
// audit log, so the store's rule that the requester of a certificate
// cannot approve it applies to agents too.
//
// # The agent's limits
//
// The limits of the agent role are structural, not a flag: no tool calls
// an op that approves, revokes or executes a certificate (cert.approve,
// cert.revoke, cert.execute), moves a model's stage (model.promote,
// model.retire), freezes a scene (scene.freeze) or sets a channel
// (channel.set), so no principal can do those through MCP, and the role
// table (internal/auth) refuses the agent role those actions on every
// surface. A test lists the tools and checks that each op's action is one
// the agent role may take. twin_certificate_request only issues (queues) a
// signed certificate in status ISSUED for a person with the approver role;
// a gate pass or a recalibration never promotes. Trials and optimisations
// are simulations (candidateExecuted is always false).
//
// # Errors
//
// A failing tool returns a tool error (isError) whose text is
// "CODE: field: message" and whose structured content is ToolError
// {code, message, field, status, problems}: the AML error (core.Error)
// unchanged, with its HTTP-equivalent status. Arguments that do not decode
// into the request type are AML_INVALID_ARGUMENT: on the offending field
// when it can be told ("offset: want an integer, got string", "maxAge:
// want a duration string ..."), on "arguments" otherwise (an unknown field
// such as an old argument name). Protocol errors (unknown tool, malformed
// JSON-RPC) stay JSON-RPC errors.
//
// # Transports
//
// Stdio: cmd/aml/mcp.go runs NewServer(app, p).Run over sdk.StdioTransport,
// with p from a token (auth.Tokens.VerifyToken on the data directory's
// store) or a local agent principal (role agent, optional line scope).
//
// HTTP: HTTPHandler runs the SDK's streamable handler statelessly and builds
// a server per request, on the one App, for the principal in that
// request's context. There is no MCP session state to carry a principal
// from one request to the next, so every call is authorised with the
// credentials it arrived with; a request without a principal is 401
// AML_UNAUTHENTICATED.
package mcp

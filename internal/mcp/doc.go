// Package mcp serves AML's agent tools over the Model Context Protocol
// (github.com/modelcontextprotocol/go-sdk): over stdio for an agent that
// starts "aml mcp" as a subprocess, and over streamable HTTP at /mcp of
// "aml serve" (HTTPHandler, mounted by internal/api behind its auth
// middleware).
//
// # Tools
//
// The tools keep upstream's names and map onto the same domain calls as
// the CLI (nothing here re-implements domain logic):
//
//	tool                      does                                      hints
//	aml_node_catalog          nodes of the lines in scope               read-only
//	aml_dataset_build         dataset.Build from a typed spec           additive
//	aml_dataset_stats         the dataset's report                      read-only
//	aml_job_submit            jobs.Runner.Submit (queued)               additive
//	aml_job_status            the job                                   read-only
//	aml_job_logs              the trainer log, paged by byte offset     read-only
//	aml_job_cancel            jobs.Runner.Cancel                        destructive, idempotent
//	aml_leaderboard           models ranked by platform test metrics    read-only
//	aml_model_reference       baseline vs proposed-control prediction   read-only
//	twin_scene_read           a scene contract (or the list)            read-only
//	twin_snapshot_create      snapshot.Take + store                     additive
//	twin_trial_run            engine.RunTrial + store                   additive
//	mpc_optimize              engine.RunOptimize + store best trial     additive
//	twin_gate_evaluate        gate.Evaluate (stored)                    additive
//	twin_calibration_request  recal signals + request (dedup/cooldown)  idempotent
//	twin_certificate_request  IssueCertificate: status ISSUED only      additive
//
// Every tool declares openWorldHint false: it acts on AML's own store and
// files, never on the machine. Inputs are typed structs whose jsonschema
// tags are the parameter descriptions; results are structured (an output
// schema per tool). The output schema treats a type with its own
// MarshalJSON (metrics as raw JSON, numbers that encode NaN as null) as
// "any value" so the declared schema matches what is actually sent.
//
// # The agent's limits
//
// A server is built for one auth.Principal (NewServer) and every tool
// checks it with Principal.Allow before it reads or changes anything: the
// role (reads for everyone; datasets, jobs, trials, snapshots, gate and
// calibration requests for engineer, agent and admin; certificate requests
// likewise) and the line scope (the line of the dataset, job, model,
// scene, snapshot or trial concerned; listings are filtered to the scope).
// The principal's name is the actor recorded in the store and the audit
// log, so the store's rule that the requester of a certificate cannot
// approve it applies to agents too.
//
// The limits of the agent role are structural, not a flag: no tool
// approves, revokes or executes a certificate, promotes a model, freezes a
// scene or sets a channel, so no principal can do those through MCP.
// twin_certificate_request only issues (queues) a signed certificate in
// status ISSUED for a person with the approver role; a gate pass or a
// recalibration never promotes. Trials and optimisations are simulations
// (candidateExecuted is always false).
//
// # Errors
//
// A failing tool returns a tool error (isError) whose text is
// "CODE: field: message" and whose structured content is ToolError
// {code, message, field, status, problems}: the AML error (core.Error)
// unchanged, with its HTTP-equivalent status. Arguments that do not match
// the input schema are AML_INVALID_ARGUMENT on field "arguments". Protocol
// errors (unknown tool, malformed JSON-RPC) stay JSON-RPC errors.
//
// # Transports
//
// Stdio: cmd/aml/mcp.go runs NewServer(d, p).Run over sdk.StdioTransport,
// with p from a token (auth.Tokens.VerifyToken on the data directory's
// store) or a local agent principal (role agent, optional line scope).
//
// HTTP: HTTPHandler runs the SDK's streamable handler statelessly and builds
// a server per request for the principal in that request's context. There
// is no MCP session state to carry a principal from one request to the
// next, so every call is authorised with the credentials it arrived with;
// a request without a principal is 401 AML_UNAUTHENTICATED.
package mcp

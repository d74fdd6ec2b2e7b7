// Package app is AML's application layer: every use case — ingest, dataset
// build, job submit, model promote, snapshot, trial, optimise, gate,
// certificate approve and execute, audit, tokens, … — is written once here
// as a method
//
//	func (a *App) X(ctx context.Context, p Principal, req XRequest) (XResponse, error)
//
// with exported request and response types that carry json and jsonschema
// tags and validate themselves. The interfaces are adapters over it: the
// HTTP API (internal/api) decodes a request into the type, calls the method
// and encodes the answer; the MCP tools (internal/mcp) are generated from
// the same types; the web UI (internal/web) and the CLI (cmd/aml, local and
// --server) call the same methods.
//
// What is enforced here, once, for every interface:
//
//   - the role check: each use case is an Op with the auth.Action it needs
//     (Op.Act); run refuses a principal whose role may not take it before
//     anything else happens;
//   - validation: a request type with a Validate method is validated
//     before the use case runs (one rule per field, one error code);
//   - line scope: each use case checks the line of the resource it reads or
//     changes against the principal's scope (auth.Principal.Allow), and
//     lists are filtered to the principal's lines;
//   - heavy-operation limits: Ops marked Heavy (dataset builds, trials,
//     optimise, gate, shadow, predict, snapshot, steptest.execute) take one
//     of a fixed number of compute slots, after the request is decoded and
//     validated, so a slow or bad request never holds a slot; a use case
//     that goes on in the background after its call answered (a step test)
//     keeps its call's slot until it ends (keepSlot);
//   - audit entries and events: the use cases that change governed state
//     write their audit entry and publish their event here.
//
// Governed writes (cert.execute, steptest.execute, the envelope cycle)
// reach a machine through the writer the process's operator configured
// for the line (Options.LineWriters: aml serve --line-writers, the local
// CLI's --opcua-endpoint and --map), chosen by the stored line of what is
// executed after the line scope is checked; no request names a writer
// (linewriters.go).
//
// Background work (a step test started without wait) runs on a context
// that keeps the call's values but not its cancellation, and ends when
// the process calls Shutdown (aml serve, aml mcp), which waits for it to
// record its end.
//
// Field names and units are the same on every surface. Durations are
// written as Go duration strings ("90s", "15m", "1h30m"; type Duration);
// instants in requests as epoch milliseconds or RFC 3339 (type Instant).
//
// The adapters import no package that does the work (internal/archtest;
// TestWebImportsNoDomainWork, TestCLIImportsNoDomainWork): a decision a
// page or a command needs comes back in the op's response (shadow.list's
// flags and profile, trial.recompute's reproduced), and the response types
// and request defaults the domain packages define are named here
// (adapter.go: CertExecuteResult, TrialDetail, DefaultCertTTL, …).
//
// Ops lists every use case with its request and response types; the API
// route table and the MCP tool list name Ops, and a test checks that each
// route and tool is backed by one.
package app

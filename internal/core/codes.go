package core

import (
	"errors"
	"fmt"
	"sort"
)

//go:generate go run ./gen -o ../../docs/errors.md

// Kind classifies an error code by what the caller can do about it. Every
// code has exactly one kind (see [Lookup]); transports map kinds, never
// codes, to their own terms: the API and the UI to an HTTP status
// (auth.HTTPStatus), the CLI to an exit status (2 for KindUsage, else 1).
// The set is fixed: add a kind only together with its HTTP status.
type Kind string

// The kinds. The comment gives the HTTP status the API answers with.
const (
	// KindInvalid: a request, argument or value is malformed (400).
	KindInvalid Kind = "invalid"
	// KindUsage: the command line or the HTTP method is wrong (400; the CLI
	// exits 2).
	KindUsage Kind = "usage"
	// KindUnauthenticated: no token, or an unknown or revoked one (401).
	KindUnauthenticated Kind = "unauthenticated"
	// KindForbidden: the caller's role, line scope or a policy refuses the
	// action (403).
	KindForbidden Kind = "forbidden"
	// KindNotFound: the named thing does not exist (404).
	KindNotFound Kind = "not_found"
	// KindConflict: the action conflicts with the current state: a
	// concurrent change, a reference, a frozen or tampered record, a gate
	// that was not passed (409).
	KindConflict Kind = "conflict"
	// KindExpired: the thing existed but its lifetime is over (410).
	KindExpired Kind = "expired"
	// KindTooLarge: a body, batch or quota limit was exceeded (413).
	KindTooLarge Kind = "too_large"
	// KindUnprocessable: well-formed input that a domain rule refuses: a
	// spec, contract, model or data that is not usable (422).
	KindUnprocessable Kind = "unprocessable"
	// KindRateLimited: too many requests or queued jobs; retry later (429).
	KindRateLimited Kind = "rate_limited"
	// KindInternal: an unexpected failure inside AML (500).
	KindInternal Kind = "internal"
	// KindFailed: a job, trainer or command that AML ran failed; the
	// message says why (500).
	KindFailed Kind = "failed"
	// KindUpstream: a system AML talks to (a line's controller) failed to
	// do what it was asked (502).
	KindUpstream Kind = "upstream"
	// KindUnavailable: the store is unreachable or its schema does not fit
	// this binary; retry or upgrade (503).
	KindUnavailable Kind = "unavailable"
)

// kindDocs describes every kind, in the order [Kinds] returns them.
var kindDocs = []struct {
	Kind Kind
	Doc  string
}{
	{KindInvalid, "a request, argument or value is malformed"},
	{KindUsage, "the command line or the HTTP method is wrong"},
	{KindUnauthenticated, "no token, or an unknown or revoked one"},
	{KindForbidden, "the caller's role, line scope or a policy refuses the action"},
	{KindNotFound, "the named thing does not exist"},
	{KindConflict, "the action conflicts with the current state (a concurrent change, a reference, a frozen or tampered record, a gate not passed)"},
	{KindExpired, "the thing existed but its lifetime is over"},
	{KindTooLarge, "a body, batch or quota limit was exceeded"},
	{KindUnprocessable, "well-formed input that a domain rule refuses (a spec, contract, model or data that is not usable)"},
	{KindRateLimited, "too many requests or queued jobs; retry later"},
	{KindInternal, "an unexpected failure inside AML"},
	{KindFailed, "a job, trainer or command that AML ran failed; the message says why"},
	{KindUpstream, "a system AML talks to (a line's controller) failed to do what it was asked"},
	{KindUnavailable, "the store is unreachable or its schema does not fit this binary; retry or upgrade"},
}

// Kinds lists every kind.
func Kinds() []Kind {
	out := make([]Kind, len(kindDocs))
	for i, k := range kindDocs {
		out[i] = k.Kind
	}
	return out
}

// Doc is a one-line description of k ("" for an unknown kind).
func (k Kind) Doc() string {
	for _, d := range kindDocs {
		if d.Kind == k {
			return d.Doc
		}
	}
	return ""
}

// Stable error codes. They are part of the public contract (CLI, API, MCP):
// never rename one, only add. Every code of the repository is declared
// here and registered in [registry] with its kind; packages that own a code
// re-export it under their own name (e.g. govern.CodeWriteDenied).
// docs/errors.md lists them all (go generate ./internal/core).
const (
	CodeInternal         = "AML_INTERNAL"
	CodeUsage            = "AML_USAGE"
	CodeNotFound         = "AML_NOT_FOUND"
	CodeConflict         = "AML_CONFLICT"
	CodeInvalidArgument  = "AML_INVALID_ARGUMENT"
	CodeIngestInvalid    = "AML_INGEST_INVALID"
	CodeSchemaTooNew     = "AML_SCHEMA_TOO_NEW"
	CodeSchemaMismatch   = "AML_SCHEMA_MISMATCH"
	CodeNonFinite        = "AML_NON_FINITE"
	CodeStoreUnavailable = "AML_STORE_UNAVAILABLE"
	CodeSpecInvalid      = "AML_SPEC_INVALID"
	CodeDatasetTampered  = "AML_DATASET_TAMPERED"
	CodeStageRace        = "AML_STAGE_RACE"
	CodeEnvBusy          = "ENV_BUSY"
	// CodeUnitContractInvalid: a unit contract (scale/offset/unit) is
	// missing or unusable; AML never falls back to scale 1 / offset 0.
	CodeUnitContractInvalid = "UNIT_CONTRACT_INVALID"
	CodeQuotaExceeded       = "AML_QUOTA_EXCEEDED"
	CodeDatasetEmpty        = "AML_DATASET_EMPTY"
	CodeInUse               = "AML_IN_USE"
	CodeJobConflict         = "AML_JOB_CONFLICT"
	CodeQueueFull           = "AML_QUEUE_FULL"
	CodeModelTampered       = "AML_MODEL_TAMPERED"
	CodeGateFailed          = "AML_GATE_FAILED"
	CodeJobTimeout          = "AML_JOB_TIMEOUT"
	CodeJobStalled          = "AML_JOB_STALLED"
	CodeTrainerFailed       = "AML_TRAINER_FAILED"
	CodeWorkerLost          = "AML_WORKER_LOST"
	CodeForbidden           = "AML_FORBIDDEN"
	CodePhysicsInvalid      = "AML_PHYSICS_INVALID"
	CodePhysicsNonFinite    = "AML_PHYSICS_NON_FINITE"
	CodeModelInvalid        = "AML_MODEL_INVALID"
	CodeAuditTampered       = "AML_AUDIT_TAMPERED"
	CodeContractInvalid     = "AML_CONTRACT_INVALID"
	CodeSceneFrozen         = "AML_SCENE_FROZEN"
	CodeCertInvalid         = "AML_CERT_INVALID"
	CodeCertRefused         = "AML_CERT_REFUSED"
	CodeCertExpired         = "AML_CERT_EXPIRED"

	// Codes owned by one package (re-exported there).

	CodeUnauthenticated      = "AML_UNAUTHENTICATED"        // auth
	CodeRateLimited          = "AML_RATE_LIMITED"           // api
	CodeStreamLimit          = "AML_STREAM_LIMIT"           // api
	CodeBodyTimeout          = "AML_BODY_TIMEOUT"           // api
	CodeRemoteUnsupported    = "AML_REMOTE_UNSUPPORTED"     // cmd/aml
	CodeArtifactTampered     = "AML_ARTIFACT_TAMPERED"      // artifact
	CodeEnvRebuildFailed     = "ENV_REBUILD_FAILED"         // envlease
	CodePredictInvalid       = "AML_PREDICT_INVALID"        // trainer/exec
	CodeTrainerStartFailed   = "AML_TRAINER_START_FAILED"   // trainer/exec
	CodeShadowMissing        = "AML_SHADOW_MISSING"         // registry
	CodeTwinGateFailed       = "AML_TWIN_GATE_FAILED"       // registry
	CodeLineageUnverified    = "AML_LINEAGE_UNVERIFIED"     // registry, app
	CodeCertKeyMismatch      = "AML_CERT_KEY_MISMATCH"      // store/twinstore
	CodeCertKeyRetired       = "AML_CERT_KEY_RETIRED"       // store/twinstore
	CodeSnapshotTampered     = "AML_SNAPSHOT_TAMPERED"      // store/twinstore
	CodeTrialTampered        = "AML_TRIAL_TAMPERED"         // store/twinstore
	CodeObjectiveTampered    = "AML_OBJECTIVE_TAMPERED"     // store/twinstore
	CodeSnapshotQuality      = "AML_SNAPSHOT_QUALITY"       // twin/snapshot
	CodeBindingMismatch      = "AML_BINDING_MISMATCH"       // twin/snapshot
	CodeWriteDenied          = "AML_WRITE_DENIED"           // twin/govern
	CodeWriteFailed          = "AML_WRITE_FAILED"           // twin/govern
	CodeTwinModelUnsupported = "AML_TWIN_MODEL_UNSUPPORTED" // twin/engine
	CodeTwinWindowInvalid    = "AML_TWIN_WINDOW_INVALID"    // twin/engine
	CodeTwinSceneMismatch    = "AML_TWIN_SCENE_MISMATCH"    // twin/engine
)

// Codes of governed writes on human time (twin/govern).
const (
	// CodeClockFault: a write-history entry is dated after the wall clock.
	CodeClockFault = "AML_CLOCK_FAULT"
	// CodeCertRevalidation: the re-run of a certificate's moves from a
	// fresh snapshot at execution failed.
	CodeCertRevalidation = "AML_CERT_REVALIDATION_FAILED"
	// CodeLineWriterUnavailable: the governed writer configured for a
	// line could not be opened.
	CodeLineWriterUnavailable = "AML_LINE_WRITER_UNAVAILABLE"
)

// CodeInfo is one registered code: its kind and a one-line description.
type CodeInfo struct {
	Code string
	Kind Kind
	Doc  string
}

// registry is the one table of every error code. A code used anywhere must
// be here (TestCodesRegistered walks the tree to make sure).
var registry = []CodeInfo{
	{CodeInternal, KindInternal, "an unexpected failure inside AML; also any error that carries no AML code"},
	{CodeUsage, KindUsage, "the command line is wrong (unknown flag, missing argument), or the HTTP method is not allowed on the route (answered 405)"},
	{CodeNotFound, KindNotFound, "the named record, route, file or model does not exist"},
	{CodeConflict, KindConflict, "the action conflicts with the record's current state (e.g. a certificate transition not allowed from its status)"},
	{CodeInvalidArgument, KindInvalid, "an argument, flag, query parameter or JSON field is missing or malformed"},
	{CodeIngestInvalid, KindUnprocessable, "an ingest file or batch does not parse or breaks its schema (Field names file:line)"},
	{CodeSchemaTooNew, KindUnavailable, "the store's schema is newer than this binary: upgrade aml"},
	{CodeSchemaMismatch, KindUnavailable, "the store's schema differs from the one this binary expects at the same version"},
	{CodeNonFinite, KindInvalid, "a value is NaN or ±Inf where a finite number is required"},
	{CodeStoreUnavailable, KindUnavailable, "the store (or a server the CLI talks to) cannot be reached"},
	{CodeSpecInvalid, KindUnprocessable, "a dataset, benchmark or job spec fails validation; Problems lists every finding"},
	{CodeDatasetTampered, KindUnprocessable, "a dataset's files no longer match the hash recorded for them"},
	{CodeStageRace, KindConflict, "a model's stage was changed by someone else at the same time"},
	{CodeEnvBusy, KindConflict, "a trainer environment is in use or being locked by another process; retry later"},
	{CodeUnitContractInvalid, KindUnprocessable, "a unit contract (scale/offset/unit) is missing or unusable; AML never falls back to scale 1 / offset 0"},
	{CodeQuotaExceeded, KindTooLarge, "a request body, ingest batch or storage quota is over its limit"},
	{CodeDatasetEmpty, KindUnprocessable, "the selection holds no usable data (no runs, no samples, a window full of gaps)"},
	{CodeInUse, KindConflict, "the record is referenced by others and cannot be deleted; delete those first"},
	{CodeJobConflict, KindConflict, "the job is not in a state that allows the action (e.g. retrying an unfinished job)"},
	{CodeQueueFull, KindRateLimited, "the job queue holds its maximum of queued and running jobs; wait or cancel some"},
	{CodeModelTampered, KindConflict, "a model's artifact is missing or no longer matches the hash it was evaluated with"},
	{CodeGateFailed, KindConflict, "a model did not pass the gate required for the stage change"},
	{CodeJobTimeout, KindFailed, "a job ran longer than its timeout"},
	{CodeJobStalled, KindFailed, "a job reported no progress for longer than its stall limit"},
	{CodeTrainerFailed, KindFailed, "the trainer of a job failed (non-zero exit, protocol error, bad output)"},
	{CodeWorkerLost, KindFailed, "the worker running a job stopped or lost its resources; the job is retried or interrupted"},
	{CodeForbidden, KindForbidden, "the caller's role or line scope does not allow the action, or a browser request was refused: a foreign Host in dev mode, another origin, a missing or wrong CSRF token (Field host, origin or csrf)"},
	{CodePhysicsInvalid, KindUnprocessable, "a physics model source does not parse or fails a static check; each Field is file:line:col"},
	{CodePhysicsNonFinite, KindUnprocessable, "a physics simulation step produced NaN or ±Inf; Field names the variable"},
	{CodeModelInvalid, KindUnprocessable, "a model artifact is missing, unreadable, of an unknown format or does not fit the dataset"},
	{CodeAuditTampered, KindConflict, "the audit log fails verification: an entry was changed, removed or reordered"},
	{CodeContractInvalid, KindUnprocessable, "a twin contract (scene, binding, objective, trial, certificate) fails validation; each Field is a JSON path"},
	{CodeSceneFrozen, KindConflict, "a change to a frozen scene contract was attempted; derive a new version instead"},
	{CodeCertInvalid, KindUnprocessable, "a certificate is malformed, its hash or signature does not verify, or another key signed it"},
	{CodeCertRefused, KindUnprocessable, "a certificate was not issued because its input does not qualify; Problems lists every reason"},
	{CodeCertExpired, KindExpired, "the certificate's expiresAt has passed"},
	{CodeUnauthenticated, KindUnauthenticated, "a missing, malformed, unknown or revoked token"},
	{CodeRateLimited, KindRateLimited, "the caller is over its request rate; retry after the Retry-After delay"},
	{CodeBodyTimeout, KindInvalid, "the request body did not arrive within the server's body timeout (answered 408; aml serve --body-timeout, --csv-timeout)"},
	{CodeStreamLimit, KindRateLimited, "the token already holds the most event streams (/api/v1/events) open at once that one token may; close one first"},
	{CodeRemoteUnsupported, KindInternal, "the CLI command has no API route and cannot run with --server (raised by the CLI only)"},
	{CodeArtifactTampered, KindInternal, "a stored artifact's bytes (a chunk, a file or the tree) do not match their recorded sha256"},
	{CodeEnvRebuildFailed, KindFailed, "a trainer environment's rebuild command could not be started or exited non-zero"},
	{CodePredictInvalid, KindUnprocessable, "an executable predictor failed or produced an unusable answer (missing or wrong-size output, NaN, timeout)"},
	{CodeTrainerStartFailed, KindFailed, "a trainer could not be started (command not found or not executable, sandbox setup failed)"},
	{CodeShadowMissing, KindConflict, "a twin model cannot be promoted: no shadow evidence is stored for it"},
	{CodeTwinGateFailed, KindConflict, "a twin model cannot be promoted: its latest twin gate evaluation did not pass, or there is none"},
	{CodeLineageUnverified, KindConflict, "the model's dataset lineage is not verified (recipe versions and run context segments recorded for its runs): it may not go to production for the twin, drive the optimiser or a certificate"},
	{CodeCertKeyMismatch, KindConflict, "this process's certificate signing key is not the deployment's registered key"},
	{CodeCertKeyRetired, KindConflict, "this process's certificate signing key was rotated out: it no longer signs; the message names the current key to copy into the data directory"},
	{CodeSnapshotTampered, KindUnprocessable, "a stored twin snapshot no longer matches its hash or its row"},
	{CodeTrialTampered, KindUnprocessable, "a stored virtual trial no longer matches its hash or its row"},
	{CodeObjectiveTampered, KindUnprocessable, "a stored objective profile no longer matches its hash or its row"},
	{CodeSnapshotQuality, KindUnprocessable, "the data a snapshot would be taken from is stale, missing or lacks a control's value; Problems names each variable"},
	{CodeBindingMismatch, KindUnprocessable, "a scene variable does not match the node it is bound to, or is not bound"},
	{CodeWriteDenied, KindForbidden, "a governed write was denied; the result's reason says why"},
	{CodeWriteFailed, KindUpstream, "a governed write was allowed but did not complete with a verified readback"},
	{CodeClockFault, KindInternal, "a write-history entry is dated after the wall clock (beyond a small tolerance): a clock is wrong; such an entry is refused at insert, and a governed write facing one is denied (reason CLOCK_FAULT)"},
	{CodeCertRevalidation, KindConflict, "executing a certificate whose snapshot is no longer fresh re-ran its moves from a fresh snapshot and the re-run failed (a constraint at a step with its values, no improvement on holding, out of distribution, unusable fresh data); nothing was written"},
	{CodeLineWriterUnavailable, KindUpstream, "the governed writer this process's operator configured for the line (aml serve --line-writers, or the CLI's --opcua-endpoint and --map) could not be opened: its server is unreachable or refused the session; nothing was written"},
	{CodeTwinModelUnsupported, KindUnprocessable, "the model is not a twin model (a format other than aml.hybrid/1, aml.statespace/1, aml.arx/1, aml.narx/1, aml.nss/1, aml.static-response/1 or aml.static-forest/1; a dynamic model without history and horizon; a static model without a control input)"},
	{CodeTwinWindowInvalid, KindUnprocessable, "a snapshot window cannot start a rollout (wrong grid, too short, a needed column missing)"},
	{CodeTwinSceneMismatch, KindUnprocessable, "the scene, objective or snapshot does not fit the model"},
}

var byCode = func() map[string]CodeInfo {
	m := make(map[string]CodeInfo, len(registry))
	for _, c := range registry {
		if _, dup := m[c.Code]; dup {
			panic("core: error code " + c.Code + " registered twice")
		}
		if c.Kind.Doc() == "" {
			panic(fmt.Sprintf("core: error code %s has unknown kind %q", c.Code, c.Kind))
		}
		m[c.Code] = c
	}
	return m
}()

// Lookup returns the registration of code.
func Lookup(code string) (CodeInfo, bool) {
	c, ok := byCode[code]
	return c, ok
}

// Codes lists every registered code, sorted by code.
func Codes() []CodeInfo {
	out := append([]CodeInfo(nil), registry...)
	sort.Slice(out, func(i, j int) bool { return out[i].Code < out[j].Code })
	return out
}

// KindOfCode is the kind of code; KindInternal for an unregistered code
// (one a newer server sent, say).
func KindOfCode(code string) Kind {
	if c, ok := byCode[code]; ok {
		return c.Kind
	}
	return KindInternal
}

// Kind is the kind of e's code.
func (e *Error) Kind() Kind { return KindOfCode(e.Code) }

// KindOf is the kind of the first *Error in err's chain, KindInternal for
// any other non-nil error, "" for nil.
func KindOf(err error) Kind {
	if err == nil {
		return ""
	}
	var ae *Error
	if errors.As(err, &ae) {
		return ae.Kind()
	}
	return KindInternal
}

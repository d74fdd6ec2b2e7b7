package api

import (
	"net/http"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/twin/contract"
)

// route is one row of the route table: the router, the role checks and the
// OpenAPI document are all built from these.
type route struct {
	method, path string
	act          auth.Action
	tag, summary string
	// query documents the query parameters: name → description.
	query [][2]string
	// in is a value of the request body's type (nil: no body); inType
	// overrides the media type (default application/json).
	in     any
	inType string
	// out is a value of the response type (documentation only); outType
	// overrides the media type.
	out     any
	outType string
	status  int // success status (default 200)
	heavy   bool
	h       func(*call) (any, error)
}

func q(name, desc string) [2]string { return [2]string{name, desc} }

// table is every API route.
func (s *Server) table() []route {
	G, P, U, D := http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete
	R := auth.ActRead
	lineQ := q("line", "only this line")
	limitQ := q("limit", "at most this many")
	return []route{
		// Data: lines, runs, nodes, time series, ingest.
		{method: G, path: "/info", act: R, tag: "data", summary: "Data directory, schema version and build", h: s.info},
		{method: G, path: "/lines", act: R, tag: "data", summary: "Lines in the caller's scope", h: s.listLines},
		{method: G, path: "/runs", act: R, tag: "data", summary: "List runs", query: [][2]string{lineQ, q("product", "only this product"), q("recipe", "only this recipe"), q("status", "active, ended or aborted")}, h: s.listRuns},
		{method: G, path: "/runs/{id}", act: R, tag: "data", summary: "A run with its context segments and sample counts per node", h: s.showRun},
		{method: G, path: "/nodes", act: R, tag: "data", summary: "List nodes (signals)", query: [][2]string{lineQ}, h: s.listNodes},
		{method: G, path: "/ts", act: R, tag: "data", summary: "One node's samples (a page with a cursor) or bucketed aggregates",
			query: [][2]string{q("node", "node id (required)"), q("run", "only this run"), lineQ, q("product", "only this product"), q("recipe", "only this recipe"),
				q("from", "start, inclusive (epoch ms or RFC 3339)"), q("to", "end, inclusive"), q("after", "cursor: strictly after this time"),
				q("limit", "page size (default 10000, at most 100000)"), q("bucket", "aggregate into buckets of this width (Go duration, e.g. 1s)")}, h: s.queryTS},
		{method: P, path: "/ingest/samples", act: auth.ActIngest, tag: "data", summary: "Ingest a JSON batch of samples (one transaction)", in: ingestBatch{}, out: ingestResult{}, h: s.ingestJSON},
		{method: P, path: "/ingest/csv", act: auth.ActIngest, tag: "data", summary: "Ingest a CSV upload, streamed (wide or long; docs/csv-ingest.md)", inType: "text/csv",
			query: [][2]string{q("line", "line id (required)"), q("product", "product id (required)"), q("recipe", "recipe id (required)"), q("run", "run id (required)"),
				q("timeCol", "time column"), q("timeUnit", "ms, s or rfc3339"), q("period", "sample period of wide files without a time column (Go duration)"),
				q("start", "time of the first row with period"), q("timeOffset", "added to every time (Go duration)"), q("unit", "node=unit of a created node (repeatable)"),
				q("ignoreCol", "column not to ingest (repeatable)"), q("skipBad", "skip bad rows instead of failing")}, h: s.ingestCSV},

		// Datasets.
		{method: P, path: "/datasets", act: auth.ActDataset, tag: "datasets", summary: "Build a dataset from a spec (docs/dataset-format.md)", in: dataset.Spec{}, status: http.StatusCreated, heavy: true,
			query: [][2]string{q("maxWindows", "refuse more windows than this"), q("maxBytesMiB", "refuse a larger dataset")}, h: s.buildDataset},
		{method: G, path: "/datasets", act: R, tag: "datasets", summary: "List datasets", query: [][2]string{lineQ, q("product", "only this product"), q("recipe", "only this recipe")}, h: s.listDatasets},
		{method: G, path: "/datasets/{id}", act: R, tag: "datasets", summary: "A dataset with its manifest and references", h: s.showDataset},
		{method: G, path: "/datasets/{id}/verify", act: R, tag: "datasets", summary: "Recompute the dataset's hash from its files", h: s.verifyDataset},
		{method: G, path: "/datasets/{id}/report", act: R, tag: "datasets", summary: "Per-node statistics, cleaning counts, lags, runs", h: s.datasetReport},
		{method: D, path: "/datasets/{id}", act: auth.ActDataset, tag: "datasets", summary: "Delete a dataset (refused while referenced)", h: s.deleteDataset},

		// Jobs.
		{method: P, path: "/jobs", act: auth.ActJob, tag: "jobs", summary: "Submit a training job (queued for the workers)", in: submitReq{}, status: http.StatusCreated, h: s.submitJob},
		{method: G, path: "/jobs", act: R, tag: "jobs", summary: "List jobs, newest first", query: [][2]string{q("status", "only jobs in this status"), q("dataset", "only jobs of this dataset"), limitQ}, h: s.listJobs},
		{method: G, path: "/jobs/{id}", act: R, tag: "jobs", summary: "A job", h: s.showJob},
		{method: G, path: "/jobs/{id}/logs", act: R, tag: "jobs", summary: "The trainer log (all rotated parts, oldest first) from a byte offset", outType: "text/plain",
			query: [][2]string{q("offset", "skip this many bytes (follow a log: pass X-Log-Next-Offset of the previous answer)")}, h: s.jobLogs},
		{method: P, path: "/jobs/{id}/cancel", act: auth.ActJob, tag: "jobs", summary: "Cancel a queued or running job", h: s.cancelJob},
		{method: P, path: "/jobs/{id}/retry", act: auth.ActJob, tag: "jobs", summary: "Retry a finished job as a new experiment", status: http.StatusCreated, h: s.retryJob},

		// Models.
		{method: G, path: "/models", act: R, tag: "models", summary: "List models, newest first", query: [][2]string{lineQ, q("stage", "only this stage"), q("recipe", "only this recipe"), q("purpose", "only this purpose"), q("dataset", "only models of this dataset")}, h: s.listModels},
		{method: G, path: "/models/{id}", act: R, tag: "models", summary: "Model card: metrics, gates, lineage, stage history", h: s.showModel},
		{method: P, path: "/models/{id}/promote", act: auth.ActModelStage, tag: "models", summary: "Move a model to shadow or production (production: approver or admin)", in: promoteReq{}, h: s.promoteModel},
		{method: P, path: "/models/{id}/retire", act: auth.ActModelStage, tag: "models", summary: "Retire a model", in: retireReq{}, h: s.retireModel},
		{method: P, path: "/models/{id}/predict", act: R, tag: "models", summary: "Predict K steps of a run from time T (training's cleaning and alignment; conformal intervals)", in: predictReq{}, heavy: true, h: s.predict},

		// Scenes and objectives.
		{method: G, path: "/scenes", act: R, tag: "twin", summary: "List scene contracts", query: [][2]string{lineQ}, h: s.listScenes},
		{method: P, path: "/scenes", act: auth.ActTrial, tag: "twin", summary: "Store a scene contract as a draft (replaces a draft of the same id and version)", in: contract.SceneContract{},
			query: [][2]string{q("preset", "default-injection: store the built-in injection-moulding scene (no body)")}, status: http.StatusCreated, h: s.putScene},
		{method: G, path: "/scenes/{id}", act: R, tag: "twin", summary: "A scene contract (latest version unless version)", query: [][2]string{q("version", "scene version")}, h: s.showScene},
		{method: P, path: "/scenes/{id}/freeze", act: auth.ActSceneFreeze, tag: "twin", summary: "Freeze a draft scene (compare-and-set on the reviewed hash)", in: freezeReq{}, h: s.freezeScene},
		{method: P, path: "/objectives", act: auth.ActTrial, tag: "twin", summary: "Store an objective profile", in: contract.ObjectiveProfile{},
			query: [][2]string{q("preset", "default-injection: store the built-in objective (no body)")}, status: http.StatusCreated, h: s.putObjective},
		{method: G, path: "/objectives/{id}", act: R, tag: "twin", summary: "An objective profile with its hash", h: s.showObjective},

		// Snapshots, trials, optimisation, gate.
		{method: P, path: "/snapshots", act: auth.ActTrial, tag: "twin", summary: "Take a snapshot of a scene's variables from the store and record it", in: snapshotReq{}, status: http.StatusCreated, heavy: true, h: s.takeSnapshot},
		{method: G, path: "/snapshots", act: R, tag: "twin", summary: "List snapshots, newest first", query: [][2]string{lineQ, limitQ}, h: s.listSnapshots},
		{method: G, path: "/snapshots/{id}", act: R, tag: "twin", summary: "A stored snapshot (verified against its hash)", h: s.showSnapshot},
		{method: P, path: "/trials", act: auth.ActTrial, tag: "twin", summary: "Run one virtual trial (never written to the machine) and store it", in: trialReq{}, status: http.StatusCreated, heavy: true, h: s.runTrial},
		{method: G, path: "/trials", act: R, tag: "twin", summary: "List stored trials", query: [][2]string{lineQ, q("model", "only this model"), q("gateEval", "only this gate evaluation"), limitQ}, h: s.listTrials},
		{method: G, path: "/trials/{id}", act: R, tag: "twin", summary: "A stored trial", h: s.showTrial},
		{method: P, path: "/optimize", act: auth.ActTrial, tag: "twin", summary: "Search the lowest-cost passing setpoint move and store its trial", in: optimizeReq{}, heavy: true, h: s.optimize},
		{method: P, path: "/gate", act: auth.ActTrial, tag: "twin", summary: "Evaluate the twin acceptance gate with measured inputs and store it", in: gateReq{}, heavy: true, h: s.evaluateGate},
		{method: G, path: "/gate/{model}", act: R, tag: "twin", summary: "The model's latest twin gate evaluation", h: s.latestGate},
		{method: P, path: "/shadow", act: auth.ActTrial, tag: "twin", summary: "Collect and store a model's shadow evidence", in: shadowReq{}, heavy: true, h: s.shadow},
		{method: G, path: "/shadow/{model}", act: R, tag: "twin", summary: "A model's stored shadow evidence", h: s.listShadow},
		{method: P, path: "/calibrate", act: auth.ActTrial, tag: "twin", summary: "Measure recalibration signals and queue a recalibration when the policy says so", in: calibrateReq{}, heavy: true, h: s.calibrate},
		{method: G, path: "/calibrations", act: R, tag: "twin", summary: "Recalibration requests, newest first", query: [][2]string{lineQ}, h: s.listCalibrations},

		// Certificates and channels.
		{method: G, path: "/certificates", act: R, tag: "governance", summary: "List certificates, each verified", query: [][2]string{lineQ, q("status", "ISSUED, APPROVED, EXECUTED, EXPIRED or REVOKED"), limitQ}, h: s.listCerts},
		{method: G, path: "/certificates/key", act: R, tag: "governance", summary: "The server's certificate public key (PEM)", h: s.certKey},
		{method: P, path: "/certificates", act: auth.ActCertRequest, tag: "governance", summary: "Issue a signed certificate for a passing trial (queued for a person to approve)", in: issueReq{}, status: http.StatusCreated, h: s.issueCert},
		{method: G, path: "/certificates/{id}", act: R, tag: "governance", summary: "A certificate (verified)", h: s.showCert},
		{method: P, path: "/certificates/{id}/approve", act: auth.ActCertApprove, tag: "governance", summary: "Approve an ISSUED certificate (never by its requester)", h: s.approveCert},
		{method: P, path: "/certificates/{id}/revoke", act: auth.ActCertApprove, tag: "governance", summary: "Revoke an ISSUED or APPROVED certificate", in: revokeReq{}, h: s.revokeCert},
		{method: G, path: "/certificates/{id}/verify", act: R, tag: "governance", summary: "Verify row, hash, signature, audit trail and chain", h: s.verifyCert},
		{method: P, path: "/certificates/{id}/execute", act: auth.ActWrite, tag: "governance", summary: "Write an APPROVED certificate's first step through the fail-closed write guard", in: executeReq{}, h: s.executeCert},
		{method: G, path: "/channels/{line}", act: R, tag: "governance", summary: "The channel profile of a line", h: s.showChannel},
		{method: U, path: "/channels/{line}", act: auth.ActWrite, tag: "governance", summary: "Set the channel profile of a line (audited)", in: channelReq{}, h: s.setChannel},

		// Audit.
		{method: G, path: "/audit", act: R, tag: "audit", summary: "Audit entries in seq order", query: [][2]string{q("after", "only entries after this seq"), limitQ, q("subject", "only entries about this subject")}, h: s.listAudit},
		{method: G, path: "/audit/verify", act: R, tag: "audit", summary: "Verify the hash chain", query: [][2]string{q("expectHead", "also require this head (SEQ:HASH)")}, h: s.verifyAudit},

		// Administration.
		{method: G, path: "/tokens", act: auth.ActAdmin, tag: "admin", summary: "List API tokens (never their secrets)", h: s.listTokens},
		{method: P, path: "/tokens", act: auth.ActAdmin, tag: "admin", summary: "Create an API token (returned once)", in: tokenReq{}, status: http.StatusCreated, h: s.createToken},
		{method: D, path: "/tokens/{id}", act: auth.ActAdmin, tag: "admin", summary: "Revoke an API token", h: s.revokeToken},
		{method: P, path: "/retention", act: auth.ActAdmin, tag: "admin", summary: "Apply the retention policy", in: retentionReq{}, h: s.retention},

		// Live connectors.
		{method: G, path: "/connectors", act: R, tag: "data", summary: "Live connectors (OPC UA, MQTT) in the caller's lines: state, counters, gaps, staleness", query: [][2]string{lineQ}, out: connectorList{}, h: s.listConnectors},

		// Live events.
		{method: G, path: "/events", act: R, tag: "events", summary: "Server-Sent Events: dataset built, job state and progress, model stage, trial done, certificate status, connector state and gaps (the caller's lines)", outType: "text/event-stream",
			query: [][2]string{q("kinds", "comma-separated event kinds (default all)"), q("id", "only events about this id")}, h: s.events},
	}
}

package mcp

// tool is one row of the tool table: the MCP tool's name, title,
// description and behaviour hints, and the name of the application
// operation (internal/app) it calls. Its input schema is the op's request
// type and its output schema the op's response type, so a tool takes the
// same fields, under the same names, as the API route and the CLI command
// of the same op.
type tool struct {
	name, title, description string
	hints                    hints
	op                       string
}

// tools is the whole agent surface. There is deliberately no tool for
// approving, revoking or executing certificates, promoting or retiring
// models, freezing scenes or setting channels: no row names cert.approve,
// cert.revoke, cert.execute, model.promote, model.retire, scene.freeze or
// channel.set, and a test checks that every op named here is one the agent
// role may take.
var tools = []tool{
	{"aml_node_catalog", "Node catalog",
		"List the signals (nodes) of the lines in your scope with unit, normal range and kind: the building blocks of a dataset spec. Filter with line.",
		readOnly, "node.list"},
	{"aml_line_apply", "Apply a line file",
		"State the metadata of nodes of one line at once ({\"line\": L, \"nodes\": [{id, writable, unit, min, max, physicalMeaning}]}): writable marks a setpoint the twin may write (kind dcw), min/max its normal range. A field left out keeps the node's value. All nodes apply or none; audited.",
		hints{idempotent: true}, "line.apply"},
	{"aml_dataset_build", "Build a dataset",
		"Build a training dataset from a spec ({\"spec\": {lineId, productId, recipeId, nodes, beatMs, historySteps, horizonSteps, split, purpose, ...}}, docs/dataset-format.md): clean (state, range, Hampel), align to the beat grid, window, split by run, normalise, hash and register it. Returns the dataset (its id, sha256, windows per split), shapes, lineage and dropped runs; inspect it with aml_dataset_stats, train with aml_job_submit.",
		additive, "dataset.build"},
	{"aml_dataset_stats", "Dataset statistics",
		"A dataset's report (id: the dataset id): per-node summaries, cleaning counts, lag estimates (control → target), run profiles and dropped runs.",
		readOnly, "dataset.report"},
	{"aml_job_submit", "Submit a training job",
		"Queue a training job (one experiment) on a dataset (datasetId) with a trainer (native, e.g. linear_state_space@1 or hybrid_residual@1, or a registered external one, ext:NAME; exec:PATH is refused here) and its params. A native trainer's params are checked against its JSON schema before queueing (an unknown, mistyped or out-of-range field is refused as params.<name>): read the schema with aml_trainer_show (docs/trainers.md); an external trainer's params are not checked. A worker (aml serve or aml worker) runs it; metrics and gates are computed by the platform. Poll aml_job_status, read aml_job_logs.",
		additive, "job.submit"},
	{"aml_trainer_show", "Trainer params",
		"A trainer (name: e.g. one_step@1, linear_state_space@1, hybrid_residual@1, or ext:NAME): its kind, model formats and the JSON schema of its params (description, type, default and range of each), the one aml_job_submit checks a native trainer's params against.",
		readOnly, "trainer.show"},
	{"aml_job_status", "Job status",
		"A job's status, stage, progress, platform metrics, gate result and registered model (id: the job id).",
		readOnly, "job.show"},
	{"aml_job_logs", "Job logs",
		"Read a job's trainer log (all rotated parts, oldest first) from a byte offset; continue with nextOffset while more is true.",
		readOnly, "job.logs"},
	{"aml_job_cancel", "Cancel a job",
		"Cancel a queued job at once, or stop a running one (its process tree is killed). Irreversible; a finished job is refused.",
		hints{destructive: true, idempotent: true}, "job.cancel"},
	{"aml_leaderboard", "Model leaderboard",
		"Registered models of a line/product/recipe ranked by the platform's test metrics (gates passed first, then test NRMSE), with each experiment's parent and change note. With run (and optionally models, at most 8): each model's validation view on that run — free-run (every NaN-free segment) and k-step-ahead fit % per target and the series to overlay.",
		readOnly, "model.compare"},
	{"aml_model_reference", "Model reference prediction",
		"Shadow reference before tuning: predict the targets of a run over the model's horizon from a given instant, with the run's own controls (baseline) and with proposed control setpoints held (controls), plus the conformal interval. Without id, the production model of line/product/recipe is used. Nothing is stored or written.",
		readOnly, "model.reference"},
	{"twin_scene_list", "List scenes",
		"List the twin scene contracts of your lines (optionally of one line) with status (draft or frozen) and content hash.",
		readOnly, "scene.list"},
	{"twin_scene_read", "Read a scene",
		"Read a twin scene contract (id, optional version) with its content hash: variables by role with units and ranges, constraints, write policy, objective profiles. List the scenes with twin_scene_list.",
		readOnly, "scene.show"},
	{"twin_scene_draft", "Draft a scene from a model",
		"Draft a scene file (scene contract + objective profile) from a model the twin runs: its controls on writable nodes with their ranges, its targets with hard-range constraints from the nodes' ranges, units, a conservative write policy; notes say what a person must decide. Nothing is stored: edit it, check it with twin_scene_check, store it with the CLI or API.",
		readOnly, "scene.draft"},
	{"twin_scene_check", "Check a scene file",
		"Check a scene file's text (YAML or JSON) in one pass: every contract rule, the bindings of its variables to the line's nodes (writable setpoints with ranges, units) and, with model, that the model runs it. Returns every problem with its path at once.",
		readOnly, "scene.check"},
	{"twin_snapshot_create", "Take a snapshot",
		"Take and store a snapshot of a scene's variables from the live store (optionally as of a past instant at, with a model's state estimate): values, freshness, completeness, the recent window. Trials and optimisations start from a snapshot.",
		additive, "snapshot.take"},
	{"twin_trial_run", "Run a virtual trial",
		"Roll a twin model out from a snapshot with a candidate setpoint move (set, held; or the whole candidate trajectory) and compare with holding the setpoints: interval tube, every scene constraint, OOD, cost. Stored; never executed on the machine (candidateExecuted is false).",
		additive, "trial.run"},
	{"mpc_optimize", "Optimise setpoints (MPC)",
		"Search the setpoint move with the lowest cost that passes every constraint, the uncertainty and the OOD checks within the trust region and write policy; the best trial is stored as record (certify it with twin_certificate_request). Never executed on the machine.",
		additive, "optimize"},
	{"twin_gate_evaluate", "Evaluate the twin gate",
		"Apply the twin acceptance profile to measured inputs (stored accuracy and coverage, fresh trials on replayed test-run snapshots, stored shadow evidence) and store the result. A pass does not promote: a person does.",
		additive, "gate.evaluate"},
	{"twin_calibration_request", "Request recalibration",
		"Measure a model's recalibration signals (new runs and rows, drift, recent error) and queue a recalibration when the policy's triggers are reached (deduplicated, with cooldown). The new model arrives as a candidate for a person to promote.",
		hints{idempotent: true}, "calibrate"},
	{"twin_certificate_request", "Request a certificate",
		"Issue a signed recommendation certificate for a stored trial (trial) that passes and improves on the baseline. It is queued with status ISSUED for a person with the approver role; the requester can never approve it, and nothing is written to the machine.",
		additive, "cert.issue"},
	{"twin_envelope_request", "Propose an operating envelope",
		"Propose a signed operating envelope for a bounded_auto line: the frozen scene (scene), the model the supervisor re-optimises with (model), per control the range every target must lie in (bounds: {control: {min, max}}), the node writes allowed per rolling hour (maxMovesPerHour) and a lifetime (ttl, at most 12h). It is queued ISSUED for a person with the approver role; the proposer can never approve it, and nothing is written to the machine. Refused on a hitl_governed line (one approval per move there).",
		additive, "envelope.issue"},
	{"twin_envelope_list", "List operating envelopes",
		"List the operating envelopes of your lines (optionally of one line), newest first, each verified against its signed audit trail: status (ISSUED, APPROVED, REVOKED), expiry, bounds, moves per hour, and why the supervisor stopped one.",
		readOnly, "envelope.list"},
	{"twin_envelope_read", "Read an operating envelope",
		"Read one operating envelope (id) as its signed audit trail has it: bounds, moves per hour, expiry, approver, revocation or stop reason.",
		readOnly, "envelope.show"},
	{"twin_steptest_plan", "Design a step test",
		"Design a plant step test on a frozen scene (scene): steps (up, back, down, back) or a PRBS (signal: prbs, switches, seed) per control (variables), amplitude within the write policy's maxDeltaPerAction and the control's range, hold ≥ the write policy's interval, optionally one control at a time (oneAtATime), around the operating point (base, or the newest snapshot's controls). A plan needing more actions than maxActionsPerRun comes back with problems. Nothing is stored or written.",
		readOnly, "steptest.plan"},
	{"twin_steptest_request", "Propose a step test",
		"Design a step test (the fields of twin_steptest_plan) and issue it as a signed step-test certificate, queued ISSUED for a person with the approver role; the proposer can never approve it, an agent can neither approve nor execute it, and nothing is written to the machine.",
		additive, "steptest.issue"},
	{"twin_steptest_read", "Read a step test",
		"Read one step test (id) as its signed audit trail has it: status, moves and their time slots, bounds, approver, moves executed.",
		readOnly, "steptest.show"},
}

// Package web is AML's web UI: server-rendered pages (html/template) with
// every asset embedded in the binary (go:embed), so the UI works with no
// network beyond the AML server itself — no external scripts, fonts or
// frameworks. Static plots (model card, trial, dataset report) are SVG
// drawn by internal/web/plot on the server; static/live.js (vanilla)
// follows /api/v1/events to update job progress live.
//
// # Interactive charts
//
// The trend and run pages draw their time series with uPlot, vendored
// unchanged from npm (uplot@1.6.32: the minified browser bundle, its
// stylesheet and its MIT licence under static/vendor/uplot/, pinned by
// sha256 in vendor_test.go) and embedded like every asset, so `go build`
// alone builds the UI. static/chart.js fetches each chart's data as JSON
// from GET /ui/data/trend?node=…&run=…&align=start|time, a handler over
// the application's use cases (run.show, node.list, ts.query with a bucket
// width: the same role and line-scope checks as the API). Several signals
// share one chart, each on its own axis with its unit; several runs
// overlay aligned at their start, or sit on an absolute UTC axis. Drag or
// the wheel zooms, shift+wheel and the buttons pan, the legend shows the
// values under the cursor with units, and the focused chart takes + − ← →
// 0 from the keyboard. The server-drawn SVG stays inside the figure for a
// browser without scripts.
//
// # Mounting and sessions
//
// Handler(d) serves /ui/... and is mounted by the API (internal/api) behind
// auth.OptionalMiddleware: a request with a valid token (bearer, or the
// HttpOnly cookie aml_token the login page sets) carries its
// auth.Principal; a page reached without one redirects to /ui/login. The
// login page verifies the typed token with the store's token verifier
// before it sets the cookie (SameSite=Strict, 12 h), so a typo is an error
// on the login page, not a JSON 401 later. A request with a principal
// spends from its token's rate-limit bucket, the one the token's API calls
// spend from (the API's middleware: past it, 429 AML_RATE_LIMITED).
//
// # Pages
//
// Every page reads through the application's ops (line.list, run.list,
// run.show, node.list, ts.query, dataset.show/report, job.list/show,
// scene.list/show, snapshot.list, trial.list, model.show, gate.latest,
// shadow.list, connector.list, cert.list, audit.list, line.overview), so
// role and line scope are the application's; TestWebIsThin names the few
// functions that still read the store and why (none today), and
// TestWebImportsNoDomainWork fails on a file that imports a package that
// does the work (the twin's engine, gate, govern, cert…, eval, dataset,
// jobs, ident/…: internal/archtest) — the pages name the ops' types
// through internal/app.
//
// Lines and runs with trend plots (a node's runs overlaid on the time since
// each run's start, from ts.query's bucket aggregates; a golden-run band,
// mean ± k·σ over runs the user ticks as good, aligned at run start:
// golden.go), dataset reports
// (report.json: summaries, cleaning counts, lag cross-correlation, per-run
// target profiles), the Live page (each line's connectors from their
// status rows, stale ones flagged, and the newest run's trend, its body
// reloaded every 2 s by static/linelive.js), jobs with live progress, model cards (platform metrics,
// acceptance gates, the latest twin gate, shadow evidence, predicted vs
// actual on a test run with the conformal band), scenes, trials (every
// predicted trajectory with its tube, the scene's limits and the baseline
// of holding the setpoints), the certificate inbox, and the audit log.
//
// The models page is the application's model.compare leaderboard in a
// table the browser sorts (static/sorttable.js; the headings are buttons,
// so the keyboard sorts too): test, one-step and validation NRMSE, gates
// with the failed checks, coverage, class, artifact size and training
// time. With a dataset chosen, ticked models are compared on one of its
// runs (/ui/models/compare: model.compare's validation view, free-run and
// k-step fit % per target and the measured series overlaid with each
// model's free-run simulation). The audit page is audit.list newest first,
// a page at a time, filtered by actor, action (or a prefix*), subject and
// time range.
//
// Bad evidence is flagged where it is shown: a coverage outside its target
// ± the measurement's tolerance (app.CoverageCheck, the gates' tolerance)
// in the models table and on the card, a shadow run whose NRMSE or
// coverage is beyond the twin gate profile's bounds (shadow.list's flags
// and profile: the profile of the model's latest twin gate, else the
// newest). A
// certificate's expiry and time left are shown only while it can still be
// approved or executed (app.CertExecution); an expired, revoked, executed
// or unverified one says why it cannot execute instead.
//
// The operator overview (/ui/operator/{line}; /ui/operator lists the
// lines) is the application's line.overview, the API's GET
// /api/v1/lines/{line}/overview: each node's newest value, setpoints (SP)
// first, against its range with an alarm (high, low, stale beyond a
// chosen age, no data), the connectors, the certificates awaiting approval
// or execution with whether they still can, and the last governed writes
// with the value written and read back. Its body reloads every 2 s
// (static/linelive.js, the Live page's script, on the page's fragment).
//
// Predicted vs actual uses the model the way the platform evaluated it:
// consecutive windows of the run, each predicted from H measured rows and
// its F future controls, with the split-conformal band ŷ ± W[f][k] — the
// claim whose coverage the evaluation measured (the page reports the share
// of the run's values inside it).
//
// Trials: the store keeps the trial record, not the engine's TrialDetail
// (all traces and the baseline). The trial page calls trial.recompute,
// which re-runs the engine on the stored snapshot, scene, objective and
// candidate with the trial's own id, author and time and answers whether
// the recomputed record hashes to the stored one (reproduced; the
// optimiser's provenance notes carried over); if it does not, or cannot be
// recomputed, the page says so and falls back to the stored tube. Recomputations and predictions are cached per immutable
// record.
//
// # Actions
//
// The engineer's actions are POST forms, each a thin adapter over one app
// op — the op the API's route of the same action names — run through
// app.Lookup(op).Invoke, the API's entry point, so the role, line scope,
// validation, limits and audit are the application's (actionRoutes lists
// them; a test checks that each names an API route's op, runs exactly
// that op and refuses a post without the session's CSRF token):
//
//   - Ingest (/ui/ingest): a CSV upload with the plant options of aml
//     ingest (ingest.csv), read as a multipart stream under the API's CSV
//     body limit, the CSRF token (the first part) checked before a byte of
//     the file is read; the file report is shown. A line file, pasted or
//     uploaded, read by app.ParseLineFile (line.apply).
//
//   - A dataset form (/ui/datasets/new) built from the line's node catalog
//     (node.list): a role per node, beat, history and horizon steps,
//     cleaning and split. static/forms.js posts it on each edit to
//     /ui/datasets/check, which runs the application's dataset.check (the
//     API's POST /api/v1/dataset-checks, dataset.build's own decoding,
//     validation and work budget; nothing read or stored); the form builds
//     with dataset.build.
//
//   - A job form (/ui/jobs/new) whose parameter fields are generated from
//     the trainer's JSON schema (trainer.show), submitted with job.submit
//     to the job's page, which follows it over the event stream; cancel
//     and retry (job.cancel, job.retry).
//
//   - Promote and retire on the model card (model.promote, model.retire,
//     compare-and-set on the stage shown), the gate result and its failed
//     checks beside the buttons.
//
//   - Batch records (/ui/batch): a recipe version (recipe.put) and the
//     runs' records (run.events), pasted or uploaded, read as aml recipe
//     put and aml runs events read them: the lineage evidence.
//
//   - Scenes (actions_twin.go): the editor (/ui/scenes/new) drafts a
//     scene file from a model (scene.draft) into a text area;
//     static/twin.js posts it on each edit to /ui/scenes/check
//     (scene.check: contract, bindings, fit to the model; every finding
//     listed with its path); save is scene.put. On the scene page an
//     approver freezes the draft whose hash the page showed (scene.freeze)
//     and lets a frozen scene govern the line's writes (channel.set:
//     hybrid_twin, hitl_governed); others see why they cannot, and a
//     refusal is shown on the page.
//
//   - Snapshots and trials: snapshot.take from the scene page; the
//     snapshot page has a slider and a number field per control (its
//     range, the snapshot's value) posted to trial.run, whose trial page
//     redraws the tube (static/tube.js draws the recomputed traces, JSON
//     in the page, with the vendored uPlot: mean, tube band, baseline,
//     limits and target, zoom and hover values with units; the SVG stays
//     for a browser without scripts) and offers the same form again, and the optimiser
//     (optimize), whose result shows the moves and each objective target's
//     prediction and band against the target in its unit. A passing trial
//     that improves on holding can be certified (cert.issue).
//
//   - Certificates: each row of the inbox shows what the approver
//     reviews (certDetail: band against target, moves with the controls'
//     ranges, twin gate, shadow runs flagged against its profile, the
//     trial's OOD check) and whether it can still execute. Approve, revoke
//     and execute (cert.execute) open a confirmation page
//     (/ui/certificates/{id}/confirm?do=…) whose one button posts the
//     decision; a role that may not take it (an agent's token, a viewer,
//     an engineer) sees the rule instead of the button, and a posted
//     decision is refused by the op. Execute shows the writes with their
//     readback and the re-validation.
//
//   - Benefit studies (benefit.go): /ui/benefit lists the studies kept
//     (benefit.list) beside the form that starts one (benefit.run: line, runs,
//     seed, wear, material lots; the op refuses a role, a runs count over
//     its cap and a second study before any work). A study's page
//     (benefit.show) shows a running study's progress, which
//     static/benefit.js follows over GET /api/v1/benefit-studies/{id},
//     and a finished one's report: spec band, noise floor, the table per
//     mode and two charts drawn with the vendored uPlot from the report's
//     run means (run mean per run of each mode against the target and the
//     spec band; |run mean − target| per run), the server's SVG of the
//     same series kept for a browser without scripts.
//
// A refused action is shown on its form with the reason (a role refusal
// names the rule and the principal's role). Forms are read under the API's
// body limits (api.NewServer passes them through SetBodyLimits; default
// app.DefaultMaxBodyBytes and app.DefaultMaxCSVBytes): a larger body is
// 413 before its CSRF token is looked at.
//
// # Decisions
//
// Approve and revoke are POST forms too. Every principal is checked with
// auth.Principal.Allow(ActCertApprove, line) — agents, viewers and
// engineers are refused with a message naming the rule — and the store
// then applies its own rules (a requester never approves their own
// certificate, expiry) with the principal's name as the audited actor.
// Forms carry a token derived from the session's token and cross-origin
// posts are refused (CSRF), on top of the SameSite cookie; the login and
// logout forms pass the same Origin rule. The check is auth's
// (auth.Hosts.CheckCSRF), shared with the API, which applies it to
// state-changing calls authenticated by the session cookie. Every page is
// also line scoped: lists hide other lines, detail pages refuse them.
package web

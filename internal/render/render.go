// Package render writes the application's answers as text for people: the
// lines the CLI prints for a command without --json and the summary an MCP
// tool returns beside its JSON, so that an agent quotes what a person at
// the terminal sees. One renderer per op (internal/app), looked up by the
// op's name; it reads the op's response (and, where the text depends on
// what was asked, its request). Nothing here computes: every number shown
// is a field of the response.
package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/ingest"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/govern"
	"github.com/aml-project/aml/internal/twin/shadow"
)

// fn renders one op's answer; req is the op's request (a pointer or a
// value), resp its response.
type fn func(w io.Writer, req, resp any)

// Text writes the rendering of op's answer resp (to the request req,
// which may be nil) to w. It reports false when op has no renderer (its
// answer is data only: logs, time series, predictions read as JSON).
func Text(w io.Writer, op string, req, resp any) bool {
	f, ok := byOp[op]
	if ok {
		f(w, req, resp)
	}
	return ok
}

// String is Text into a string ("" without a renderer).
func String(op string, req, resp any) string {
	var b bytes.Buffer
	Text(&b, op, req, resp)
	return b.String()
}

// Has reports whether op has a renderer.
func Has(op string) bool { _, ok := byOp[op]; return ok }

// byOp is every op's renderer.
var byOp = map[string]fn{
	// data
	"info":           out(printDBInfo),
	"line.list":      list(printLines),
	"run.list":       list(printRuns),
	"run.show":       out(printRunDetail),
	"node.list":      list(printNodes),
	"node.set":       list(printNodes),
	"line.apply":     list(printNodes),
	"recipe.put":     out(printRecipeVersion),
	"run.events":     out(printRunEvents),
	"ts.query":       out(printTS),
	"ts.latest":      out(printTSLatest),
	"ingest.samples": out(printIngestSamples),
	"ingest.csv":     out(PrintFileReport),
	"connector.list": list(printConnectorStatus),
	"line.overview":  out(printOverview),
	"dataset.check":  out(printDatasetCheck),
	// datasets, jobs, models
	"dataset.build":  out(printBuild),
	"dataset.list":   list(printDatasets),
	"dataset.show":   out(printDatasetDetail),
	"dataset.verify": out(printDatasetVerify),
	"dataset.report": with(func(w io.Writer, r app.DatasetRequest, rep *dataset.Report) { printReport(w, r.ID, rep) }),
	"dataset.delete": out(func(w io.Writer, d app.DeletedResponse) { fmt.Fprintf(w, "deleted dataset %s\n", d.Deleted) }),
	"job.submit":     out(printQueued),
	"job.retry": with(func(w io.Writer, r app.JobRequest, j core.Job) {
		fmt.Fprintf(w, "queued job %s (retry of %s)\n", j.ID, r.ID)
	}),
	"job.show":        out(printJob),
	"job.cancel":      out(printCancel),
	"job.list":        list(printJobs),
	"job.logs":        out(func(w io.Writer, l app.JobLogsResponse) { _, _ = io.WriteString(w, l.Text) }),
	"model.list":      list(printModels),
	"model.show":      out(printModel),
	"model.promote":   out(printMoved),
	"model.retire":    out(printMoved),
	"model.compare":   out(printCompare),
	"model.predict":   out(printPrediction),
	"model.reference": out(printReference),
	"model.replay":    out(printReplay),
	// twin
	"scene.put":    out(printScenePut),
	"scene.freeze": out(printSceneFrozen),
	"scene.show":   out(printScene),
	"scene.list":   list(printScenes),
	"scene.draft":  out(printSceneDraft),
	"scene.check":  out(printSceneCheck),
	"objective.put": out(func(w io.Writer, o app.ObjectivePutResponse) {
		fmt.Fprintf(w, "stored objective %s (hash %s)\n", o.ObjectiveID, o.Hash)
	}),
	"objective.show":   out(printObjective),
	"snapshot.take":    with(printSnapshotTaken),
	"snapshot.show":    out(printSnapshotShown),
	"snapshot.list":    list(printSnapshots),
	"trial.run":        out(func(w io.Writer, r app.TrialRunResponse) { printTrial(w, r.Record, r.Detail) }),
	"trial.show":       out(func(w io.Writer, r contract.TrialRecord) { printTrial(w, r, nil) }),
	"trial.recompute":  out(printTrialRecompute),
	"trial.list":       list(printTrials),
	"optimize":         out(printOptimize),
	"gate.evaluate":    out(printGate),
	"gate.latest":      out(printGateLatest),
	"gate.profiles":    out(printGateProfiles),
	"shadow.collect":   out(func(w io.Writer, ev *shadow.Evidence) { printShadow(w, ev) }),
	"shadow.list":      out(printShadowRuns),
	"calibrate":        out(printCalibrate),
	"calibration.list": list(printCalibrations),
	"steptest.plan":    out(printStepTestPlan),
	"steptest.issue":   out(printStepTest),
	"steptest.show":    out(printStepTest),
	"steptest.approve": out(printStepTest),
	"steptest.revoke":  out(printStepTest),
	"steptest.list":    list(printStepTests),
	"steptest.execute": out(printStepTestExecution),
	"benefit.run":      out(printBenefitStudy),
	"benefit.show":     out(printBenefitStudy),
	"benefit.list":     list(printBenefitStudies),
	// stored content
	"physics.put":      out(printPhysics),
	"physics.list":     list(printPhysicsList),
	"physics.show":     out(printPhysicsSource),
	"trainer.register": out(printTrainer),
	"trainer.list":     out(printTrainers),
	"trainer.show":     out(printTrainerShow),
	// governance
	"cert.key":         out(func(w io.Writer, k app.CertKeyResponse) { fmt.Fprint(w, k.PublicKeyPEM) }),
	"cert.key.rotate":  out(printKeyRotated),
	"cert.list":        list(printCerts),
	"cert.show":        out(printCertShow),
	"cert.moves":       list(printMoves),
	"cert.issue":       out(printIssued),
	"cert.approve":     out(printTransition),
	"cert.revoke":      out(printTransition),
	"cert.verify":      out(func(w io.Writer, r govern.VerifyReport) { printCertVerify(w, r) }),
	"cert.execute":     out(func(w io.Writer, r govern.Result) { printExecution(w, r) }),
	"envelope.issue":   out(printEnvelope),
	"envelope.show":    out(printEnvelope),
	"envelope.approve": out(printEnvelope),
	"envelope.revoke":  out(printEnvelope),
	"envelope.list":    list(printEnvelopes),
	"envelope.cycle":   out(printCycle),
	"channel.set":      out(func(w io.Writer, r *contract.ChannelRecord) { fmt.Fprint(w, "channel set\n"); printChannel(w, r) }),
	"channel.show":     out(printChannel),
	"audit.verify":     with(printAuditVerify),
	"audit.list":       out(printAudit),
	"token.create":     out(printTokenCreated),
	"token.list":       list(printTokens),
	"token.revoke":     out(func(w io.Writer, info auth.TokenInfo) { fmt.Fprintf(w, "token %s (%s) revoked\n", info.ID, info.Name) }),
	"retention.apply":  out(printRetention),
}

// out is a renderer of the response alone.
func out[T any](f func(io.Writer, T)) fn {
	return func(w io.Writer, _, resp any) { f(w, as[T](resp)) }
}

// with is a renderer of the request and the response.
func with[Req, T any](f func(io.Writer, Req, T)) fn {
	return func(w io.Writer, req, resp any) { f(w, as[Req](req), as[T](resp)) }
}

// list renders a list op's items.
func list[T any](f func(io.Writer, []T)) fn {
	return func(w io.Writer, _, resp any) {
		l := as[app.List[T]](resp)
		if l.Items == nil {
			l.Items = []T{}
		}
		f(w, l.Items)
	}
}

// as converts v to T, taking the address of a value or the value of a
// pointer where the op's type and the renderer's differ in that only
// (the zero T for nil).
func as[T any](v any) T {
	if t, ok := v.(T); ok {
		return t
	}
	var zero T
	rv := reflect.ValueOf(v)
	want := reflect.TypeOf(&zero).Elem()
	switch {
	case !rv.IsValid():
	case rv.Kind() == reflect.Pointer && !rv.IsNil() && rv.Elem().Type() == want:
		return rv.Elem().Interface().(T)
	case want.Kind() == reflect.Pointer && rv.Type() == want.Elem():
		p := reflect.New(rv.Type())
		p.Elem().Set(rv)
		return p.Interface().(T)
	}
	return zero
}

func printLines(w io.Writer, ls []core.Line) {
	table(w, "LINE\tNAME", len(ls), "line(s)", func(row func(...any)) {
		for _, l := range ls {
			row(l.ID, l.Name)
		}
	})
}

func printTS(w io.Writer, r app.TSQueryResponse) {
	if r.TSBuckets != nil {
		printBuckets(w, r.Buckets)
	}
	if r.Page != nil {
		printPage(w, *r.Page)
	}
}

func printTSLatest(w io.Writer, r app.TSLatestResponse) {
	if r.Sample == nil {
		fmt.Fprintf(w, "%s: no sample\n", r.Node)
		return
	}
	fmt.Fprintf(w, "%s: %g at %s (%s)\n", r.Node, r.Sample.Value, time.UnixMicro(r.Sample.TsUs).UTC().Format(time.RFC3339Nano), r.Sample.State)
}

func printIngestSamples(w io.Writer, r app.IngestSamplesResponse) {
	fmt.Fprintf(w, "ingested %d sample(s), %d new node(s)", r.Samples, r.NewNodes)
	if r.RunCreated {
		fmt.Fprint(w, ", run created")
	}
	fmt.Fprintln(w)
}

func printObjective(w io.Writer, o app.ObjectiveShowResponse) {
	b, _ := json.MarshalIndent(o.Objective, "", "  ")
	fmt.Fprintf(w, "%s\nhash %s\n", b, o.Hash)
}

func printSnapshotTaken(w io.Writer, req app.SnapshotTakeRequest, r app.SnapshotTakeResponse) {
	if r.Snapshot == nil || r.Report == nil {
		return
	}
	printSnapshot(w, r.Snapshot, req.Strict)
	printSnapshotVars(w, r.Report)
	for _, n := range r.Report.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

func printSnapshotShown(w io.Writer, r app.SnapshotShowResponse) {
	if r.Snapshot == nil {
		return
	}
	printSnapshot(w, r.Snapshot, r.Info.Strict)
	printSnapshotValues(w, r.Snapshot)
}

func printOptimize(w io.Writer, out app.OptimizeResponse) {
	if out.Result == nil {
		return
	}
	res := out.Result
	fmt.Fprintf(w, "mode %s: %d candidates evaluated (moves at steps %v)\n", res.Mode, res.Evaluated, res.MoveSteps)
	if out.Record == nil {
		fmt.Fprintf(w, "no candidate passes: %s\n", res.NoPass)
		return
	}
	printTrial(w, *out.Record, res.BestDetail)
}

func printKeyRotated(w io.Writer, r app.CertRotateKeyResponse) {
	fmt.Fprintf(w, "rotated the certificate signing key %s -> %s at %s\n", r.OldKeyID, r.KeyID, r.At.UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "new key:     %s\nretired key: %s (kept: it signed the succession)\n", r.KeyFile, r.RetiredKeyFile)
	fmt.Fprintf(w, "other processes sharing this database refuse to sign until %s is copied into their data directory\n", r.KeyFile)
}

func printIssued(w io.Writer, r *contract.CertRecord) {
	if r == nil || r.Cert == nil {
		return
	}
	fmt.Fprintf(w, "certificate %s issued for trial %s (status %s, expires %s)\nhash %s\nsigned by key %s; another person approves: aml cert approve %s --as PERSON\n",
		r.Cert.RecommendationID, r.Cert.TrialID, r.Cert.Status, certTime(r.Cert.ExpiresAt), r.Cert.CertificateHash, r.Cert.KeyID, r.Cert.RecommendationID)
}

func printAuditVerify(w io.Writer, req app.AuditVerifyRequest, res audit.VerifyResult) {
	fmt.Fprintf(w, "audit log verified: %d entr%s checked", res.Entries, auditPlural(res.Entries, "y", "ies"))
	if seq, _, ok := strings.Cut(req.ExpectHead, ":"); ok {
		fmt.Fprintf(w, ", recorded head %s present", seq)
	}
	fmt.Fprintf(w, "\nhead %d:%s\n", res.HeadSeq, res.Head)
	if res.Checkpoints > 0 {
		fmt.Fprintf(w, "%d signed checkpoint(s), newest at entry %d\n", res.Checkpoints, res.SignedSeq)
	}
}

// PrintFileReport is one ingested CSV stream (the CLI prints one per
// file).
func PrintFileReport(w io.Writer, r ingest.FileReport) {
	created := ""
	if r.RunCreated {
		created = " (created)"
	}
	fmt.Fprintf(w, "%s: %s CSV, %d rows, %d samples of %d node(s) (%d new) → run %s%s, %s … %s\n",
		r.File, r.Shape, r.Rows, r.Samples, len(r.Nodes), r.NewNodes, r.Run, created, fmtMs(r.FirstTs), fmtMs(r.LastTs))
	if r.Missing > 0 {
		fmt.Fprintf(w, "  %d empty/NaN cell(s) skipped\n", r.Missing)
	}
	if r.Skipped > 0 {
		fmt.Fprintf(w, "  skipped %d bad row(s):", r.Skipped)
		for _, reason := range slices.Sorted(maps.Keys(r.SkipReasons)) {
			fmt.Fprintf(w, " %s %d;", reason, r.SkipReasons[reason])
		}
		fmt.Fprintln(w)
		for _, l := range r.FirstSkipped {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
}

// table writes a tab-aligned table: the header, one row per call of row,
// then "N what".
func table(w io.Writer, header string, n int, what string, rows func(row func(cells ...any))) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, header)
	rows(func(cells ...any) {
		for i, c := range cells {
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, c)
		}
		fmt.Fprintln(tw)
	})
	_ = tw.Flush()
	fmt.Fprintf(w, "%d %s\n", n, what)
}

// Controls writes control → value pairs in name order ("a=1 b=2").
func Controls(m map[string]float64) string { return fmtControls(m) }

// Millis writes epoch milliseconds as an RFC 3339 UTC time.
func Millis(ms int64) string { return fmtMs(ms) }

func printRecipeVersion(w io.Writer, v core.RecipeVersion) {
	fmt.Fprintf(w, "recipe %s version %d (content %.16s…, %d parameter(s))\n", v.RecipeID, v.Version, v.ContentHash, len(v.Params))
}

func printRunEvents(w io.Writer, r app.RunEventsResponse) {
	table(w, "RUN\tRECIPE\tVERSION\tFROM\tTO\tCONFIRMED BY\tSTATUS", len(r.Segments), "run event(s) recorded", func(row func(...any)) {
		for i, s := range r.Segments {
			to, status := "-", ""
			if s.ToMs != nil {
				to = fmtMs(*s.ToMs)
			}
			if i < len(r.Runs) {
				status = r.Runs[i].Status
			}
			row(s.RunID, s.RecipeID, s.RecipeVersion, fmtMs(s.FromMs), to, s.ConfirmedBy, status)
		}
	})
}

func printGateProfiles(w io.Writer, r app.GateProfilesResponse) {
	for _, p := range r.Models {
		def := ""
		if r.ByPurpose[p.Purpose] == p.ID {
			def = " (default for " + p.Purpose + ")"
		}
		fmt.Fprintf(w, "model gate %s v%d, purpose %s%s\n", p.ID, p.Version, p.Purpose, def)
		for _, ru := range p.Rules {
			wider := ""
			if ru.Sigmas > 0 {
				wider = fmt.Sprintf(" (or %gσ of the measurement, if wider)", ru.Sigmas)
			}
			fmt.Fprintf(w, "  %-4s %-40s %s %s %g%s\n", ru.ID, ru.Name, ru.Metric, ru.Op, ru.Threshold, wider)
		}
	}
	for _, p := range r.Twin {
		fmt.Fprintf(w, "twin gate %s v%d: one-step test NRMSE ≤ %g, rollout ≤ %g, val/test gap ≤ %g, ≥ %d rows in ≥ %d runs, coverage ≥ %g (≥ %d calibration rows), ≥ %d passing candidates in ≥ %d trials, hard-violation rate ≤ %g, solver failures ≤ %g",
			p.ID, p.Version, p.OneStepTestNrmseMax, p.RolloutTestNrmseMax, p.ValTestGapMax, p.MinRows, p.MinRuns, p.CoverageTarget, p.MinCalibrationRows,
			p.MinWriteEligibleCandidateCount, p.MinTrialCount, p.HardConstraintViolationRateMax, p.SolverFailureRateMax)
		if p.MinShadowRuns > 0 {
			fmt.Fprintf(w, "; shadow: ≥ %d runs, error ratio ≤ %g, coverage ≥ %g", p.MinShadowRuns, p.ShadowErrorRatioMax, p.ShadowCoverageMin)
		}
		fmt.Fprintln(w)
	}
}

func printTrialRecompute(w io.Writer, r app.TrialRecomputeResponse) {
	if r.Trial == nil || r.Detail == nil {
		return
	}
	fmt.Fprintf(w, "trial %s recomputed: %d trace(s) over %d step(s) of %d ms\n", r.Trial.TrialID, len(r.Detail.Traces), r.Detail.Steps, r.Detail.BeatMs)
}

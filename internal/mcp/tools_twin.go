package mcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"sort"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/engine"
	"github.com/aml-project/aml/internal/twin/gate"
	"github.com/aml-project/aml/internal/twin/recal"
	"github.com/aml-project/aml/internal/twin/snapshot"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func (t *toolbox) registerTwin(s *sdk.Server) {
	add(s, toolDef{"twin_scene_read", "Read a scene", "Read a twin scene contract (variables by role with units and ranges, constraints, write policy, objective profiles) with its content hash; without sceneId, list the scenes of your lines.", readOnly}, t.sceneRead)
	add(s, toolDef{"twin_snapshot_create", "Take a snapshot", "Take and store a snapshot of a scene's variables from the live store (optionally as of a past instant, with a model's state estimate): values, freshness, completeness, the recent window. Trials and optimisations start from a snapshot.", additive}, t.snapshotCreate)
	add(s, toolDef{"twin_trial_run", "Run a virtual trial", "Roll a twin model out from a snapshot with a candidate setpoint move and compare with holding the setpoints: interval tube, every scene constraint, OOD, cost. Stored; never executed on the machine (candidateExecuted is false).", additive}, t.trialRun)
	add(s, toolDef{"mpc_optimize", "Optimise setpoints (MPC)", "Search the setpoint move with the lowest cost that passes every constraint, the uncertainty and the OOD checks within the trust region and write policy; the best trial is stored (certify it with twin_certificate_request). Never executed on the machine.", additive}, t.optimize)
	add(s, toolDef{"twin_gate_evaluate", "Evaluate the twin gate", "Apply the twin acceptance profile to measured inputs (stored accuracy and coverage, fresh trials on replayed test-run snapshots, stored shadow evidence) and store the result. A pass does not promote: a person does.", additive}, t.gateEvaluate)
	add(s, toolDef{"twin_calibration_request", "Request recalibration", "Measure a model's recalibration signals (new runs and rows, drift, recent error) and queue a recalibration when the policy's triggers are reached (deduplicated, with cooldown). The new model arrives as a candidate for a person to promote.", hints{idempotent: true}}, t.calibrationRequest)
	add(s, toolDef{"twin_certificate_request", "Request a certificate", "Issue a signed recommendation certificate for a stored trial that passes and improves on the baseline. It is queued with status ISSUED for a person with the approver role; the requester can never approve it, and nothing is written to the machine.", additive}, t.certificateRequest)
}

// newID returns a time-ordered id with a random suffix (unique across
// processes sharing a data directory).
func newID(prefix string, now time.Time) string {
	var b [4]byte
	rand.Read(b[:])
	return prefix + "-" + now.UTC().Format("20060102T150405.000") + "-" + hex.EncodeToString(b[:])
}

// ---- twin_scene_read

type sceneReadIn struct {
	SceneID string `json:"sceneId,omitempty" jsonschema:"scene id (omit to list the scenes of your lines)"`
	Version string `json:"version,omitempty" jsonschema:"scene version (default: the latest)"`
	LineID  string `json:"lineId,omitempty" jsonschema:"when listing: only this line"`
}

type sceneSummary struct {
	SceneID      string `json:"sceneId"`
	SceneVersion string `json:"sceneVersion"`
	LineID       string `json:"lineId"`
	Status       string `json:"status" jsonschema:"draft or frozen"`
	Hash         string `json:"hash"`
}

type sceneReadOut struct {
	Scene  *contract.SceneContract `json:"scene,omitempty" jsonschema:"the full contract (when sceneId is given)"`
	Hash   string                  `json:"hash,omitempty" jsonschema:"the contract's content hash"`
	Scenes []sceneSummary          `json:"scenes" jsonschema:"the scene read, or every scene listed"`
}

func summarize(c *contract.SceneContract) (sceneSummary, error) {
	h, err := c.Hash()
	return sceneSummary{SceneID: c.SceneID, SceneVersion: c.SceneVersion, LineID: c.LineID, Status: string(c.Status), Hash: h}, err
}

func (t *toolbox) sceneRead(ctx context.Context, in sceneReadIn) (sceneReadOut, error) {
	if in.SceneID == "" {
		if err := t.lineFilter(in.LineID); err != nil {
			return sceneReadOut{}, err
		}
		cs, err := t.d.Store.ListScenes(ctx, in.LineID)
		if err != nil {
			return sceneReadOut{}, err
		}
		out := sceneReadOut{Scenes: []sceneSummary{}}
		for _, c := range cs {
			if !t.p.InScope(c.LineID) {
				continue
			}
			sm, err := summarize(c)
			if err != nil {
				return sceneReadOut{}, err
			}
			out.Scenes = append(out.Scenes, sm)
		}
		return out, nil
	}
	if err := t.allow(auth.ActRead, ""); err != nil {
		return sceneReadOut{}, err
	}
	c, err := t.d.Store.GetScene(ctx, in.SceneID, in.Version)
	if err != nil {
		return sceneReadOut{}, err
	}
	if err := t.allow(auth.ActRead, c.LineID); err != nil {
		return sceneReadOut{}, err
	}
	sm, err := summarize(c)
	if err != nil {
		return sceneReadOut{}, err
	}
	return sceneReadOut{Scene: c, Hash: sm.Hash, Scenes: []sceneSummary{sm}}, nil
}

// ---- twin_snapshot_create

type snapshotCreateIn struct {
	SceneID   string            `json:"sceneId" jsonschema:"scene id"`
	Version   string            `json:"version,omitempty" jsonschema:"scene version (default: the latest)"`
	ModelID   string            `json:"modelId,omitempty" jsonschema:"estimate unmeasured states with this twin model (its dataset also binds variables to nodes)"`
	RunID     string            `json:"runId,omitempty" jsonschema:"run (default: the newest active, else newest run of the scene's line)"`
	AtMs      int64             `json:"atMs,omitempty" jsonschema:"take the snapshot as of this past epoch ms (samples after it are ignored); default now"`
	Bindings  map[string]string `json:"bindings,omitempty" jsonschema:"scene variable id → node id (overrides the scene's and the model's bindings)"`
	Strict    bool              `json:"strict,omitempty" jsonschema:"refuse (AML_SNAPSHOT_QUALITY) any stale or missing variable or future sample"`
	MaxAgeSec float64           `json:"maxAgeSec,omitempty" jsonschema:"freshness limit in seconds (default 60)"`
	Phase     string            `json:"phase,omitempty" jsonschema:"process phase (one of the scene's phases)"`
}

type snapshotCreateOut struct {
	Snapshot *contract.TwinSnapshot `json:"snapshot"`
	Report   *snapshot.Report       `json:"report" jsonschema:"per variable: node, value, age, status; what the data lacked"`
}

func (t *toolbox) snapshotCreate(ctx context.Context, in snapshotCreateIn) (snapshotCreateOut, error) {
	if err := t.allow(auth.ActTrial, ""); err != nil {
		return snapshotCreateOut{}, err
	}
	if in.SceneID == "" {
		return snapshotCreateOut{}, core.FieldErrorf(core.CodeInvalidArgument, "sceneId", "sceneId is required")
	}
	if in.MaxAgeSec < 0 {
		return snapshotCreateOut{}, core.FieldErrorf(core.CodeInvalidArgument, "maxAgeSec", "maxAgeSec must be positive")
	}
	scene, err := t.d.Store.GetScene(ctx, in.SceneID, in.Version)
	if err != nil {
		return snapshotCreateOut{}, err
	}
	if err := t.allow(auth.ActTrial, scene.LineID); err != nil {
		return snapshotCreateOut{}, err
	}
	o := snapshot.Options{RunID: in.RunID, Strict: in.Strict, MaxAge: time.Duration(in.MaxAgeSec * float64(time.Second)), Phase: in.Phase, CreatedBy: t.p.Name}
	if in.AtMs != 0 {
		o.Now, o.Replay = time.UnixMilli(in.AtMs).UTC(), true
	}
	bind := map[string]string{}
	if in.ModelID != "" {
		if _, err := t.model(ctx, in.ModelID, auth.ActRead); err != nil {
			return snapshotCreateOut{}, err
		}
		tw, err := engine.Load(ctx, t.d.Store, t.d.DataDir, in.ModelID)
		if err != nil {
			return snapshotCreateOut{}, err
		}
		o.Estimator = tw
		for v, n := range tw.Bindings() {
			bind[v] = n
		}
	}
	for v, n := range in.Bindings {
		bind[v] = n
	}
	if len(bind) > 0 {
		o.Bindings = bind
	}
	snap, rep, err := snapshot.Take(ctx, t.d.Store, scene, o)
	if err != nil {
		return snapshotCreateOut{}, err
	}
	if err := t.d.Store.PutSnapshot(ctx, snap, in.Strict); err != nil {
		return snapshotCreateOut{}, err
	}
	return snapshotCreateOut{Snapshot: snap, Report: rep}, nil
}

// model reads a model and checks action a on its line.
func (t *toolbox) model(ctx context.Context, id string, a auth.Action) (core.Model, error) {
	if strings.TrimSpace(id) == "" {
		return core.Model{}, core.FieldErrorf(core.CodeInvalidArgument, "modelId", "modelId is required")
	}
	m, err := t.d.Store.GetModel(ctx, id)
	if err != nil {
		return m, err
	}
	return m, t.allow(a, m.LineID)
}

// twinInputs loads a stored snapshot with its scene and objective after
// checking action a on the snapshot's line and read access to the model.
func (t *toolbox) twinInputs(ctx context.Context, modelID, snapID, objID string, a auth.Action) (*contract.TwinSnapshot, *contract.SceneContract, *contract.ObjectiveProfile, error) {
	if err := t.allow(a, ""); err != nil {
		return nil, nil, nil, err
	}
	if snapID == "" {
		return nil, nil, nil, core.FieldErrorf(core.CodeInvalidArgument, "snapshotId", "snapshotId is required")
	}
	if _, err := t.model(ctx, modelID, auth.ActRead); err != nil {
		return nil, nil, nil, err
	}
	snap, err := t.d.Store.GetSnapshot(ctx, snapID)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := t.allow(a, snap.LineID); err != nil {
		return nil, nil, nil, err
	}
	scene, err := t.d.Store.GetScene(ctx, snap.SceneID, snap.SceneVersion)
	if err != nil {
		return nil, nil, nil, err
	}
	if objID == "" {
		if len(scene.ObjectiveProfileIDs) == 0 {
			return nil, nil, nil, core.FieldErrorf(core.CodeInvalidArgument, "objectiveId", "scene %s names no objective profile; give objectiveId", scene.SceneID)
		}
		objID = scene.ObjectiveProfileIDs[0]
	}
	obj, _, err := t.d.Store.GetObjective(ctx, objID)
	if err != nil {
		return nil, nil, nil, err
	}
	return snap, scene, obj, nil
}

// ---- twin_trial_run

type trialRunIn struct {
	ModelID     string               `json:"modelId" jsonschema:"twin model (format aml.hybrid/1)"`
	SnapshotID  string               `json:"snapshotId" jsonschema:"snapshot to start from (twin_snapshot_create)"`
	ObjectiveID string               `json:"objectiveId,omitempty" jsonschema:"objective profile (default: the scene's first)"`
	Set         map[string]float64   `json:"set,omitempty" jsonschema:"control id → setpoint moved at step 0 and held (controls not named keep their snapshot value); give set or candidate"`
	Candidate   []map[string]float64 `json:"candidate,omitempty" jsonschema:"the full control trajectory: one {control: value} object per horizon step"`
}

type trialRunOut struct {
	Record   twinstore.TrialRecord `json:"record" jsonschema:"the stored trial: passed, reject code, hard violations, OOD, improvement, hash, and the trial itself"`
	Detail   *engine.TrialDetail   `json:"detail" jsonschema:"traces over the horizon (candidate mean and tube, baseline) for every quantity"`
	Executed bool                  `json:"candidateExecuted" jsonschema:"always false: a trial never writes to the machine"`
}

func (t *toolbox) trialRun(ctx context.Context, in trialRunIn) (trialRunOut, error) {
	snap, scene, obj, err := t.twinInputs(ctx, in.ModelID, in.SnapshotID, in.ObjectiveID, auth.ActTrial)
	if err != nil {
		return trialRunOut{}, err
	}
	if (len(in.Set) == 0) == (len(in.Candidate) == 0) {
		return trialRunOut{}, core.FieldErrorf(core.CodeInvalidArgument, "set", "give either set (control → value) or candidate (the full trajectory)")
	}
	cand := in.Candidate
	if len(in.Set) > 0 {
		step := map[string]float64{}
		for k, v := range snap.ControlValues {
			step[k] = v
		}
		for k, v := range in.Set {
			if _, ok := step[k]; !ok {
				known := make([]string, 0, len(step))
				for c := range step {
					known = append(known, c)
				}
				sort.Strings(known)
				return trialRunOut{}, core.FieldErrorf(core.CodeInvalidArgument, "set."+k, "%s is not a control of scene %s (controls: %s)", k, scene.SceneID, strings.Join(known, ", "))
			}
			step[k] = v
		}
		cand = make([]map[string]float64, obj.HorizonSteps)
		for i := range cand {
			cand[i] = step
		}
	}
	now := t.now().UTC()
	res, err := engine.RunTrial(ctx, t.d.Store, t.d.DataDir, in.ModelID, engine.TrialInput{Scene: scene, Snapshot: snap, Objective: obj,
		Candidate: cand, TrialID: newID("trial", now), CreatedBy: t.p.Name, Now: now})
	if err != nil {
		return trialRunOut{}, err
	}
	rec, err := t.d.Store.PutTrial(ctx, res.Trial, twinstore.TrialManual, "")
	if err != nil {
		return trialRunOut{}, err
	}
	t.trialDone(rec)
	return trialRunOut{Record: rec, Detail: res.Detail}, nil
}

func (t *toolbox) trialDone(rec twinstore.TrialRecord) {
	t.d.Bus.Publish(events.Event{Kind: events.TrialDone, Line: rec.LineID, ID: rec.Trial.TrialID,
		Data: map[string]any{"passed": rec.Passed, "rejectCode": rec.RejectCode, "improvement": rec.Improvement, "purpose": rec.Purpose, "by": t.p.Name}})
}

// ---- mpc_optimize

type optimizeIn struct {
	ModelID       string `json:"modelId" jsonschema:"twin model"`
	SnapshotID    string `json:"snapshotId" jsonschema:"snapshot to start from"`
	ObjectiveID   string `json:"objectiveId,omitempty" jsonschema:"objective profile (default: the scene's first)"`
	Mode          string `json:"mode,omitempty" jsonschema:"auto (default: precise_search once the model's latest twin gate passed, else safe_small_step), safe_small_step or precise_search"`
	Seed          uint64 `json:"seed,omitempty" jsonschema:"seed of the search order (default 1)"`
	MaxCandidates int    `json:"maxCandidates,omitempty" jsonschema:"candidates to evaluate at most (default 200)"`
}

type optimizeOut struct {
	Result   *engine.OptimizeResult `json:"result" jsonschema:"mode, candidates evaluated and ranked, the best trial (none when no candidate passes: noPass says why)"`
	Record   *twinstore.TrialRecord `json:"record,omitempty" jsonschema:"the stored best trial (certify it with twin_certificate_request)"`
	Executed bool                   `json:"candidateExecuted" jsonschema:"always false: optimisation never writes to the machine"`
}

func (t *toolbox) optimize(ctx context.Context, in optimizeIn) (optimizeOut, error) {
	snap, scene, obj, err := t.twinInputs(ctx, in.ModelID, in.SnapshotID, in.ObjectiveID, auth.ActTrial)
	if err != nil {
		return optimizeOut{}, err
	}
	mode := in.Mode
	switch mode {
	case engine.ModeSafeSmallStep, engine.ModePreciseSearch:
	case "", "auto":
		mode = engine.ModeSafeSmallStep
		if g, err := t.d.Store.LatestGateEval(ctx, in.ModelID); err == nil && g.Passed {
			mode = engine.ModePreciseSearch
		}
	default:
		return optimizeOut{}, core.FieldErrorf(core.CodeInvalidArgument, "mode", "mode %q: want auto, %s or %s", in.Mode, engine.ModeSafeSmallStep, engine.ModePreciseSearch)
	}
	if in.MaxCandidates < 0 {
		return optimizeOut{}, core.FieldErrorf(core.CodeInvalidArgument, "maxCandidates", "maxCandidates must be positive")
	}
	seed := in.Seed
	if seed == 0 {
		seed = 1
	}
	now := t.now().UTC()
	res, err := engine.RunOptimize(ctx, t.d.Store, t.d.DataDir, in.ModelID, engine.OptimizeInput{Scene: scene, Snapshot: snap, Objective: obj,
		Mode: mode, Seed: seed, MaxCandidates: in.MaxCandidates, TrialID: newID("trial", now), CreatedBy: t.p.Name, Now: now})
	if err != nil {
		return optimizeOut{}, err
	}
	out := optimizeOut{Result: res}
	if res.Best != nil {
		rec, err := t.d.Store.PutTrial(ctx, res.Best, twinstore.TrialOptimize, "")
		if err != nil {
			return optimizeOut{}, err
		}
		out.Record = &rec
		t.trialDone(rec)
	}
	return out, nil
}

// ---- twin_gate_evaluate

type gateIn struct {
	ModelID     string `json:"modelId" jsonschema:"twin model"`
	SceneID     string `json:"sceneId" jsonschema:"scene id"`
	Version     string `json:"version,omitempty" jsonschema:"scene version (default: the latest)"`
	ObjectiveID string `json:"objectiveId,omitempty" jsonschema:"objective profile (default: the scene's first)"`
	Snapshots   int    `json:"snapshots,omitempty" jsonschema:"replayed test-run snapshots, one trial each (default 12)"`
	Profile     string `json:"profile,omitempty" jsonschema:"twin acceptance profile (default twin-v2)"`
	Seed        uint64 `json:"seed,omitempty" jsonschema:"seed of the optimiser's search order (default 1)"`
}

type gateOut struct {
	Result *gate.Result `json:"result" jsonschema:"the stored evaluation: checks with measured values, tuning mode, gate trials, shadow evidence"`
	Note   string       `json:"note"`
}

func (t *toolbox) gateEvaluate(ctx context.Context, in gateIn) (gateOut, error) {
	if err := t.allow(auth.ActTrial, ""); err != nil {
		return gateOut{}, err
	}
	if _, err := t.model(ctx, in.ModelID, auth.ActTrial); err != nil {
		return gateOut{}, err
	}
	if in.SceneID == "" {
		return gateOut{}, core.FieldErrorf(core.CodeInvalidArgument, "sceneId", "sceneId is required")
	}
	scene, err := t.d.Store.GetScene(ctx, in.SceneID, in.Version)
	if err != nil {
		return gateOut{}, err
	}
	if err := t.allow(auth.ActTrial, scene.LineID); err != nil {
		return gateOut{}, err
	}
	if in.Snapshots < 0 {
		return gateOut{}, core.FieldErrorf(core.CodeInvalidArgument, "snapshots", "snapshots must be positive")
	}
	seed := in.Seed
	if seed == 0 {
		seed = 1
	}
	r, err := gate.Evaluate(ctx, t.d.Store, t.d.DataDir, in.ModelID, gate.Options{SceneID: scene.SceneID, SceneVersion: scene.SceneVersion,
		ObjectiveID: in.ObjectiveID, Snapshots: in.Snapshots, Profile: in.Profile, By: t.p.Name, Seed: seed})
	if err != nil {
		return gateOut{}, err
	}
	note := "gate failed: the model stays where it is; see the failed checks"
	if r.Report.Passed {
		note = "gate passed: mpc_optimize now uses precise_search; promotion to production is a person's decision"
	}
	return gateOut{Result: r, Note: note}, nil
}

// ---- twin_calibration_request

type calibrationIn struct {
	ModelID string `json:"modelId" jsonschema:"model whose recalibration signals are measured"`
	SceneID string `json:"sceneId,omitempty" jsonschema:"scene (part of the dedup key; default none)"`
}

type calibrationOut struct {
	Decision *recal.Decision `json:"decision" jsonschema:"QUEUED, TRIGGER_THRESHOLD_NOT_REACHED or ACTIVE_OR_COOLDOWN, with the measured signals"`
	Policy   recal.Policy    `json:"policy"`
	Note     string          `json:"note"`
}

func (t *toolbox) calibrationRequest(ctx context.Context, in calibrationIn) (calibrationOut, error) {
	if err := t.allow(auth.ActTrial, ""); err != nil {
		return calibrationOut{}, err
	}
	if _, err := t.model(ctx, in.ModelID, auth.ActTrial); err != nil {
		return calibrationOut{}, err
	}
	if in.SceneID != "" {
		sc, err := t.d.Store.GetScene(ctx, in.SceneID, "")
		if err != nil {
			return calibrationOut{}, err
		}
		if err := t.allow(auth.ActTrial, sc.LineID); err != nil {
			return calibrationOut{}, err
		}
	}
	p := recal.DefaultPolicy()
	sig, err := recal.ComputeSignals(ctx, t.d.Store, t.d.DataDir, in.ModelID, in.SceneID, recal.SignalOptions{})
	if err != nil {
		return calibrationOut{}, err
	}
	d, err := recal.Request(ctx, t.d.Store, *sig, p, t.p.Name)
	if err != nil {
		return calibrationOut{}, err
	}
	return calibrationOut{Decision: d, Policy: p, Note: "a queued request is processed by the calibration worker; its new model is a candidate that a person promotes"}, nil
}

// ---- twin_certificate_request

type certRequestIn struct {
	TrialID string  `json:"trialId" jsonschema:"a stored trial that passes and improves on the baseline (twin_trial_run or mpc_optimize)"`
	TTLSec  float64 `json:"ttlSec,omitempty" jsonschema:"lifetime in seconds (default 900, at most 86400)"`
}

type certRequestOut struct {
	Certificate *twinstore.CertRecord `json:"certificate" jsonschema:"the signed certificate with its hashes; status ISSUED"`
	Status      string                `json:"status" jsonschema:"always ISSUED: waiting for a person with the approver role"`
	Note        string                `json:"note"`
}

func (t *toolbox) certificateRequest(ctx context.Context, in certRequestIn) (certRequestOut, error) {
	if err := t.allow(auth.ActCertRequest, ""); err != nil {
		return certRequestOut{}, err
	}
	if in.TrialID == "" {
		return certRequestOut{}, core.FieldErrorf(core.CodeInvalidArgument, "trialId", "trialId is required")
	}
	if in.TTLSec < 0 {
		return certRequestOut{}, core.FieldErrorf(core.CodeInvalidArgument, "ttlSec", "ttlSec must be positive")
	}
	tr, err := t.d.Store.GetTrial(ctx, in.TrialID)
	if err != nil {
		return certRequestOut{}, err
	}
	if err := t.allow(auth.ActCertRequest, tr.LineID); err != nil {
		return certRequestOut{}, err
	}
	if t.d.Key == nil {
		return certRequestOut{}, core.Errorf(core.CodeInternal, "this server has no certificate key")
	}
	ttl := cert.DefaultTTL
	if in.TTLSec > 0 {
		ttl = time.Duration(in.TTLSec * float64(time.Second))
	}
	rec, err := t.d.Store.IssueCertificate(ctx, in.TrialID, t.p.Name, t.d.Key, ttl, t.now())
	if err != nil {
		return certRequestOut{}, err
	}
	if rec.Cert.Status != contract.CertIssued {
		// Issuing only ever queues; anything else is a broken invariant.
		return certRequestOut{}, core.Errorf(core.CodeInternal, "certificate %s was issued with status %s, not ISSUED", rec.Cert.RecommendationID, rec.Cert.Status)
	}
	t.d.Bus.Publish(events.Event{Kind: events.CertificateUp, Line: rec.LineID, ID: rec.Cert.RecommendationID,
		Data: map[string]any{"status": string(rec.Cert.Status), "by": t.p.Name, "trialId": in.TrialID}})
	return certRequestOut{Certificate: rec, Status: string(rec.Cert.Status),
		Note: "queued for a person with the approver role (not " + t.p.Name + ", the requester); nothing is written until it is approved and executed by people"}, nil
}

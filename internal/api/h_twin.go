package api

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"sort"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/engine"
	"github.com/aml-project/aml/internal/twin/gate"
	"github.com/aml-project/aml/internal/twin/recal"
	"github.com/aml-project/aml/internal/twin/shadow"
	"github.com/aml-project/aml/internal/twin/snapshot"
)

// newID is a time-ordered id with a random suffix (unique across
// concurrent requests and processes).
func newID(prefix string, now time.Time) string {
	var b [4]byte
	rand.Read(b[:])
	return prefix + "-" + now.UTC().Format("20060102T150405.000") + "-" + hex.EncodeToString(b[:])
}

// ---- scenes and objectives

type sceneResult struct {
	SceneID      string `json:"sceneId"`
	SceneVersion string `json:"sceneVersion"`
	LineID       string `json:"lineId"`
	Status       string `json:"status"`
	Hash         string `json:"hash"`
	FrozenBy     string `json:"frozenBy,omitempty"`
	FrozenAt     string `json:"frozenAt,omitempty"`
}

func sceneSummary(c *contract.SceneContract) (sceneResult, error) {
	h, err := c.Hash()
	if err != nil {
		return sceneResult{}, err
	}
	r := sceneResult{SceneID: c.SceneID, SceneVersion: c.SceneVersion, LineID: c.LineID, Status: string(c.Status), Hash: h, FrozenBy: c.FrozenBy}
	if !c.FrozenAt.IsZero() {
		r.FrozenAt = c.FrozenAt.UTC().Format(time.RFC3339)
	}
	return r, nil
}

func (s *Server) listScenes(c *call) (any, error) {
	line := c.q("line")
	if err := c.scopeLine(line); err != nil {
		return nil, err
	}
	cs, err := s.d.Store.ListScenes(c.ctx, line)
	if err != nil {
		return nil, err
	}
	out := []sceneResult{}
	for _, sc := range cs {
		if !c.p.InScope(sc.LineID) {
			continue
		}
		r, err := sceneSummary(sc)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return listOf(out), nil
}

func (s *Server) putScene(c *call) (any, error) {
	var sc *contract.SceneContract
	switch c.q("preset") {
	case "default-injection":
		sc = contract.DefaultInjectionScene()
	case "":
		b, err := c.rawBody()
		if err != nil {
			return nil, err
		}
		if sc, err = contract.ParseScene(b); err != nil {
			return nil, err
		}
	default:
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "preset", "unknown preset %q (default-injection)", c.q("preset"))
	}
	if err := c.line(sc.LineID); err != nil {
		return nil, err
	}
	// The author is the authenticated caller, whatever the document says.
	sc.CreatedBy = c.p.Name
	if err := s.d.Store.PutScene(c.ctx, sc); err != nil {
		return nil, err
	}
	return sceneSummary(sc)
}

func (s *Server) showScene(c *call) (any, error) {
	sc, err := s.d.Store.GetScene(c.ctx, c.param("id"), c.q("version"))
	if err != nil {
		return nil, err
	}
	if err := c.line(sc.LineID); err != nil {
		return nil, err
	}
	h, err := sc.Hash()
	if err != nil {
		return nil, err
	}
	return map[string]any{"scene": sc, "hash": h}, nil
}

type freezeReq struct {
	Version    string `json:"version"`
	ExpectHash string `json:"expectHash"` // the content hash the approver reviewed
}

func (s *Server) freezeScene(c *call) (any, error) {
	var req freezeReq
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if req.Version == "" {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "version", "version is required")
	}
	if req.ExpectHash == "" {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "expectHash", "expectHash is required (the hash the approver reviewed)")
	}
	sc, err := s.d.Store.GetScene(c.ctx, c.param("id"), req.Version)
	if err != nil {
		return nil, err
	}
	if err := c.line(sc.LineID); err != nil {
		return nil, err
	}
	fr, err := s.d.Store.FreezeScene(c.ctx, sc.SceneID, req.Version, c.p.Name, strings.ToLower(req.ExpectHash))
	if err != nil {
		return nil, err
	}
	return sceneSummary(fr)
}

func (s *Server) putObjective(c *call) (any, error) {
	var o *contract.ObjectiveProfile
	switch c.q("preset") {
	case "default-injection":
		o = contract.DefaultInjectionObjective()
	case "":
		o = &contract.ObjectiveProfile{}
		if err := c.decode(o); err != nil {
			return nil, err
		}
	default:
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "preset", "unknown preset %q (default-injection)", c.q("preset"))
	}
	o.CreatedBy = c.p.Name
	h, err := s.d.Store.PutObjective(c.ctx, o)
	if err != nil {
		return nil, err
	}
	return map[string]any{"objectiveId": o.ObjectiveID, "hash": h}, nil
}

func (s *Server) showObjective(c *call) (any, error) {
	o, h, err := s.d.Store.GetObjective(c.ctx, c.param("id"))
	if err != nil {
		return nil, err
	}
	return map[string]any{"objective": o, "hash": h}, nil
}

// ---- snapshots

type snapshotReq struct {
	Scene        string `json:"scene"`
	SceneVersion string `json:"sceneVersion,omitempty"`
	Run          string `json:"run,omitempty"`
	Strict       bool   `json:"strict,omitempty"`
	MaxAgeMs     int64  `json:"maxAgeMs,omitempty"`
	// Bindings maps scene variable → node (wins over the model's).
	Bindings map[string]string `json:"bindings,omitempty"`
	// At takes the snapshot as of this past instant (epoch ms; replay).
	At int64 `json:"at,omitempty"`
	// Model estimates unmeasured states and supplies its dataset's bindings.
	Model string `json:"model,omitempty"`
	Phase string `json:"phase,omitempty"`
}

func (s *Server) takeSnapshot(c *call) (any, error) {
	var req snapshotReq
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if req.Scene == "" {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "scene", "scene is required")
	}
	if req.MaxAgeMs < 0 {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "maxAgeMs", "maxAgeMs must not be negative")
	}
	scene, err := s.d.Store.GetScene(c.ctx, req.Scene, req.SceneVersion)
	if err != nil {
		return nil, err
	}
	if err := c.line(scene.LineID); err != nil {
		return nil, err
	}
	o := snapshot.Options{RunID: req.Run, Strict: req.Strict, MaxAge: time.Duration(req.MaxAgeMs) * time.Millisecond, Phase: req.Phase,
		CreatedBy: c.p.Name, Bindings: req.Bindings}
	if req.At != 0 {
		o.Now, o.Replay = time.UnixMilli(req.At).UTC(), true
	}
	if req.Model != "" {
		if _, err := s.model(c, req.Model); err != nil {
			return nil, err
		}
		tw, err := engine.Load(c.ctx, s.d.Store, s.d.DataDir, req.Model)
		if err != nil {
			return nil, err
		}
		o.Estimator = tw
		if o.Bindings == nil {
			o.Bindings = map[string]string{}
		}
		for v, n := range tw.Bindings() {
			if _, set := o.Bindings[v]; !set {
				o.Bindings[v] = n
			}
		}
	}
	snap, rep, err := snapshot.Take(c.ctx, s.d.Store, scene, o)
	if err != nil {
		return nil, err
	}
	if err := s.d.Store.PutSnapshot(c.ctx, snap, req.Strict); err != nil {
		return nil, err
	}
	return map[string]any{"snapshot": snap, "report": rep}, nil
}

func (s *Server) listSnapshots(c *call) (any, error) {
	line := c.q("line")
	if err := c.scopeLine(line); err != nil {
		return nil, err
	}
	limit, err := c.qInt("limit", 100, 1, 10_000)
	if err != nil {
		return nil, err
	}
	l, err := s.d.Store.ListSnapshots(c.ctx, line, limit)
	if err != nil {
		return nil, err
	}
	out := []twinstore.SnapshotInfo{}
	for _, i := range l {
		if c.p.InScope(i.LineID) {
			out = append(out, i)
		}
	}
	return listOf(out), nil
}

func (s *Server) showSnapshot(c *call) (any, error) {
	snap, info, err := s.d.Store.GetSnapshotInfo(c.ctx, c.param("id"))
	if err != nil {
		return nil, err
	}
	if err := c.line(info.LineID); err != nil {
		return nil, err
	}
	return map[string]any{"snapshot": snap, "info": info}, nil
}

// ---- trials and optimisation

type trialReq struct {
	Model     string `json:"model"`
	Snapshot  string `json:"snapshot"`
	Objective string `json:"objective,omitempty"`
	// Set moves controls at step 0 and holds them (others keep the
	// snapshot's value); Candidate gives the whole trajectory instead.
	Set       map[string]float64   `json:"set,omitempty"`
	Candidate []map[string]float64 `json:"candidate,omitempty"`
}

// twinInputs loads a snapshot with its scene and objective and checks the
// caller's scope on the snapshot's and the model's lines.
func (s *Server) twinInputs(c *call, modelID, snapID, objID string) (*contract.TwinSnapshot, *contract.SceneContract, *contract.ObjectiveProfile, error) {
	if modelID == "" {
		return nil, nil, nil, core.FieldErrorf(core.CodeInvalidArgument, "model", "model is required")
	}
	if snapID == "" {
		return nil, nil, nil, core.FieldErrorf(core.CodeInvalidArgument, "snapshot", "snapshot is required")
	}
	if _, err := s.model(c, modelID); err != nil {
		return nil, nil, nil, err
	}
	snap, err := s.d.Store.GetSnapshot(c.ctx, snapID)
	if err != nil {
		return nil, nil, nil, err
	}
	if err := c.line(snap.LineID); err != nil {
		return nil, nil, nil, err
	}
	scene, err := s.d.Store.GetScene(c.ctx, snap.SceneID, snap.SceneVersion)
	if err != nil {
		return nil, nil, nil, err
	}
	if objID == "" {
		if len(scene.ObjectiveProfileIDs) == 0 {
			return nil, nil, nil, core.FieldErrorf(core.CodeInvalidArgument, "objective", "scene %s names no objective profile; give objective", scene.SceneID)
		}
		objID = scene.ObjectiveProfileIDs[0]
	}
	obj, _, err := s.d.Store.GetObjective(c.ctx, objID)
	if err != nil {
		return nil, nil, nil, err
	}
	return snap, scene, obj, nil
}

func (s *Server) trialDone(rec twinstore.TrialRecord, kind string) {
	s.d.Bus.Publish(events.Event{Kind: events.TrialDone, Line: rec.LineID, ID: rec.Trial.TrialID, Data: map[string]any{
		"kind": kind, "purpose": rec.Purpose, "passed": rec.Passed, "rejectCode": rec.RejectCode, "improvement": rec.Improvement, "modelId": rec.Trial.ModelID}})
}

func (s *Server) runTrial(c *call) (any, error) {
	var req trialReq
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if (len(req.Set) == 0) == (len(req.Candidate) == 0) {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "set", "give either set (control → value) or candidate (the trajectory)")
	}
	snap, scene, obj, err := s.twinInputs(c, req.Model, req.Snapshot, req.Objective)
	if err != nil {
		return nil, err
	}
	cand := req.Candidate
	if len(req.Set) > 0 {
		step := map[string]float64{}
		for k, v := range snap.ControlValues {
			step[k] = v
		}
		for k, v := range req.Set {
			if _, known := step[k]; !known {
				ks := make([]string, 0, len(snap.ControlValues))
				for k := range snap.ControlValues {
					ks = append(ks, k)
				}
				sort.Strings(ks)
				return nil, core.FieldErrorf(core.CodeInvalidArgument, "set."+k, "%s is not a control of scene %s (controls: %s)", k, scene.SceneID, strings.Join(ks, ", "))
			}
			step[k] = v
		}
		cand = make([]map[string]float64, obj.HorizonSteps)
		for i := range cand {
			cand[i] = step
		}
	}
	now := s.o.Now().UTC()
	t0 := time.Now()
	res, err := engine.RunTrial(c.ctx, s.d.Store, s.d.DataDir, req.Model, engine.TrialInput{Scene: scene, Snapshot: snap, Objective: obj,
		Candidate: cand, TrialID: newID("trial", now), CreatedBy: c.p.Name, Now: now})
	s.metrics.trials.WithLabelValues("trial").Observe(time.Since(t0).Seconds())
	if err != nil {
		return nil, err
	}
	rec, err := s.d.Store.PutTrial(c.ctx, res.Trial, twinstore.TrialManual, "")
	if err != nil {
		return nil, err
	}
	s.trialDone(rec, "trial")
	return map[string]any{"record": rec, "detail": res.Detail, "trial": res.Trial}, nil
}

func (s *Server) listTrials(c *call) (any, error) {
	f := twinstore.TrialFilter{ModelID: c.q("model"), GateEvalID: c.q("gateEval"), LineID: c.q("line")}
	if err := c.scopeLine(f.LineID); err != nil {
		return nil, err
	}
	var err error
	if f.Limit, err = c.qInt("limit", 100, 1, 10_000); err != nil {
		return nil, err
	}
	ts, err := s.d.Store.ListTrials(c.ctx, f)
	if err != nil {
		return nil, err
	}
	out := []twinstore.TrialRecord{}
	for _, t := range ts {
		if c.p.InScope(t.LineID) {
			out = append(out, t)
		}
	}
	return listOf(out), nil
}

func (s *Server) showTrial(c *call) (any, error) {
	t, err := s.d.Store.GetTrial(c.ctx, c.param("id"))
	if err != nil {
		return nil, err
	}
	return t, c.line(t.LineID)
}

type optimizeReq struct {
	Model     string `json:"model"`
	Snapshot  string `json:"snapshot"`
	Objective string `json:"objective,omitempty"`
	// Mode is auto (default), safe_small_step or precise_search.
	Mode          string `json:"mode,omitempty"`
	Seed          uint64 `json:"seed,omitempty"`
	MaxCandidates int    `json:"maxCandidates,omitempty"`
}

func (s *Server) optimize(c *call) (any, error) {
	var req optimizeReq
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	snap, scene, obj, err := s.twinInputs(c, req.Model, req.Snapshot, req.Objective)
	if err != nil {
		return nil, err
	}
	mode := req.Mode
	switch mode {
	case engine.ModeSafeSmallStep, engine.ModePreciseSearch:
	case "", "auto":
		mode = engine.ModeSafeSmallStep
		if g, err := s.d.Store.LatestGateEval(c.ctx, req.Model); err == nil && g.Passed {
			mode = engine.ModePreciseSearch
		}
	default:
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "mode", "mode %q: want auto, %s or %s", mode, engine.ModeSafeSmallStep, engine.ModePreciseSearch)
	}
	if req.Seed == 0 {
		req.Seed = 1
	}
	if req.MaxCandidates < 0 {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "maxCandidates", "maxCandidates must not be negative")
	}
	now := s.o.Now().UTC()
	t0 := time.Now()
	res, err := engine.RunOptimize(c.ctx, s.d.Store, s.d.DataDir, req.Model, engine.OptimizeInput{Scene: scene, Snapshot: snap, Objective: obj,
		Mode: mode, Seed: req.Seed, MaxCandidates: req.MaxCandidates, TrialID: newID("trial", now), CreatedBy: c.p.Name, Now: now})
	s.metrics.trials.WithLabelValues("optimize").Observe(time.Since(t0).Seconds())
	if err != nil {
		return nil, err
	}
	out := map[string]any{"result": res}
	if res.Best != nil {
		rec, err := s.d.Store.PutTrial(c.ctx, res.Best, twinstore.TrialOptimize, "")
		if err != nil {
			return nil, err
		}
		out["record"] = rec
		s.trialDone(rec, "optimize")
	}
	return out, nil
}

type gateReq struct {
	Model        string `json:"model"`
	Scene        string `json:"scene"`
	SceneVersion string `json:"sceneVersion,omitempty"`
	Objective    string `json:"objective,omitempty"`
	Snapshots    int    `json:"snapshots,omitempty"`
	Profile      string `json:"profile,omitempty"`
	Seed         uint64 `json:"seed,omitempty"`
}

func (s *Server) evaluateGate(c *call) (any, error) {
	var req gateReq
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if req.Model == "" || req.Scene == "" {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "model", "model and scene are required")
	}
	m, err := s.model(c, req.Model)
	if err != nil {
		return nil, err
	}
	scene, err := s.d.Store.GetScene(c.ctx, req.Scene, req.SceneVersion)
	if err != nil {
		return nil, err
	}
	if err := c.line(scene.LineID); err != nil {
		return nil, err
	}
	if req.Snapshots < 0 {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "snapshots", "snapshots must not be negative")
	}
	if req.Seed == 0 {
		req.Seed = 1
	}
	t0 := time.Now()
	r, err := gate.Evaluate(c.ctx, s.d.Store, s.d.DataDir, m.ID, gate.Options{SceneID: req.Scene, SceneVersion: req.SceneVersion, ObjectiveID: req.Objective,
		Snapshots: req.Snapshots, Profile: req.Profile, By: c.p.Name, Seed: req.Seed})
	s.metrics.trials.WithLabelValues("gate").Observe(time.Since(t0).Seconds())
	if err != nil {
		return nil, err
	}
	s.d.Bus.Publish(events.Event{Kind: events.TrialDone, Line: m.LineID, ID: r.GateEvalID, Data: map[string]any{
		"kind": "gate", "modelId": m.ID, "passed": r.Report.Passed, "trials": len(r.Trials)}})
	return r, nil
}

func (s *Server) latestGate(c *call) (any, error) {
	m, err := s.model(c, c.param("model"))
	if err != nil {
		return nil, err
	}
	g, err := s.d.Store.LatestGateEval(c.ctx, m.ID)
	if err != nil {
		return nil, err
	}
	return map[string]any{"gateEvalId": g.GateEvalID, "modelId": g.ModelID, "createdAt": g.CreatedAt, "createdBy": g.CreatedBy,
		"passed": g.Passed, "tuningMode": g.TuningMode, "report": json.RawMessage(g.Report)}, nil
}

// ---- shadow and calibration

type shadowReq struct {
	Model   string `json:"model"`
	MaxRuns int    `json:"maxRuns,omitempty"`
	DryRun  bool   `json:"dryRun,omitempty"`
}

func (s *Server) shadow(c *call) (any, error) {
	var req shadowReq
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if req.Model == "" {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "model", "model is required")
	}
	if req.MaxRuns < 0 {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "maxRuns", "maxRuns must not be negative")
	}
	m, err := s.model(c, req.Model)
	if err != nil {
		return nil, err
	}
	return shadow.Collect(c.ctx, s.d.Store, s.d.DataDir, m.ID, shadow.Options{MaxRuns: req.MaxRuns, DryRun: req.DryRun})
}

func (s *Server) listShadow(c *call) (any, error) {
	m, err := s.model(c, c.param("model"))
	if err != nil {
		return nil, err
	}
	rs, err := s.d.Store.ListShadow(c.ctx, m.ID)
	if err != nil {
		return nil, err
	}
	return listOf(rs), nil
}

type calibrateReq struct {
	Model string `json:"model"`
	Scene string `json:"scene,omitempty"`
	// Run processes the queue once now: settle finished requests, claim
	// the oldest queued one and submit its job to the workers.
	Run bool `json:"run,omitempty"`
}

func (s *Server) calibrate(c *call) (any, error) {
	var req calibrateReq
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if req.Model == "" {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "model", "model is required")
	}
	m, err := s.model(c, req.Model)
	if err != nil {
		return nil, err
	}
	p := recal.DefaultPolicy()
	sig, err := recal.ComputeSignals(c.ctx, s.d.Store, s.d.DataDir, m.ID, req.Scene, recal.SignalOptions{})
	if err != nil {
		return nil, err
	}
	d, err := recal.Request(c.ctx, s.d.Store, *sig, p, c.p.Name)
	if err != nil {
		return nil, err
	}
	out := map[string]any{"decision": d, "policy": p}
	if req.Run {
		r, err := s.runner()
		if err != nil {
			return nil, err
		}
		st, err := recal.RunNext(c.ctx, s.d.Store, r, recal.RunOptions{DataDir: s.d.DataDir, MaxConcurrent: p.MaxConcurrentRuns})
		if err != nil {
			return nil, err
		}
		out["step"] = st
	}
	return out, nil
}

func (s *Server) listCalibrations(c *call) (any, error) {
	line := c.q("line")
	if err := c.scopeLine(line); err != nil {
		return nil, err
	}
	rs, err := recal.List(c.ctx, s.d.Store, s.o.Now())
	if err != nil {
		return nil, err
	}
	out := []twinstore.CalibrationRequest{}
	for _, r := range rs {
		if c.p.InScope(r.LineID) && (line == "" || r.LineID == line) {
			out = append(out, r)
		}
	}
	return listOf(out), nil
}

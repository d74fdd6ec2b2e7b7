package app

import (
	"context"
	"encoding/json"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/eval"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/registry"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/engine"
	"github.com/aml-project/aml/internal/twin/gate"
	"github.com/aml-project/aml/internal/twin/recal"
	"github.com/aml-project/aml/internal/twin/shadow"
	"github.com/aml-project/aml/internal/twin/snapshot"
)

// The digital-twin use cases: scenes, objectives, snapshots, trials,
// optimisation, the twin gate, shadow evidence and recalibration.

var (
	opSceneList      = Op{Name: "scene.list", Act: auth.ActRead, Summary: "List scene contracts"}
	opScenePut       = Op{Name: "scene.put", Act: auth.ActTrial, Summary: "Store a scene contract as a draft (replaces a draft of the same id and version)"}
	opSceneShow      = Op{Name: "scene.show", Act: auth.ActRead, Summary: "A scene contract with its content hash (latest version unless version)"}
	opSceneFreeze    = Op{Name: "scene.freeze", Act: auth.ActSceneFreeze, Summary: "Freeze a draft scene (compare-and-set on the reviewed hash)"}
	opObjectivePut   = Op{Name: "objective.put", Act: auth.ActTrial, Summary: "Store an objective profile"}
	opObjectiveShow  = Op{Name: "objective.show", Act: auth.ActRead, Summary: "An objective profile with its hash"}
	opSnapshotTake   = Op{Name: "snapshot.take", Act: auth.ActTrial, Heavy: true, Summary: "Take a snapshot of a scene's variables from the store and record it"}
	opSnapshotList   = Op{Name: "snapshot.list", Act: auth.ActRead, Summary: "List snapshots, newest first"}
	opSnapshotShow   = Op{Name: "snapshot.show", Act: auth.ActRead, Summary: "A stored snapshot (verified against its hash)"}
	opTrialRun       = Op{Name: "trial.run", Act: auth.ActTrial, Heavy: true, Summary: "Run one virtual trial (never written to the machine) and store it"}
	opTrialList      = Op{Name: "trial.list", Act: auth.ActRead, Summary: "List stored trials"}
	opTrialShow      = Op{Name: "trial.show", Act: auth.ActRead, Summary: "A stored trial"}
	opOptimize       = Op{Name: "optimize", Act: auth.ActTrial, Heavy: true, Summary: "Search the lowest-cost passing setpoint move and store its trial"}
	opGateEvaluate   = Op{Name: "gate.evaluate", Act: auth.ActTrial, Heavy: true, Summary: "Evaluate the twin acceptance gate with measured inputs and store it"}
	opGateLatest     = Op{Name: "gate.latest", Act: auth.ActRead, Summary: "The model's latest twin gate evaluation"}
	opShadowCollect  = Op{Name: "shadow.collect", Act: auth.ActTrial, Heavy: true, Summary: "Collect and store a model's shadow evidence"}
	opShadowList     = Op{Name: "shadow.list", Act: auth.ActRead, Summary: "A model's stored shadow evidence"}
	opCalibrate      = Op{Name: "calibrate", Act: auth.ActTrial, Heavy: true, Summary: "Measure recalibration signals and queue a recalibration when the policy says so"}
	opCalibrationLst = Op{Name: "calibration.list", Act: auth.ActRead, Summary: "Recalibration requests, newest first"}
)

// twinOps lists the use cases of this file.
func twinOps() []*Op {
	return []*Op{
		bind(&opSceneList, (*App).SceneList),
		bind(&opScenePut, (*App).ScenePut),
		bind(&opSceneShow, (*App).SceneShow),
		bind(&opSceneFreeze, (*App).SceneFreeze),
		bind(&opObjectivePut, (*App).ObjectivePut),
		bind(&opObjectiveShow, (*App).ObjectiveShow),
		bind(&opSnapshotTake, (*App).SnapshotTake),
		bind(&opSnapshotList, (*App).SnapshotList),
		bind(&opSnapshotShow, (*App).SnapshotShow),
		bind(&opTrialRun, (*App).TrialRun),
		bind(&opTrialList, (*App).TrialList),
		bind(&opTrialShow, (*App).TrialShow),
		bind(&opOptimize, (*App).Optimize),
		bind(&opGateEvaluate, (*App).GateEvaluate),
		bind(&opGateLatest, (*App).GateLatest),
		bind(&opShadowCollect, (*App).ShadowCollect),
		bind(&opShadowList, (*App).ShadowList),
		bind(&opCalibrate, (*App).Calibrate),
		bind(&opCalibrationLst, (*App).CalibrationList),
	}
}

// Presets of scene.put and objective.put.
const PresetDefaultInjection = "default-injection"

// ---- scenes

// SceneSummary is a scene's identity, status and hash.
type SceneSummary struct {
	SceneID      string `json:"sceneId"`
	SceneVersion string `json:"sceneVersion"`
	LineID       string `json:"lineId"`
	Status       string `json:"status" jsonschema:"draft or frozen"`
	Hash         string `json:"hash"`
	FrozenBy     string `json:"frozenBy,omitempty"`
	FrozenAt     string `json:"frozenAt,omitempty"`
	// Objective and ObjectiveHash: the objective stored with the scene
	// (scene.put of a scene file), if any.
	Objective     string `json:"objective,omitempty"`
	ObjectiveHash string `json:"objectiveHash,omitempty"`
}

// SummarizeScene returns a scene's summary.
func SummarizeScene(c *contract.SceneContract) (SceneSummary, error) {
	h, err := c.Hash()
	if err != nil {
		return SceneSummary{}, err
	}
	r := SceneSummary{SceneID: c.SceneID, SceneVersion: c.SceneVersion, LineID: c.LineID, Status: string(c.Status), Hash: h, FrozenBy: c.FrozenBy}
	if !c.FrozenAt.IsZero() {
		r.FrozenAt = c.FrozenAt.UTC().Format(time.RFC3339)
	}
	return r, nil
}

// SceneListRequest filters scenes.
type SceneListRequest struct {
	Line string `json:"line,omitempty" jsonschema:"only this line"`
}

// SceneList lists the scenes of p's lines.
func (a *App) SceneList(ctx context.Context, p Principal, req SceneListRequest) (List[SceneSummary], error) {
	return run(ctx, a, p, &opSceneList, req, func(ctx context.Context, p Principal, req SceneListRequest) (List[SceneSummary], error) {
		if err := scope(p, auth.ActRead, req.Line); err != nil {
			return List[SceneSummary]{}, err
		}
		cs, err := a.d.Store.ListScenes(ctx, req.Line)
		if err != nil {
			return List[SceneSummary]{}, err
		}
		out := []SceneSummary{}
		for _, sc := range cs {
			if !p.InScope(sc.LineID) {
				continue
			}
			r, err := SummarizeScene(sc)
			if err != nil {
				return List[SceneSummary]{}, err
			}
			out = append(out, r)
		}
		return ListOf(out), nil
	})
}

// ScenePutRequest stores a scene contract as a draft: the contract, or a
// preset.
type ScenePutRequest struct {
	Preset string                  `json:"preset,omitempty" jsonschema:"default-injection: the built-in injection-moulding scene (no scene)"`
	Scene  *contract.SceneContract `json:"scene,omitempty" jsonschema:"the scene contract (docs/twin.md)"`
	// Objective, optional, is stored with the scene (a scene file's
	// objective, docs/scene-file.md): on the scene's line, checked against
	// the scene.
	Objective *contract.ObjectiveProfile `json:"objective,omitempty" jsonschema:"an objective profile to store with the scene (the scene file's objective)"`
}

// UnmarshalJSON reads the scene through the contract's own strict parser
// (AML_CONTRACT_INVALID with the document's field paths), as a scene file
// is read.
func (r *ScenePutRequest) UnmarshalJSON(b []byte) error {
	var raw struct {
		Preset    string                     `json:"preset"`
		Scene     json.RawMessage            `json:"scene"`
		Objective *contract.ObjectiveProfile `json:"objective"`
	}
	if err := strictDecode(b, &raw); err != nil {
		return err
	}
	r.Preset, r.Scene, r.Objective = raw.Preset, nil, raw.Objective
	if len(raw.Scene) > 0 && string(raw.Scene) != "null" {
		sc, err := contract.ParseScene(raw.Scene)
		if err != nil {
			return err
		}
		r.Scene = sc
	}
	return nil
}

// Validate requires exactly one of preset and scene.
func (r *ScenePutRequest) Validate() error {
	switch {
	case r.Preset != "" && r.Preset != PresetDefaultInjection:
		return core.FieldErrorf(core.CodeInvalidArgument, "preset", "unknown preset %q (default-injection)", r.Preset)
	case (r.Preset == "") == (r.Scene == nil):
		return core.FieldErrorf(core.CodeInvalidArgument, "scene", "give either scene (the contract) or preset")
	case r.Objective != nil && r.Preset != "":
		return core.FieldErrorf(core.CodeInvalidArgument, "objective", "a preset scene takes no objective (objective.put --default-injection)")
	}
	return nil
}

// ScenePut stores a draft scene; its author is p, whatever the document
// says.
func (a *App) ScenePut(ctx context.Context, p Principal, req ScenePutRequest) (SceneSummary, error) {
	return run(ctx, a, p, &opScenePut, req, func(ctx context.Context, p Principal, req ScenePutRequest) (SceneSummary, error) {
		sc := req.Scene
		if req.Preset != "" {
			sc = contract.DefaultInjectionScene()
		} else {
			// Through the contract's own checks (as a file would be).
			b, err := json.Marshal(sc)
			if err != nil {
				return SceneSummary{}, core.Wrap(core.CodeContractInvalid, err, "scene")
			}
			if sc, err = contract.ParseScene(b); err != nil {
				return SceneSummary{}, err
			}
		}
		if err := p.Allow(auth.ActTrial, sc.LineID); err != nil {
			return SceneSummary{}, err
		}
		// A draft of the same id and version is replaced: it must be in
		// p's lines too (no taking over another line's draft).
		if old, err := a.d.Store.GetScene(ctx, sc.SceneID, sc.SceneVersion); err == nil {
			if err := p.Allow(auth.ActTrial, old.LineID); err != nil {
				return SceneSummary{}, err
			}
		} else if core.CodeOf(err) != core.CodeNotFound {
			return SceneSummary{}, err
		}
		sc.CreatedBy = p.Name
		if sc.CreatedAt.IsZero() {
			sc.CreatedAt = a.o.Now().UTC().Truncate(time.Millisecond)
		}
		var objHash string
		if o := req.Objective; o != nil {
			// Checked in full before anything is stored.
			if o.LineID == "" {
				o.LineID = sc.LineID
			}
			if o.LineID != sc.LineID {
				return SceneSummary{}, core.FieldErrorf(core.CodeInvalidArgument, "objective.lineId", "the objective is for line %s, the scene for line %s", o.LineID, sc.LineID)
			}
			if err := o.Validate(); err != nil {
				return SceneSummary{}, err
			}
			if err := o.CheckAgainst(sc); err != nil {
				return SceneSummary{}, err
			}
			// a frozen scene is refused by PutScene: do not replace its
			// objective first
			if old, err := a.d.Store.GetScene(ctx, sc.SceneID, sc.SceneVersion); err == nil && old.Status == contract.SceneFrozen {
				return SceneSummary{}, core.FieldErrorf(core.CodeSceneFrozen, "scene", "scene %s@%s is frozen: derive a new version", sc.SceneID, sc.SceneVersion)
			}
			o.CreatedBy = p.Name
			if o.CreatedAt.IsZero() {
				o.CreatedAt = sc.CreatedAt
			}
			h, err := a.d.Store.PutObjective(ctx, o)
			if err != nil {
				return SceneSummary{}, err
			}
			objHash = h
		}
		if err := a.d.Store.PutScene(ctx, sc); err != nil {
			return SceneSummary{}, err
		}
		sum, err := SummarizeScene(sc)
		if req.Objective != nil {
			sum.Objective, sum.ObjectiveHash = req.Objective.ObjectiveID, objHash
		}
		return sum, err
	})
}

// SceneShowRequest names a scene.
type SceneShowRequest struct {
	ID      string `json:"id" jsonschema:"scene id"`
	Version string `json:"version,omitempty" jsonschema:"scene version (default: the latest)"`
}

// Validate requires the id.
func (r *SceneShowRequest) Validate() error { return required("id", r.ID) }

// SceneShowResponse is a scene with its content hash.
type SceneShowResponse struct {
	Scene *contract.SceneContract `json:"scene"`
	Hash  string                  `json:"hash"`
}

// scene looks up scene id (version "" = its latest) and checks p may
// act on its line; a scoped caller gets the same refusal for a missing
// scene as for another line's (unseen).
func (a *App) scene(ctx context.Context, p Principal, act auth.Action, id, version string) (*contract.SceneContract, error) {
	sc, err := a.d.Store.GetScene(ctx, id, version)
	if err != nil {
		return nil, unseen(p, err)
	}
	if err := p.Allow(act, sc.LineID); err != nil {
		return nil, err
	}
	return sc, nil
}

// SceneShow returns a scene contract with its hash.
func (a *App) SceneShow(ctx context.Context, p Principal, req SceneShowRequest) (SceneShowResponse, error) {
	return run(ctx, a, p, &opSceneShow, req, func(ctx context.Context, p Principal, req SceneShowRequest) (SceneShowResponse, error) {
		sc, err := a.scene(ctx, p, auth.ActRead, req.ID, req.Version)
		if err != nil {
			return SceneShowResponse{}, err
		}
		h, err := sc.Hash()
		if err != nil {
			return SceneShowResponse{}, err
		}
		return SceneShowResponse{Scene: sc, Hash: h}, nil
	})
}

// SceneFreezeRequest freezes the draft the approver reviewed.
type SceneFreezeRequest struct {
	ID         string `json:"id" jsonschema:"scene id"`
	Version    string `json:"version" jsonschema:"scene version"`
	ExpectHash string `json:"expectHash" jsonschema:"the content hash the approver reviewed"`
}

// Validate requires id, version and the reviewed hash.
func (r *SceneFreezeRequest) Validate() error {
	if r.ExpectHash == "" {
		return core.FieldErrorf(core.CodeInvalidArgument, "expectHash", "expectHash is required (the hash the approver reviewed)")
	}
	return firstErr(required("id", r.ID), required("version", r.Version))
}

// SceneFreeze freezes a draft scene whose hash is the reviewed one.
func (a *App) SceneFreeze(ctx context.Context, p Principal, req SceneFreezeRequest) (SceneSummary, error) {
	return run(ctx, a, p, &opSceneFreeze, req, func(ctx context.Context, p Principal, req SceneFreezeRequest) (SceneSummary, error) {
		sc, err := a.scene(ctx, p, auth.ActSceneFreeze, req.ID, req.Version)
		if err != nil {
			return SceneSummary{}, err
		}
		fr, err := a.d.Store.FreezeScene(ctx, sc.SceneID, req.Version, p.Name, strings.ToLower(req.ExpectHash))
		if err != nil {
			return SceneSummary{}, err
		}
		return SummarizeScene(fr)
	})
}

// ---- objectives

// ObjectivePutRequest stores an objective profile or a preset.
type ObjectivePutRequest struct {
	Preset    string                     `json:"preset,omitempty" jsonschema:"default-injection: the built-in objective (no objective)"`
	Objective *contract.ObjectiveProfile `json:"objective,omitempty" jsonschema:"the objective profile"`
	Line      string                     `json:"line,omitempty" jsonschema:"the line the profile belongs to (sets objective.lineId; a preset's default is its scene's line)"`
}

// Validate requires exactly one of preset and objective, and one line.
func (r *ObjectivePutRequest) Validate() error {
	switch {
	case r.Line != "" && r.Objective != nil && r.Objective.LineID != "" && r.Objective.LineID != r.Line:
		return core.FieldErrorf(core.CodeInvalidArgument, "line", "line %q and objective.lineId %q differ", r.Line, r.Objective.LineID)
	case r.Preset != "" && r.Preset != PresetDefaultInjection:
		return core.FieldErrorf(core.CodeInvalidArgument, "preset", "unknown preset %q (default-injection)", r.Preset)
	case (r.Preset == "") == (r.Objective == nil):
		return core.FieldErrorf(core.CodeInvalidArgument, "objective", "give either objective (the profile) or preset")
	}
	return nil
}

// ObjectivePutResponse is the stored objective's id and hash.
type ObjectivePutResponse struct {
	ObjectiveID string `json:"objectiveId"`
	Hash        string `json:"hash"`
}

// ObjectivePut stores an objective profile (a profile of the same id is
// replaced; trials keep the hash they used).
func (a *App) ObjectivePut(ctx context.Context, p Principal, req ObjectivePutRequest) (ObjectivePutResponse, error) {
	return run(ctx, a, p, &opObjectivePut, req, func(ctx context.Context, p Principal, req ObjectivePutRequest) (ObjectivePutResponse, error) {
		o := req.Objective
		if req.Preset != "" {
			o = contract.DefaultInjectionObjective()
		}
		if req.Line != "" {
			o.LineID = req.Line
		}
		// A line's profile is its engineers'; a global one steers every
		// line's optimiser and is an admin's.
		if o.LineID == "" && p.Role != auth.RoleAdmin {
			return ObjectivePutResponse{}, core.FieldErrorf(core.CodeForbidden, "line", "a global objective (no line) is admin-only: give line")
		}
		if err := p.Allow(auth.ActTrial, o.LineID); err != nil {
			return ObjectivePutResponse{}, err
		}
		// An id taken by another line's profile: the store's conflict names
		// that line, so a caller who may not see it gets the line-scope
		// refusal instead (the id is still not its to use).
		if !p.AllLines() {
			prev, _, err := a.d.Store.GetObjective(ctx, o.ObjectiveID)
			switch {
			case core.CodeOf(err) == core.CodeNotFound:
			case err != nil:
				return ObjectivePutResponse{}, err
			case prev.LineID != "" && prev.LineID != o.LineID && !p.InScope(prev.LineID):
				return ObjectivePutResponse{}, p.ScopeRefusal()
			}
		}
		o.CreatedBy = p.Name
		h, err := a.d.Store.PutObjective(ctx, o)
		if err != nil {
			return ObjectivePutResponse{}, err
		}
		return ObjectivePutResponse{ObjectiveID: o.ObjectiveID, Hash: h}, nil
	})
}

// ObjectiveShowRequest names an objective.
type ObjectiveShowRequest struct {
	ID string `json:"id" jsonschema:"objective id"`
}

// Validate requires the id.
func (r *ObjectiveShowRequest) Validate() error { return required("id", r.ID) }

// ObjectiveShowResponse is an objective with its hash.
type ObjectiveShowResponse struct {
	Objective *contract.ObjectiveProfile `json:"objective"`
	Hash      string                     `json:"hash"`
}

// ObjectiveShow returns an objective profile.
func (a *App) ObjectiveShow(ctx context.Context, p Principal, req ObjectiveShowRequest) (ObjectiveShowResponse, error) {
	return run(ctx, a, p, &opObjectiveShow, req, func(ctx context.Context, p Principal, req ObjectiveShowRequest) (ObjectiveShowResponse, error) {
		o, h, err := a.d.Store.GetObjective(ctx, req.ID)
		if err != nil {
			return ObjectiveShowResponse{}, unseen(p, err)
		}
		if o.LineID != "" {
			if err := p.Allow(auth.ActRead, o.LineID); err != nil {
				return ObjectiveShowResponse{}, err
			}
		}
		return ObjectiveShowResponse{Objective: o, Hash: h}, nil
	})
}

// ---- snapshots

// SnapshotTakeRequest takes a snapshot of a scene's variables.
type SnapshotTakeRequest struct {
	Scene        string   `json:"scene" jsonschema:"scene id"`
	SceneVersion string   `json:"sceneVersion,omitempty" jsonschema:"scene version (default: the latest)"`
	Run          string   `json:"run,omitempty" jsonschema:"only samples of this run"`
	Strict       bool     `json:"strict,omitempty" jsonschema:"refuse a stale or incomplete snapshot instead of recording its report"`
	MaxAge       Duration `json:"maxAge,omitempty" jsonschema:"freshness limit of every value (e.g. 60s; default the scene's)"`
	// Bindings maps scene variable → node (wins over the model's).
	Bindings map[string]string `json:"bindings,omitempty" jsonschema:"scene variable → node (wins over the model's)"`
	At       *Instant          `json:"at,omitempty" jsonschema:"take the snapshot as of this past instant (replay; epoch ms or RFC 3339)"`
	Model    string            `json:"model,omitempty" jsonschema:"model that estimates the unmeasured states and supplies its dataset's bindings"`
	Phase    string            `json:"phase,omitempty" jsonschema:"process phase recorded with the snapshot"`
}

// Validate requires the scene and a non-negative age.
func (r *SnapshotTakeRequest) Validate() error {
	if r.MaxAge < 0 {
		return core.FieldErrorf(core.CodeInvalidArgument, "maxAge", "maxAge must not be negative")
	}
	return required("scene", r.Scene)
}

// SnapshotTakeResponse is the recorded snapshot with its report.
type SnapshotTakeResponse struct {
	Snapshot *contract.TwinSnapshot `json:"snapshot"`
	Report   *snapshot.Report       `json:"report"`
}

// SnapshotTake takes and records a snapshot.
func (a *App) SnapshotTake(ctx context.Context, p Principal, req SnapshotTakeRequest) (SnapshotTakeResponse, error) {
	return run(ctx, a, p, &opSnapshotTake, req, func(ctx context.Context, p Principal, req SnapshotTakeRequest) (SnapshotTakeResponse, error) {
		scene, err := a.scene(ctx, p, auth.ActTrial, req.Scene, req.SceneVersion)
		if err != nil {
			return SnapshotTakeResponse{}, err
		}
		if req.Model != "" {
			if _, err := a.model(ctx, p, auth.ActTrial, req.Model); err != nil {
				return SnapshotTakeResponse{}, err
			}
		}
		return a.takeSnapshot(ctx, p, scene, req)
	})
}

// takeSnapshot takes a snapshot of scene as req says (p authorised) and
// records it: the one path of snapshot.take and of a certificate's
// re-validation at execution.
func (a *App) takeSnapshot(ctx context.Context, p Principal, scene *contract.SceneContract, req SnapshotTakeRequest) (SnapshotTakeResponse, error) {
	o := snapshot.Options{RunID: req.Run, Strict: req.Strict, MaxAge: req.MaxAge.D(), Phase: req.Phase, CreatedBy: p.Name, Bindings: req.Bindings, Clock: a.o.Now}
	if req.At != nil {
		o.Now, o.Replay = req.At.T(), true
	}
	if req.Model != "" {
		tw, err := engine.Load(ctx, a.d.Store, a.d.DataDir, req.Model)
		if err != nil {
			return SnapshotTakeResponse{}, err
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
	snap, rep, err := snapshot.Take(ctx, a.d.Store, scene, o)
	if err != nil {
		return SnapshotTakeResponse{}, err
	}
	if err := a.d.Store.PutSnapshot(ctx, snap, req.Strict); err != nil {
		return SnapshotTakeResponse{}, err
	}
	return SnapshotTakeResponse{Snapshot: snap, Report: rep}, nil
}

// SnapshotListRequest filters snapshots.
type SnapshotListRequest struct {
	Line  string `json:"line,omitempty" jsonschema:"only this line"`
	Limit int    `json:"limit,omitempty" jsonschema:"at most this many (default 100)"`
}

// Validate bounds the limit.
func (r *SnapshotListRequest) Validate() error { return limitIn("limit", r.Limit, 1, 10_000) }

// SnapshotList lists snapshots of p's lines, newest first.
func (a *App) SnapshotList(ctx context.Context, p Principal, req SnapshotListRequest) (List[contract.SnapshotInfo], error) {
	return run(ctx, a, p, &opSnapshotList, req, func(ctx context.Context, p Principal, req SnapshotListRequest) (List[contract.SnapshotInfo], error) {
		if err := scope(p, auth.ActRead, req.Line); err != nil {
			return List[contract.SnapshotInfo]{}, err
		}
		limit := req.Limit
		if limit == 0 {
			limit = 100
		}
		l, err := a.d.Store.ListSnapshots(ctx, req.Line, limit)
		if err != nil {
			return List[contract.SnapshotInfo]{}, err
		}
		return ListOf(filter(p, l, func(i contract.SnapshotInfo) string { return i.LineID })), nil
	})
}

// SnapshotShowRequest names a snapshot.
type SnapshotShowRequest struct {
	ID string `json:"id" jsonschema:"snapshot id"`
}

// Validate requires the id.
func (r *SnapshotShowRequest) Validate() error { return required("id", r.ID) }

// SnapshotShowResponse is a stored snapshot with its record.
type SnapshotShowResponse struct {
	Snapshot *contract.TwinSnapshot `json:"snapshot"`
	Info     contract.SnapshotInfo  `json:"info"`
}

// SnapshotShow returns a stored snapshot, verified against its hash.
func (a *App) SnapshotShow(ctx context.Context, p Principal, req SnapshotShowRequest) (SnapshotShowResponse, error) {
	return run(ctx, a, p, &opSnapshotShow, req, func(ctx context.Context, p Principal, req SnapshotShowRequest) (SnapshotShowResponse, error) {
		snap, info, err := a.d.Store.GetSnapshotInfo(ctx, req.ID)
		if err != nil {
			return SnapshotShowResponse{}, unseen(p, err)
		}
		if err := p.Allow(auth.ActRead, info.LineID); err != nil {
			return SnapshotShowResponse{}, err
		}
		return SnapshotShowResponse{Snapshot: snap, Info: info}, nil
	})
}

// ---- trials and optimisation

// twinInputs loads a snapshot with its scene and objective and checks p's
// scope on the model's and the snapshot's lines.
func (a *App) twinInputs(ctx context.Context, p Principal, modelID, snapID, objID string) (*contract.TwinSnapshot, *contract.SceneContract, *contract.ObjectiveProfile, error) {
	snap, err := a.d.Store.GetSnapshot(ctx, snapID)
	if err != nil {
		return nil, nil, nil, unseen(p, err)
	}
	if err := p.Allow(auth.ActTrial, snap.LineID); err != nil {
		return nil, nil, nil, err
	}
	scene, err := a.d.Store.GetScene(ctx, snap.SceneID, snap.SceneVersion)
	if err != nil {
		return nil, nil, nil, err
	}
	if objID == "" {
		if len(scene.ObjectiveProfileIDs) == 0 {
			return nil, nil, nil, core.FieldErrorf(core.CodeInvalidArgument, "objective", "scene %s names no objective profile; give objective", scene.SceneID)
		}
		objID = scene.ObjectiveProfileIDs[0]
	}
	obj, _, err := a.d.Store.GetObjective(ctx, objID)
	if err != nil {
		return nil, nil, nil, unseen(p, err)
	}
	// Another line's objective is refused as a missing one is, unless the
	// caller sees that line too: only then may the conflict name it.
	if obj.LineID != "" && obj.LineID != snap.LineID && !p.InScope(obj.LineID) {
		return nil, nil, nil, p.ScopeRefusal()
	}
	if obj.LineID != "" && obj.LineID != snap.LineID {
		return nil, nil, nil, core.FieldErrorf(core.CodeConflict, "objective", "objective %s belongs to line %s; the snapshot is of line %s", obj.ObjectiveID, obj.LineID, snap.LineID)
	}
	if _, err := a.model(ctx, p, auth.ActTrial, modelID); err != nil {
		return nil, nil, nil, err
	}
	return snap, scene, obj, nil
}

func (a *App) trialDone(rec contract.TrialRecord, kind string) {
	a.publish(events.Event{Kind: events.TrialDone, Line: rec.LineID, ID: rec.Trial.TrialID, Data: map[string]any{
		"kind": kind, "purpose": rec.Purpose, "passed": rec.Passed, "rejectCode": rec.RejectCode, "improvement": rec.Improvement, "modelId": rec.Trial.ModelID}})
}

// TrialRunRequest is one virtual trial: a setpoint move held over the
// horizon (set) or a whole trajectory (candidate).
type TrialRunRequest struct {
	Model     string               `json:"model" jsonschema:"model id"`
	Snapshot  string               `json:"snapshot" jsonschema:"snapshot id"`
	Objective string               `json:"objective,omitempty" jsonschema:"objective id (default: the scene's first)"`
	Set       map[string]float64   `json:"set,omitempty" jsonschema:"control → value at step 0, held (other controls keep the snapshot's value)"`
	Candidate []map[string]float64 `json:"candidate,omitempty" jsonschema:"the whole trajectory: one control → value map per step"`
}

// Validate requires model, snapshot and exactly one of set and candidate.
func (r *TrialRunRequest) Validate() error {
	if err := firstErr(required("model", r.Model), required("snapshot", r.Snapshot)); err != nil {
		return err
	}
	if (len(r.Set) == 0) == (len(r.Candidate) == 0) {
		return core.FieldErrorf(core.CodeInvalidArgument, "set", "give either set (control → value) or candidate (the trajectory)")
	}
	return nil
}

// TrialRunResponse is the stored trial with its detail.
type TrialRunResponse struct {
	Record contract.TrialRecord   `json:"record"`
	Detail *engine.TrialDetail    `json:"detail"`
	Trial  *contract.VirtualTrial `json:"trial"`
}

// TrialRun runs and stores one virtual trial; nothing is written to the
// machine.
func (a *App) TrialRun(ctx context.Context, p Principal, req TrialRunRequest) (TrialRunResponse, error) {
	return run(ctx, a, p, &opTrialRun, req, func(ctx context.Context, p Principal, req TrialRunRequest) (TrialRunResponse, error) {
		snap, scene, obj, err := a.twinInputs(ctx, p, req.Model, req.Snapshot, req.Objective)
		if err != nil {
			return TrialRunResponse{}, err
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
					return TrialRunResponse{}, core.FieldErrorf(core.CodeInvalidArgument, "set."+k, "%s is not a control of scene %s (controls: %s)", k, scene.SceneID, strings.Join(ks, ", "))
				}
				step[k] = v
			}
			cand = make([]map[string]float64, obj.HorizonSteps)
			for i := range cand {
				cand[i] = step
			}
		}
		now := a.o.Now().UTC()
		res, err := engine.RunTrial(ctx, a.d.Store, a.d.DataDir, req.Model, engine.TrialInput{Scene: scene, Snapshot: snap, Objective: obj,
			Candidate: cand, TrialID: a.newID("trial"), CreatedBy: p.Name, Now: now})
		if err != nil {
			return TrialRunResponse{}, err
		}
		rec, err := a.d.Store.PutTrial(ctx, res.Trial, contract.TrialManual, "")
		if err != nil {
			return TrialRunResponse{}, err
		}
		a.trialDone(rec, "trial")
		return TrialRunResponse{Record: rec, Detail: res.Detail, Trial: res.Trial}, nil
	})
}

// TrialListRequest filters trials.
type TrialListRequest struct {
	Line     string `json:"line,omitempty" jsonschema:"only this line"`
	Model    string `json:"model,omitempty" jsonschema:"only this model"`
	GateEval string `json:"gateEval,omitempty" jsonschema:"only this gate evaluation"`
	Limit    int    `json:"limit,omitempty" jsonschema:"at most this many (default 100)"`
}

// Validate bounds the limit.
func (r *TrialListRequest) Validate() error { return limitIn("limit", r.Limit, 1, 10_000) }

// TrialList lists stored trials of p's lines.
func (a *App) TrialList(ctx context.Context, p Principal, req TrialListRequest) (List[contract.TrialRecord], error) {
	return run(ctx, a, p, &opTrialList, req, func(ctx context.Context, p Principal, req TrialListRequest) (List[contract.TrialRecord], error) {
		if err := scope(p, auth.ActRead, req.Line); err != nil {
			return List[contract.TrialRecord]{}, err
		}
		limit := req.Limit
		if limit == 0 {
			limit = 100
		}
		ts, err := a.d.Store.ListTrials(ctx, contract.TrialFilter{ModelID: req.Model, GateEvalID: req.GateEval, LineID: req.Line, Limit: limit})
		if err != nil {
			return List[contract.TrialRecord]{}, err
		}
		return ListOf(filter(p, ts, func(t contract.TrialRecord) string { return t.LineID })), nil
	})
}

// TrialShowRequest names a trial.
type TrialShowRequest struct {
	ID string `json:"id" jsonschema:"trial id"`
}

// Validate requires the id.
func (r *TrialShowRequest) Validate() error { return required("id", r.ID) }

// TrialShow returns a stored trial.
func (a *App) TrialShow(ctx context.Context, p Principal, req TrialShowRequest) (contract.TrialRecord, error) {
	return run(ctx, a, p, &opTrialShow, req, func(ctx context.Context, p Principal, req TrialShowRequest) (contract.TrialRecord, error) {
		t, err := a.d.Store.GetTrial(ctx, req.ID)
		if err != nil {
			return t, err
		}
		return t, p.Allow(auth.ActRead, t.LineID)
	})
}

// Optimisation modes of OptimizeRequest.Mode.
const ModeAuto = "auto"

// OptimizeRequest searches the best passing setpoint move.
type OptimizeRequest struct {
	Model         string `json:"model" jsonschema:"model id"`
	Snapshot      string `json:"snapshot" jsonschema:"snapshot id"`
	Objective     string `json:"objective,omitempty" jsonschema:"objective id (default: the scene's first)"`
	Mode          string `json:"mode,omitempty" jsonschema:"auto (default: precise_search once the model passed its twin gate, else safe_small_step), safe_small_step or precise_search"`
	Seed          uint64 `json:"seed,omitempty" jsonschema:"random seed (default 1)"`
	MaxCandidates int    `json:"maxCandidates,omitempty" jsonschema:"at most this many candidates (default: the mode's; at most 10000)"`
}

// Validate requires model and snapshot, a known mode and a non-negative
// candidate count.
func (r *OptimizeRequest) Validate() error {
	switch r.Mode {
	case "", ModeAuto, engine.ModeSafeSmallStep, engine.ModePreciseSearch:
	default:
		return core.FieldErrorf(core.CodeInvalidArgument, "mode", "mode %q: want auto, %s or %s", r.Mode, engine.ModeSafeSmallStep, engine.ModePreciseSearch)
	}
	if r.MaxCandidates < 0 || r.MaxCandidates > engine.MaxCandidates {
		return core.FieldErrorf(core.CodeInvalidArgument, "maxCandidates", "maxCandidates must be 0 (the mode's default) up to %d, not %d", engine.MaxCandidates, r.MaxCandidates)
	}
	return firstErr(required("model", r.Model), required("snapshot", r.Snapshot))
}

// OptimizeResponse is the search result and, when a candidate passed, its
// stored trial.
type OptimizeResponse struct {
	Result *engine.OptimizeResult `json:"result"`
	Record *contract.TrialRecord  `json:"record,omitempty" jsonschema:"the stored best trial (certify it); absent when no candidate passed"`
}

// ResolveMode turns auto into precise_search when the model's latest twin
// gate passed, safe_small_step otherwise.
func (a *App) ResolveMode(ctx context.Context, mode, modelID string) string {
	if mode != "" && mode != ModeAuto {
		return mode
	}
	if g, err := a.d.Store.LatestGateEval(ctx, modelID); err == nil && g.Passed {
		return engine.ModePreciseSearch
	}
	return engine.ModeSafeSmallStep
}

// Optimize searches the lowest-cost passing move and stores its trial.
func (a *App) Optimize(ctx context.Context, p Principal, req OptimizeRequest) (OptimizeResponse, error) {
	return run(ctx, a, p, &opOptimize, req, func(ctx context.Context, p Principal, req OptimizeRequest) (OptimizeResponse, error) {
		snap, scene, obj, err := a.twinInputs(ctx, p, req.Model, req.Snapshot, req.Objective)
		if err != nil {
			return OptimizeResponse{}, err
		}
		m, err := a.d.Store.GetModel(ctx, req.Model)
		if err != nil {
			return OptimizeResponse{}, err
		}
		if err := registry.CheckLineage(m, "drive the optimiser"); err != nil {
			return OptimizeResponse{}, err
		}
		seed := req.Seed
		if seed == 0 {
			seed = 1
		}
		now := a.o.Now().UTC()
		res, err := engine.RunOptimize(ctx, a.d.Store, a.d.DataDir, req.Model, engine.OptimizeInput{Scene: scene, Snapshot: snap, Objective: obj,
			Mode: a.ResolveMode(ctx, req.Mode, req.Model), Seed: seed, MaxCandidates: req.MaxCandidates, TrialID: a.newID("trial"), CreatedBy: p.Name, Now: now})
		if err != nil {
			return OptimizeResponse{}, err
		}
		out := OptimizeResponse{Result: res}
		if res.Best != nil {
			rec, err := a.d.Store.PutTrial(ctx, res.Best, contract.TrialOptimize, "")
			if err != nil {
				return OptimizeResponse{}, err
			}
			out.Record = &rec
			a.trialDone(rec, "optimize")
		}
		return out, nil
	})
}

// ---- gate

// GateEvaluateRequest evaluates the twin acceptance gate.
type GateEvaluateRequest struct {
	Model        string `json:"model" jsonschema:"model id"`
	Scene        string `json:"scene" jsonschema:"scene id"`
	SceneVersion string `json:"sceneVersion,omitempty" jsonschema:"scene version (default: the latest)"`
	Objective    string `json:"objective,omitempty" jsonschema:"objective id (default: the scene's first)"`
	Snapshots    int    `json:"snapshots,omitempty" jsonschema:"replayed test-run snapshots (default 12, at most 200)"`
	Profile      string `json:"profile,omitempty" jsonschema:"acceptance profile (default twin-v3)"`
	Seed         uint64 `json:"seed,omitempty" jsonschema:"random seed (default 1)"`
}

// Validate requires model and scene.
func (r *GateEvaluateRequest) Validate() error {
	if r.Snapshots < 0 || r.Snapshots > gate.MaxSnapshots {
		return core.FieldErrorf(core.CodeInvalidArgument, "snapshots", "snapshots must be 0 (the default %d) up to %d, not %d", gate.DefaultSnapshots, gate.MaxSnapshots, r.Snapshots)
	}
	return firstErr(required("model", r.Model), required("scene", r.Scene))
}

// GateEvaluate evaluates and stores the twin gate of a model.
func (a *App) GateEvaluate(ctx context.Context, p Principal, req GateEvaluateRequest) (*gate.Result, error) {
	return run(ctx, a, p, &opGateEvaluate, req, func(ctx context.Context, p Principal, req GateEvaluateRequest) (*gate.Result, error) {
		m, err := a.model(ctx, p, auth.ActTrial, req.Model)
		if err != nil {
			return nil, err
		}
		if _, err := a.scene(ctx, p, auth.ActTrial, req.Scene, req.SceneVersion); err != nil {
			return nil, err
		}
		seed := req.Seed
		if seed == 0 {
			seed = 1
		}
		r, err := gate.Evaluate(ctx, a.d.Store, a.d.DataDir, m.ID, gate.Options{SceneID: req.Scene, SceneVersion: req.SceneVersion, ObjectiveID: req.Objective,
			Snapshots: req.Snapshots, Profile: req.Profile, By: p.Name, Seed: seed, Now: a.o.Now().UTC()})
		if err != nil {
			return nil, err
		}
		a.publish(events.Event{Kind: events.TrialDone, Line: m.LineID, ID: r.GateEvalID, Data: map[string]any{
			"kind": "gate", "modelId": m.ID, "passed": r.Report.Passed, "trials": len(r.Trials)}})
		return r, nil
	})
}

// GateLatestRequest names a model.
type GateLatestRequest struct {
	Model string `json:"model" jsonschema:"model id"`
}

// Validate requires the model.
func (r *GateLatestRequest) Validate() error { return required("model", r.Model) }

// GateLatestResponse is a stored gate evaluation.
type GateLatestResponse struct {
	GateEvalID string              `json:"gateEvalId"`
	ModelID    string              `json:"modelId"`
	CreatedAt  time.Time           `json:"createdAt"`
	CreatedBy  string              `json:"createdBy"`
	Passed     bool                `json:"passed"`
	TuningMode string              `json:"tuningMode"`
	Report     eval.TwinGateReport `json:"report"`
}

// GateLatest returns a model's latest twin gate evaluation.
func (a *App) GateLatest(ctx context.Context, p Principal, req GateLatestRequest) (GateLatestResponse, error) {
	return run(ctx, a, p, &opGateLatest, req, func(ctx context.Context, p Principal, req GateLatestRequest) (GateLatestResponse, error) {
		m, err := a.model(ctx, p, auth.ActRead, req.Model)
		if err != nil {
			return GateLatestResponse{}, err
		}
		g, err := a.d.Store.LatestGateEval(ctx, m.ID)
		if err != nil {
			return GateLatestResponse{}, err
		}
		out := GateLatestResponse{GateEvalID: g.GateEvalID, ModelID: g.ModelID, CreatedAt: g.CreatedAt, CreatedBy: g.CreatedBy, Passed: g.Passed, TuningMode: g.TuningMode}
		rep, err := storedGateReport(g.Report)
		if err != nil {
			return GateLatestResponse{}, core.Wrap(core.CodeInternal, err, "gate evaluation %s: report", g.GateEvalID)
		}
		out.Report = rep
		return out, nil
	})
}

// ---- shadow and calibration

// ShadowCollectRequest collects a model's shadow evidence.
type ShadowCollectRequest struct {
	Model   string `json:"model" jsonschema:"model id"`
	MaxRuns int    `json:"maxRuns,omitempty" jsonschema:"at most this many runs after the model (default all)"`
	DryRun  bool   `json:"dryRun,omitempty" jsonschema:"compute without storing"`
	// Scene, when it declares unmeasured disturbances (scene schema 2),
	// corrects the predictions of their targets (shadow.Options.Disturbances).
	Scene string `json:"scene,omitempty" jsonschema:"scene whose declared unmeasured disturbances correct the predictions (default none)"`
}

// Validate requires the model.
func (r *ShadowCollectRequest) Validate() error {
	if r.MaxRuns < 0 {
		return core.FieldErrorf(core.CodeInvalidArgument, "maxRuns", "maxRuns must not be negative")
	}
	return required("model", r.Model)
}

// ShadowCollect scores the model on the runs after it and stores the
// evidence.
func (a *App) ShadowCollect(ctx context.Context, p Principal, req ShadowCollectRequest) (*shadow.Evidence, error) {
	return run(ctx, a, p, &opShadowCollect, req, func(ctx context.Context, p Principal, req ShadowCollectRequest) (*shadow.Evidence, error) {
		m, err := a.model(ctx, p, auth.ActTrial, req.Model)
		if err != nil {
			return nil, err
		}
		so := shadow.Options{MaxRuns: req.MaxRuns, DryRun: req.DryRun, Now: a.o.Now}
		if req.Scene != "" {
			sc, err := a.scene(ctx, p, auth.ActTrial, req.Scene, "")
			if err != nil {
				return nil, err
			}
			if so.Disturbances, err = a.sceneDisturbances(ctx, sc, m.ID); err != nil {
				return nil, err
			}
		}
		return shadow.Collect(ctx, a.d.Store, a.d.DataDir, m.ID, so)
	})
}

// sceneDisturbances maps the unmeasured disturbances scene sc declares
// (scene schema 2) onto model modelID's dataset targets, by the twin's
// bindings of its quantities to nodes: the shadow evidence's
// disturbance correction (nil when the scene declares none).
func (a *App) sceneDisturbances(ctx context.Context, sc *contract.SceneContract, modelID string) (map[string]contract.UnmeasuredDisturbance, error) {
	if sc == nil || len(sc.UnmeasuredDisturbances) == 0 {
		return nil, nil
	}
	tw, err := engine.Load(ctx, a.d.Store, a.d.DataDir, modelID)
	if err != nil {
		return nil, err
	}
	b := tw.Bindings()
	out := map[string]contract.UnmeasuredDisturbance{}
	for _, d := range sc.UnmeasuredDisturbances {
		if n, ok := b[d.Target]; ok {
			out[n] = d
		}
	}
	return out, nil
}

// ShadowListRequest names a model.
type ShadowListRequest struct {
	Model string `json:"model" jsonschema:"model id"`
}

// Validate requires the model.
func (r *ShadowListRequest) Validate() error { return required("model", r.Model) }

// ShadowRun is one stored shadow run's evidence with what is wrong with
// it (ShadowFlags) under the list's twin gate profile.
type ShadowRun struct {
	contract.ShadowRecord
	Flags []string `json:"flags,omitempty" jsonschema:"what is wrong with this run's evidence under the profile (NRMSE beyond its rollout bound, coverage below its shadow minimum); none when within"`
}

// shadowRunJSON is ShadowRun on the wire: the field names of every other
// response, and a figure of a run with no scored step (NaN in the store's
// record) as null.
type shadowRunJSON struct {
	ModelID   string          `json:"modelId"`
	RunID     string          `json:"runId"`
	CreatedAt time.Time       `json:"createdAt"`
	Steps     int             `json:"steps"`
	NRMSE     *float64        `json:"nrmse"`
	Coverage  *float64        `json:"coverage"`
	Evidence  json.RawMessage `json:"evidence,omitempty"`
	Flags     []string        `json:"flags,omitempty"`
}

// MarshalJSON writes the run as shadowRunJSON.
func (r ShadowRun) MarshalJSON() ([]byte, error) {
	num := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return &v
	}
	return json.Marshal(shadowRunJSON{ModelID: r.ModelID, RunID: r.RunID, CreatedAt: r.CreatedAt, Steps: r.Steps,
		NRMSE: num(r.NRMSE), Coverage: num(r.Coverage), Evidence: r.Evidence, Flags: r.Flags})
}

// UnmarshalJSON reads shadowRunJSON back (null figures as NaN).
func (r *ShadowRun) UnmarshalJSON(b []byte) error {
	var w shadowRunJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	num := func(p *float64) float64 {
		if p == nil {
			return math.NaN()
		}
		return *p
	}
	*r = ShadowRun{ShadowRecord: contract.ShadowRecord{ModelID: w.ModelID, RunID: w.RunID, CreatedAt: w.CreatedAt, Steps: w.Steps,
		NRMSE: num(w.NRMSE), Coverage: num(w.Coverage), Evidence: w.Evidence}, Flags: w.Flags}
	return nil
}

// ShadowListResponse is a model's shadow evidence, each run flagged
// against Profile.
type ShadowListResponse struct {
	Items []ShadowRun `json:"items"`
	Count int         `json:"count"`
	// Profile is the twin gate profile the runs are judged under: the
	// model's latest twin gate's, else (no gate yet, or a profile no
	// longer published) the newest published one.
	Profile string `json:"profile" jsonschema:"twin gate profile the flags apply (the latest twin gate's, else the newest)"`
}

// ShadowList returns a model's stored shadow evidence, each run flagged
// against the twin gate profile of the model's latest gate (else the
// newest profile).
func (a *App) ShadowList(ctx context.Context, p Principal, req ShadowListRequest) (ShadowListResponse, error) {
	return run(ctx, a, p, &opShadowList, req, func(ctx context.Context, p Principal, req ShadowListRequest) (ShadowListResponse, error) {
		m, err := a.model(ctx, p, auth.ActRead, req.Model)
		if err != nil {
			return ShadowListResponse{}, err
		}
		rs, err := a.d.Store.ListShadow(ctx, m.ID)
		if err != nil {
			return ShadowListResponse{}, err
		}
		prof, err := a.shadowProfile(ctx, m.ID)
		if err != nil {
			return ShadowListResponse{}, err
		}
		out := ShadowListResponse{Items: make([]ShadowRun, 0, len(rs)), Count: len(rs), Profile: prof.ID}
		for _, r := range rs {
			out.Items = append(out.Items, ShadowRun{ShadowRecord: r, Flags: ShadowFlags(r.NRMSE, r.Coverage, prof)})
		}
		return out, nil
	})
}

// shadowProfile is the twin gate profile model's shadow evidence is
// judged under: its latest twin gate's, else (no gate yet, or a profile
// no longer published) the newest published profile.
func (a *App) shadowProfile(ctx context.Context, model string) (eval.TwinProfile, error) {
	var prof eval.TwinProfile
	ps := eval.TwinProfiles()
	if n := len(ps); n > 0 {
		prof = ps[n-1]
	}
	g, err := a.d.Store.LatestGateEval(ctx, model)
	if core.CodeOf(err) == core.CodeNotFound {
		return prof, nil
	}
	if err != nil {
		return prof, err
	}
	rep, err := storedGateReport(g.Report)
	if err != nil {
		return prof, core.Wrap(core.CodeInternal, err, "gate evaluation %s: report", g.GateEvalID)
	}
	for _, tp := range ps {
		if tp.ID == rep.Profile {
			return tp, nil
		}
	}
	return prof, nil
}

// CalibrateRequest measures a model's recalibration signals.
type CalibrateRequest struct {
	Model string `json:"model" jsonschema:"model id"`
	Scene string `json:"scene,omitempty" jsonschema:"scene whose drift limits apply"`
	// Run processes the queue once now: settle finished requests, claim
	// the oldest queued one and submit its job to the workers.
	Run bool `json:"run,omitempty" jsonschema:"process the queue once now (settle, claim the oldest, submit its job)"`
	// InProcess (with Run) trains the claimed request's job in this
	// process and waits for it (aml demo); in-process callers only.
	InProcess bool `json:"-"`
}

// Validate requires the model.
func (r *CalibrateRequest) Validate() error { return required("model", r.Model) }

// CalibrateResponse is the decision, the policy and, with run, the queue
// step.
type CalibrateResponse struct {
	Decision *recal.Decision `json:"decision"`
	Policy   recal.Policy    `json:"policy"`
	Step     *recal.Step     `json:"step,omitempty"`
}

// Calibrate measures signals and queues a recalibration when the policy's
// triggers are reached.
func (a *App) Calibrate(ctx context.Context, p Principal, req CalibrateRequest) (CalibrateResponse, error) {
	return run(ctx, a, p, &opCalibrate, req, func(ctx context.Context, p Principal, req CalibrateRequest) (CalibrateResponse, error) {
		m, err := a.model(ctx, p, auth.ActTrial, req.Model)
		if err != nil {
			return CalibrateResponse{}, err
		}
		// The scene names the request's key; when it is a stored scene, it
		// must be in p's lines too.
		var so shadow.Options
		if req.Scene != "" {
			if sc, err := a.d.Store.GetScene(ctx, req.Scene, ""); err == nil {
				if err := p.Allow(auth.ActTrial, sc.LineID); err != nil {
					return CalibrateResponse{}, err
				}
				if so.Disturbances, err = a.sceneDisturbances(ctx, sc, m.ID); err != nil {
					return CalibrateResponse{}, err
				}
			} else if core.CodeOf(err) != core.CodeNotFound {
				return CalibrateResponse{}, err
			}
		}
		if req.Run && !p.AllLines() {
			// The queue holds every line's requests: processing it is for
			// a principal of every line (the server's workers do it too).
			return CalibrateResponse{}, core.FieldErrorf(core.CodeForbidden, "run", "processing the recalibration queue acts on every line's requests; %s is scoped to %v", p.Name, p.Lines)
		}
		pol := recal.DefaultPolicy()
		sig, err := recal.ComputeSignals(ctx, a.d.Store, a.d.DataDir, m.ID, req.Scene, recal.SignalOptions{Now: a.o.Now, Shadow: so})
		if err != nil {
			return CalibrateResponse{}, err
		}
		d, err := recal.RequestAt(ctx, a.d.Store, *sig, pol, p.Name, a.o.Now())
		if err != nil {
			return CalibrateResponse{}, err
		}
		out := CalibrateResponse{Decision: d, Policy: pol}
		if req.Run {
			r, err := a.runner()
			if err != nil {
				return CalibrateResponse{}, err
			}
			st, err := recal.RunNext(ctx, a.d.Store, r, recal.RunOptions{DataDir: a.d.DataDir, MaxConcurrent: pol.MaxConcurrentRuns, RunJob: req.InProcess, Now: a.o.Now})
			if err != nil {
				return CalibrateResponse{}, err
			}
			out.Step = st
		}
		return out, nil
	})
}

// CalibrationListRequest filters recalibration requests.
type CalibrationListRequest struct {
	Line string `json:"line,omitempty" jsonschema:"only this line"`
}

// CalibrationList lists recalibration requests of p's lines, newest first.
func (a *App) CalibrationList(ctx context.Context, p Principal, req CalibrationListRequest) (List[contract.CalibrationRequest], error) {
	return run(ctx, a, p, &opCalibrationLst, req, func(ctx context.Context, p Principal, req CalibrationListRequest) (List[contract.CalibrationRequest], error) {
		if err := scope(p, auth.ActRead, req.Line); err != nil {
			return List[contract.CalibrationRequest]{}, err
		}
		rs, err := recal.List(ctx, a.d.Store, a.o.Now())
		if err != nil {
			return List[contract.CalibrationRequest]{}, err
		}
		out := []contract.CalibrationRequest{}
		for _, r := range rs {
			if p.InScope(r.LineID) && (req.Line == "" || r.LineID == req.Line) {
				out = append(out, r)
			}
		}
		return ListOf(out), nil
	})
}

// storedGateReport is the report of a stored gate evaluation (the record
// holds the whole gate.Result; the report is its field).
func storedGateReport(raw json.RawMessage) (eval.TwinGateReport, error) {
	var stored struct {
		Report eval.TwinGateReport `json:"report"`
	}
	err := json.Unmarshal(raw, &stored)
	return stored.Report, err
}

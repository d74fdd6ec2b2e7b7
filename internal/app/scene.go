package app

import (
	"context"
	"fmt"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/engine"
	"github.com/aml-project/aml/internal/twin/snapshot"
)

// Scene drafting and checking: a scene file (docs/scene-file.md) drafted
// from a model, edited by a person, checked in one pass, then stored with
// scene.put and frozen.

var (
	opSceneDraft = Op{Name: "scene.draft", Act: auth.ActRead, Summary: "Draft a scene file (scene + objective) from a model: its controls, targets, units and ranges, a default write policy"}
	opSceneCheck = Op{Name: "scene.check", Act: auth.ActRead, Summary: "Check a scene file: the contract, its bindings to the line's nodes and its fit to a model, every problem at once"}
)

func sceneOps() []*Op {
	return []*Op{bind(&opSceneDraft, (*App).SceneDraft), bind(&opSceneCheck, (*App).SceneCheck)}
}

// SceneDraftRequest drafts a scene from a model.
type SceneDraftRequest struct {
	Model string `json:"model" jsonschema:"model id (a model the twin runs)"`
	ID    string `json:"id,omitempty" jsonschema:"scene id (default: <line>-<model>)"`
}

// Validate requires the model.
func (r *SceneDraftRequest) Validate() error { return required("model", r.Model) }

// SceneDraftResponse is the drafted scene file and what a person must
// decide before storing it.
type SceneDraftResponse struct {
	Model string             `json:"model"`
	File  contract.SceneFile `json:"file"`
	Notes []string           `json:"notes"`
}

// SceneDraft drafts a scene file from a model (nothing is stored).
func (a *App) SceneDraft(ctx context.Context, p Principal, req SceneDraftRequest) (SceneDraftResponse, error) {
	return run(ctx, a, p, &opSceneDraft, req, func(ctx context.Context, p Principal, req SceneDraftRequest) (SceneDraftResponse, error) {
		m, err := a.model(ctx, p, auth.ActRead, req.Model)
		if err != nil {
			return SceneDraftResponse{}, err
		}
		if req.ID != "" {
			if err := core.CheckID("id", req.ID); err != nil {
				return SceneDraftResponse{}, err
			}
		}
		tw, err := engine.Load(ctx, a.d.Store, a.d.DataDir, m.ID)
		if err != nil {
			return SceneDraftResponse{}, err
		}
		nodes, err := a.lineNodes(ctx, m.LineID)
		if err != nil {
			return SceneDraftResponse{}, err
		}
		sc, obj, notes := tw.DraftScene(engine.DraftInput{SceneID: req.ID, Nodes: nodes, By: p.Name, Now: a.o.Now()})
		if !m.LineageVerified {
			notes = append(notes, fmt.Sprintf("model %s's dataset lineage is not verified: it may not drive the optimiser or a certificate until it is (docs/lineage.md)", m.ID))
		}
		return SceneDraftResponse{Model: m.ID, File: contract.SceneFile{Scene: sc, Objective: obj}, Notes: append([]string{}, notes...)}, nil
	})
}

func (a *App) lineNodes(ctx context.Context, line string) (map[string]core.Node, error) {
	ns, err := a.d.Store.ListNodes(ctx, line)
	if err != nil {
		return nil, err
	}
	out := make(map[string]core.Node, len(ns))
	for _, n := range ns {
		out[n.ID] = n
	}
	return out, nil
}

// SceneCheckRequest checks a scene file's text.
type SceneCheckRequest struct {
	Document string            `json:"document" jsonschema:"the scene file's text (YAML or JSON: {scene, objective} or a bare scene)"`
	Model    string            `json:"model,omitempty" jsonschema:"also check the fit to this model (default: the objective's twinModelId)"`
	Bindings map[string]string `json:"bindings,omitempty" jsonschema:"variable → node bindings, as snapshot.take --bind"`
}

// Validate requires the document and bounds its size.
func (r *SceneCheckRequest) Validate() error {
	if len(r.Document) > contract.MaxContractBytes {
		return core.FieldErrorf(core.CodeQuotaExceeded, "document", "the scene file is %d bytes, at most %d", len(r.Document), contract.MaxContractBytes)
	}
	return required("document", r.Document)
}

// SceneCheckResponse is a scene file that passed every check.
type SceneCheckResponse struct {
	SceneID      string   `json:"sceneId"`
	SceneVersion string   `json:"sceneVersion"`
	Objective    string   `json:"objective,omitempty"`
	Model        string   `json:"model,omitempty" jsonschema:"the model it was checked against (none: not checked against a model)"`
	Checked      []string `json:"checked" jsonschema:"what was checked"`
}

// SceneCheck checks a scene file in one pass: the contract and objective
// (every validation rule), the bindings of its variables to the line's
// nodes (what snapshot.take would refuse), and, with a model, that the
// model runs it. All problems are returned together (AML_CONTRACT_INVALID
// with one problem per finding, each with its path in the file).
func (a *App) SceneCheck(ctx context.Context, p Principal, req SceneCheckRequest) (SceneCheckResponse, error) {
	return run(ctx, a, p, &opSceneCheck, req, func(ctx context.Context, p Principal, req SceneCheckRequest) (SceneCheckResponse, error) {
		f, probs := contract.CheckSceneFile([]byte(req.Document))
		out := SceneCheckResponse{Checked: []string{"contract"}}
		if f == nil || f.Scene == nil {
			return out, core.Invalid(core.CodeContractInvalid, probs)
		}
		sc := f.Scene
		out.SceneID, out.SceneVersion = sc.SceneID, sc.SceneVersion
		if f.Objective != nil {
			out.Objective = f.Objective.ObjectiveID
			if f.Objective.LineID != "" && f.Objective.LineID != sc.LineID {
				probs = append(probs, core.Problem{Field: "objective.lineId", Message: fmt.Sprintf("the objective is for line %s, the scene for line %s", f.Objective.LineID, sc.LineID)})
			}
		}
		if sc.LineID != "" {
			if err := p.Allow(auth.ActRead, sc.LineID); err != nil {
				return out, err
			}
			bp, err := snapshot.CheckBindings(ctx, a.d.Store, sc, req.Bindings)
			if err != nil {
				return out, err
			}
			out.Checked = append(out.Checked, "bindings to the nodes of line "+sc.LineID)
			probs = append(probs, bp...)
		}
		model := req.Model
		if model == "" && f.Objective != nil {
			model = f.Objective.TwinModelID
		}
		if model != "" {
			if _, err := a.model(ctx, p, auth.ActRead, model); err != nil {
				return out, err
			}
			tw, err := engine.Load(ctx, a.d.Store, a.d.DataDir, model)
			if err != nil {
				return out, err
			}
			out.Model = model
			out.Checked = append(out.Checked, "fit to model "+model)
			probs = append(probs, tw.CheckScene(sc, f.Objective)...)
		}
		if len(probs) > 0 {
			return out, core.Invalid(core.CodeContractInvalid, probs)
		}
		return out, nil
	})
}

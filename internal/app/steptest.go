package app

import (
	"context"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/steptest"
)

// Step-test design (issue 21, build item 3, first part): a plan a person
// reviews. It reads the scene and a snapshot and writes nothing.

var opStepTestPlan = Op{Name: "steptest.plan", Act: auth.ActRead, Summary: "Design a plant step test (steps or PRBS per control) within the scene's write policy and ranges; nothing is stored or written"}

func stepTestOps() []*Op { return []*Op{bind(&opStepTestPlan, (*App).StepTestPlan)} }

// StepTestPlanRequest designs a step test.
type StepTestPlanRequest struct {
	Scene        string             `json:"scene" jsonschema:"frozen scene id"`
	SceneVersion string             `json:"sceneVersion,omitempty" jsonschema:"scene version (default: the latest)"`
	Signal       string             `json:"signal,omitempty" jsonschema:"steps (default: up, back, down, back) or prbs (generalised binary noise)"`
	Variables    []string           `json:"variables,omitempty" jsonschema:"controls to excite (default: every control the write policy lets move)"`
	Amplitude    map[string]float64 `json:"amplitude,omitempty" jsonschema:"per control, the step size (default: the largest the write policy and the range allow)"`
	Base         map[string]float64 `json:"base,omitempty" jsonschema:"per control, the operating point (default: the snapshot's control values)"`
	Snapshot     string             `json:"snapshot,omitempty" jsonschema:"snapshot whose control values are the operating point (default: the newest of the scene's line)"`
	Hold         Duration           `json:"hold,omitempty" jsonschema:"time between moves (default and minimum: the write policy's interval)"`
	Switches     int                `json:"switches,omitempty" jsonschema:"PRBS moves per control (default 8)"`
	OneAtATime   bool               `json:"oneAtATime,omitempty" jsonschema:"move one control per action"`
	Seed         uint64             `json:"seed,omitempty" jsonschema:"PRBS seed (default 1)"`
}

// Validate requires the scene and a non-negative hold.
func (r *StepTestPlanRequest) Validate() error {
	if r.Hold < 0 {
		return core.FieldErrorf(core.CodeInvalidArgument, "hold", "hold must not be negative")
	}
	return required("scene", r.Scene)
}

// StepTestPlanResponse is the plan with where its operating point came
// from.
type StepTestPlanResponse struct {
	*steptest.Plan
	BaseFrom   string `json:"baseFrom" jsonschema:"where the operating point came from: request or snapshot"`
	SnapshotID string `json:"snapshotId,omitempty" jsonschema:"the snapshot the operating point came from"`
}

// StepTestPlan designs a step test on a frozen scene.
func (a *App) StepTestPlan(ctx context.Context, p Principal, req StepTestPlanRequest) (StepTestPlanResponse, error) {
	return run(ctx, a, p, &opStepTestPlan, req, func(ctx context.Context, p Principal, req StepTestPlanRequest) (StepTestPlanResponse, error) {
		scene, err := a.d.Store.GetScene(ctx, req.Scene, req.SceneVersion)
		if err != nil {
			return StepTestPlanResponse{}, err
		}
		if err := p.Allow(auth.ActRead, scene.LineID); err != nil {
			return StepTestPlanResponse{}, err
		}
		out := StepTestPlanResponse{BaseFrom: "request"}
		base := map[string]float64{}
		if req.Snapshot != "" || len(req.Base) == 0 {
			id := req.Snapshot
			if id == "" {
				infos, err := a.d.Store.ListSnapshots(ctx, scene.LineID, 1)
				if err != nil {
					return StepTestPlanResponse{}, err
				}
				if len(infos) == 0 {
					return StepTestPlanResponse{}, core.FieldErrorf(core.CodeInvalidArgument, "base", "line %s has no snapshot: take one (snapshot take) or give base", scene.LineID)
				}
				id = infos[0].SnapshotID
			}
			snap, err := a.d.Store.GetSnapshot(ctx, id)
			if err != nil {
				return StepTestPlanResponse{}, err
			}
			if snap.LineID != scene.LineID {
				return StepTestPlanResponse{}, core.FieldErrorf(core.CodeConflict, "snapshot", "snapshot %s is of line %s, the scene of line %s", id, snap.LineID, scene.LineID)
			}
			for v, x := range snap.ControlValues {
				base[v] = x
			}
			out.BaseFrom, out.SnapshotID = "snapshot", id
		}
		for v, x := range req.Base {
			base[v] = x
		}
		plan, err := steptest.Design(scene, steptest.Options{Signal: req.Signal, Variables: req.Variables, Base: base, Amplitude: req.Amplitude,
			HoldSec: req.Hold.D().Seconds(), Switches: req.Switches, OneAtATime: req.OneAtATime, Seed: req.Seed})
		if err != nil {
			return StepTestPlanResponse{}, err
		}
		out.Plan = plan
		return out, nil
	})
}

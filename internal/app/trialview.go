package app

import (
	"context"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/engine"
)

// A stored trial keeps its record (candidate, predicted tube, costs) but
// not the engine's detail (every trace, the baseline's trajectories):
// trial.recompute re-runs it, deterministically, on its stored inputs,
// for a view that draws them (the web UI's trial page).

var opTrialRecompute = Op{Name: "trial.recompute", Act: auth.ActRead, Heavy: true,
	Summary: "Re-run a stored trial on its stored snapshot, the snapshot's scene and its objective with the recorded candidate: every trajectory and the baseline's; nothing is stored"}

func trialViewOps() []*Op { return []*Op{bind(&opTrialRecompute, (*App).TrialRecompute)} }

// TrialRecomputeRequest names a stored trial.
type TrialRecomputeRequest struct {
	ID string `json:"id" jsonschema:"trial id"`
}

// Validate requires the id.
func (r *TrialRecomputeRequest) Validate() error { return required("id", r.ID) }

// TrialRecomputeResponse is the recomputed trial with its detail, the
// objective it was scored with and whether it reproduces the stored
// record.
type TrialRecomputeResponse struct {
	Trial     *contract.VirtualTrial     `json:"trial"`
	Detail    *engine.TrialDetail        `json:"detail"`
	Objective *contract.ObjectiveProfile `json:"objective"`
	// Reproduced: the recomputed trial hashes to the stored record (with
	// the provenance notes the optimiser adds after running its best
	// trial — optimizer, candidatesEvaluated — carried over, since a
	// single re-run cannot know them; every other field must come out the
	// same), so the traces are exactly those of the recorded trial.
	Reproduced bool `json:"reproduced" jsonschema:"the recomputed trial hashes to the stored record (the optimiser's provenance notes carried over)"`
}

// TrialRecompute re-runs stored trial req.ID (engine.RunTrial on its
// snapshot, the snapshot's scene and its objective, with the recorded
// candidate, id, author and time). AML_CONFLICT when the objective was
// replaced after the trial.
func (a *App) TrialRecompute(ctx context.Context, p Principal, req TrialRecomputeRequest) (TrialRecomputeResponse, error) {
	return run(ctx, a, p, &opTrialRecompute, req, func(ctx context.Context, p Principal, req TrialRecomputeRequest) (TrialRecomputeResponse, error) {
		rec, err := a.d.Store.GetTrial(ctx, req.ID)
		if err != nil {
			return TrialRecomputeResponse{}, err
		}
		if err := p.Allow(auth.ActRead, rec.LineID); err != nil {
			return TrialRecomputeResponse{}, err
		}
		t := rec.Trial
		snap, err := a.d.Store.GetSnapshot(ctx, t.SnapshotID)
		if err != nil {
			return TrialRecomputeResponse{}, err
		}
		scene, err := a.d.Store.GetScene(ctx, snap.SceneID, snap.SceneVersion)
		if err != nil {
			return TrialRecomputeResponse{}, err
		}
		obj, _, err := a.d.Store.GetObjective(ctx, t.ObjectiveID)
		if err != nil {
			return TrialRecomputeResponse{}, err
		}
		if h, ok := t.Provenance["objectiveHash"]; ok {
			if cur, err := obj.Hash(); err == nil && cur != h {
				return TrialRecomputeResponse{}, core.Errorf(core.CodeConflict, "objective %s was replaced after the trial", t.ObjectiveID)
			}
		}
		res, err := engine.RunTrial(ctx, a.d.Store, a.d.DataDir, t.ModelID, engine.TrialInput{Scene: scene, Snapshot: snap, Objective: obj,
			Candidate: t.CandidateControlTrajectory, TrialID: t.TrialID, CreatedBy: t.CreatedBy, Now: t.CreatedAt})
		if err != nil {
			return TrialRecomputeResponse{}, err
		}
		return TrialRecomputeResponse{Trial: res.Trial, Detail: res.Detail, Objective: obj, Reproduced: reproduces(res.Trial, rec)}, nil
	})
}

// reproduces reports whether recomputed trial t hashes to stored record
// rec once the stored provenance notes t lacks (the optimiser's, added
// after its best trial ran) are carried over; t is not changed.
func reproduces(t *contract.VirtualTrial, rec contract.TrialRecord) bool {
	if t == nil || rec.Trial == nil {
		return false
	}
	c := *t
	c.Provenance = make(map[string]string, len(t.Provenance)+len(rec.Trial.Provenance))
	for k, v := range rec.Trial.Provenance {
		c.Provenance[k] = v
	}
	for k, v := range t.Provenance {
		c.Provenance[k] = v
	}
	h, err := c.Hash()
	return err == nil && h == rec.Hash
}

package web

import (
	"context"
	"fmt"
	"math"
	"net/http"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/web/plot"
)

// trialView is what the trial page shows besides the stored record.
type trialView struct {
	Charts []*plot.Chart
	Detail *app.TrialDetail
	// Reproduced: the recomputed trial hashes to the stored one, so the
	// traces are exactly those of the recorded trial.
	Reproduced bool
	Note       string
	// Tube is the traces as JSON for the interactive chart (tubeDoc).
	Tube string
}

// trialPage shows a stored trial: its verdict, constraint results, and
// the predicted trajectories with their tube, the constraint limits and
// the baseline (holding the snapshot's setpoints) next to the candidate.
//
// The store keeps the trial record (candidate, predicted tube of the
// scene's observations and guards, costs) but not the engine's
// TrialDetail (every trace, the baseline's trajectories). The page
// recomputes it through the op trial.recompute (the engine re-run on the
// stored snapshot, the snapshot's scene and the trial's objective with
// the recorded candidate, id, author and time). The engine is
// deterministic, so the recomputed record hashes to the stored one (the
// op's Reproduced, with the optimiser's provenance notes carried over);
// the page says so, and says plainly when it does not
// (a replaced objective profile, a retired model's pruned artifact), in
// which case it draws the stored tube only.
func (s *server) trialPage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ctx := r.Context()
	rec, err := s.app.TrialShow(ctx, p, app.TrialShowRequest{ID: r.PathValue("id")})
	if err != nil {
		return err
	}
	t := rec.Trial
	var scene *contract.SceneContract
	if sh, err := s.app.SnapshotShow(ctx, p, app.SnapshotShowRequest{ID: t.SnapshotID}); err == nil {
		if sc, err := s.app.SceneShow(ctx, p, app.SceneShowRequest{ID: sh.Snapshot.SceneID, Version: sh.Snapshot.SceneVersion}); err == nil {
			scene = sc.Scene
		}
	}
	v := s.trialTraces(ctx, p, rec, scene)
	certs, err := s.app.CertList(ctx, p, app.CertListRequest{Line: rec.LineID, Limit: 1000})
	if err != nil {
		return err
	}
	var mine []contract.CertListItem
	for _, c := range certs.Items {
		if c.Cert.TrialID == t.TrialID {
			mine = append(mine, c)
		}
	}
	s.render(w, r, http.StatusOK, "trial", &p, map[string]any{"Title": "Trial " + t.TrialID, "Rec": rec, "T": t, "V": v, "Certs": mine,
		"CanRequest": p.Allow(auth.ActCertRequest, rec.LineID) == nil, "Try": s.trialMoves(ctx, p, t), "Flash": r.URL.Query().Get("done")})
	return nil
}

func (s *server) trialTraces(ctx context.Context, p auth.Principal, rec contract.TrialRecord, scene *contract.SceneContract) *trialView {
	t := rec.Trial
	key := "trial\x00" + t.TrialID + "\x00" + rec.Hash
	if v, ok := s.cache.get(key); ok {
		return v.(*trialView)
	}
	v := &trialView{}
	res, err := s.app.TrialRecompute(ctx, p, app.TrialRecomputeRequest{ID: t.TrialID})
	obj := res.Objective
	if err != nil {
		v.Note = "The traces could not be recomputed (" + err.Error() + "); the stored predicted tube is shown without the baseline."
		v.Charts = storedTubeCharts(t, scene)
		return v // not cached: the cause may go away
	}
	v.Detail = res.Detail
	// Whether the recomputation reproduces the stored record is the op's
	// answer (trial.recompute: Reproduced).
	if res.Reproduced {
		v.Reproduced = true
	} else {
		v.Note = "The recomputed trial does not hash to the stored record (its objective profile or model changed since); the plots show the recomputation."
	}
	v.Charts = detailCharts(res.Detail, scene, obj)
	v.Tube = tubeDoc(res.Detail, scene, obj)
	s.cache.put(key, v)
	return v
}

// limitsOf are the scene's bounds on variable id: its hard_range
// constraints, else the variable's declared range.
func limitsOf(scene *contract.SceneContract, id string) []plot.Limit {
	if scene == nil {
		return nil
	}
	var out []plot.Limit
	for _, c := range scene.Constraints {
		if c.Kind != contract.KindHardRange || c.Variable != id {
			continue
		}
		if c.Min != nil {
			out = append(out, plot.Limit{Name: c.ID + " min", Y: *c.Min})
		}
		if c.Max != nil {
			out = append(out, plot.Limit{Name: c.ID + " max", Y: *c.Max})
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, l := range [][]contract.SceneVariable{scene.Controls, scene.States, scene.Disturbances, scene.Observations, scene.Guards} {
		for _, sv := range l {
			if sv.ID != id {
				continue
			}
			if sv.Min != nil {
				out = append(out, plot.Limit{Name: "range min", Y: *sv.Min, Color: "#777777"})
			}
			if sv.Max != nil {
				out = append(out, plot.Limit{Name: "range max", Y: *sv.Max, Color: "#777777"})
			}
		}
	}
	return out
}

func unitOf(scene *contract.SceneContract, id string) string {
	if scene == nil {
		return ""
	}
	for _, l := range [][]contract.SceneVariable{scene.Controls, scene.States, scene.Disturbances, scene.Observations, scene.Guards} {
		for _, sv := range l {
			if sv.ID == id {
				return sv.Unit
			}
		}
	}
	return ""
}

// detailCharts draws every trace of a trial: candidate mean with its tube,
// the baseline mean (dashed) with its tube, the scene's limits and the
// objective's setpoint of a target.
// Outputs come first (what the trial is judged on), then controls.
func detailCharts(d *app.TrialDetail, scene *contract.SceneContract, obj *contract.ObjectiveProfile) []*plot.Chart {
	var outputs, others []*plot.Chart
	for _, tr := range d.Traces {
		x := make([]float64, len(tr.Mean))
		for k := range x {
			x[k] = float64(int64(k+1)*d.BeatMs) / 1000
		}
		title := tr.ID + " (" + tr.Kind
		if tr.Calibrated {
			title += ", calibrated tube"
		} else if tr.Kind != "control" {
			title += ", physics only"
		}
		if tr.Anchored {
			title += ", anchored"
		}
		title += ")"
		c := &plot.Chart{Title: title, XLabel: "time after the snapshot", XUnit: "s", YLabel: tr.ID, YUnit: unitOf(scene, tr.ID), Width: 560, Height: 260,
			Series: []plot.Series{
				{Name: "candidate", X: x, Y: tr.Mean, Color: "#0072b2", Markers: len(x) <= 40},
				{Name: "baseline (hold setpoints)", X: x, Y: tr.Baseline, Color: "#d55e00", Dash: true},
			},
			Limits: limitsOf(scene, tr.ID)}
		if sp, ok := objectiveTarget(obj, tr.ID); ok {
			c.Limits = append(c.Limits, plot.Limit{Name: "objective target", Y: sp, Color: "#009e73"})
		}
		if hasWidth(tr.Lower, tr.Upper) {
			c.Bands = append(c.Bands, plot.Band{Name: "candidate tube", X: x, Lo: tr.Lower, Hi: tr.Upper, Color: "#0072b2"})
		}
		if hasWidth(tr.BaselineLower, tr.BaselineUpper) {
			c.Bands = append(c.Bands, plot.Band{Name: "baseline tube", X: x, Lo: tr.BaselineLower, Hi: tr.BaselineUpper, Color: "#d55e00"})
		}
		if tr.Kind == "control" {
			others = append(others, c)
		} else {
			outputs = append(outputs, c)
		}
	}
	return append(outputs, others...)
}

// storedTubeCharts draws what the stored record holds: the predicted
// trajectory and tube of the scene's observations and guards, and the
// candidate controls.
func storedTubeCharts(t *contract.VirtualTrial, scene *contract.SceneContract) []*plot.Chart {
	var out []*plot.Chart
	ids := map[string]bool{}
	for _, m := range t.PredictedTrajectory {
		for k := range m {
			ids[k] = true
		}
	}
	for _, id := range sortedKeys(ids) {
		n := len(t.PredictedTrajectory)
		x, y, lo, hi := make([]float64, n), nanSlice(n), nanSlice(n), nanSlice(n)
		for k := 0; k < n; k++ {
			x[k] = float64(k + 1)
			if v, ok := t.PredictedTrajectory[k][id]; ok {
				y[k] = v
			}
			if k < len(t.PredictedLower) && k < len(t.PredictedUpper) {
				if v, ok := t.PredictedLower[k][id]; ok {
					lo[k] = v
				}
				if v, ok := t.PredictedUpper[k][id]; ok {
					hi[k] = v
				}
			}
		}
		c := &plot.Chart{Title: id + " (stored record)", XLabel: "horizon step", YLabel: id, YUnit: unitOf(scene, id), Width: 560, Height: 260,
			Series: []plot.Series{{Name: "candidate", X: x, Y: y, Color: "#0072b2", Markers: n <= 40}},
			Limits: limitsOf(scene, id)}
		if hasWidth(lo, hi) {
			c.Bands = []plot.Band{{Name: "candidate tube", X: x, Lo: lo, Hi: hi, Color: "#0072b2"}}
		}
		out = append(out, c)
	}
	ctl := map[string]bool{}
	for _, m := range t.CandidateControlTrajectory {
		for k := range m {
			ctl[k] = true
		}
	}
	for _, id := range sortedKeys(ctl) {
		n := len(t.CandidateControlTrajectory)
		x, y := make([]float64, n), nanSlice(n)
		for k := 0; k < n; k++ {
			x[k] = float64(k + 1)
			if v, ok := t.CandidateControlTrajectory[k][id]; ok {
				y[k] = v
			}
		}
		out = append(out, &plot.Chart{Title: fmt.Sprintf("%s (control, stored candidate)", id), XLabel: "horizon step", YLabel: id, YUnit: unitOf(scene, id), Width: 560, Height: 260,
			Series: []plot.Series{{Name: "candidate", X: x, Y: y, Color: "#0072b2", Markers: n <= 40}}, Limits: limitsOf(scene, id)})
	}
	return out
}

// hasWidth reports whether a tube is wider than a line somewhere (physics-
// only quantities have lower = mean = upper).
func hasWidth(lo, hi []float64) bool {
	for i := range min(len(lo), len(hi)) {
		if finite(lo[i]) && finite(hi[i]) && hi[i]-lo[i] > 1e-12*math.Max(1, math.Abs(hi[i])) {
			return true
		}
	}
	return false
}

// objectiveTarget is the objective's setpoint for quantity id, if any.
func objectiveTarget(obj *contract.ObjectiveProfile, id string) (float64, bool) {
	if obj == nil {
		return 0, false
	}
	v, ok := obj.Targets[id]
	return v, ok
}

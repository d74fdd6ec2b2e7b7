package dataset

import (
	"context"
	"encoding/json"
	"math"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// ServeWindow is the model input at one instant of a run, built by exactly
// the code path that built the training data — the dataset's own spec,
// node resolution, unit contracts, cleaning (state, range, Hampel) and
// grid alignment with interpolation — so serving never sees data prepared
// differently from training (the upstream train/serve skew).
type ServeWindow struct {
	RunID string    `json:"runId"`
	AtMs  int64     `json:"atMs"` // time of the first predicted step
	X     []float32 `json:"-"`    // [H, nAll]
	U     []float32 `json:"-"`    // [F, nCtrl] (future controls from the run; one zero column without controls)
	Y     []float32 `json:"-"`    // [F, nTgt] measured targets where present (NaN otherwise), for comparison
	TS    []int64   `json:"ts"`   // [H+F] grid times
	// Missing lists history/future steps whose values are missing after
	// cleaning and interpolation; a window with missing history cannot be
	// predicted.
	Missing int `json:"missing"`
}

// BuildServeWindow rebuilds the window that ends its history just before
// atMs in run runID, using the registered dataset's canonical spec and the
// training code (read, clean, align the run). For an ended run the window
// is bit-identical to the training window at the same instant (tested).
func BuildServeWindow(ctx context.Context, st interface {
	core.Meta
	core.TimeSeries
}, d core.Dataset, runID string, atMs int64) (*ServeWindow, error) {
	var spec Spec
	if err := json.Unmarshal([]byte(d.SpecJSON), &spec); err != nil {
		return nil, core.Wrap(core.CodeDatasetTampered, err, "dataset %s spec", d.ID)
	}
	spec.Normalize()
	if spec.Purpose == PurposeStaticResponse {
		return nil, core.Errorf(core.CodeInvalidArgument, "static_response datasets have no time windows")
	}
	nodes, err := resolveNodes(ctx, st, &spec)
	if err != nil {
		return nil, err
	}
	r, err := st.GetRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	if r.LineID != spec.LineID || r.ProductID != spec.ProductID || r.RecipeID != spec.RecipeID {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "run", "run %s is %s/%s/%s; the model was trained on %s/%s/%s", runID, r.LineID, r.ProductID, r.RecipeID, spec.LineID, spec.ProductID, spec.RecipeID)
	}
	H, F, beat := spec.HistorySteps, spec.HorizonSteps, spec.BeatUs()
	at := atMs * 1000
	at -= ((at % beat) + beat) % beat // onto the grid (µs)
	// The whole run is read (within the spec's time window), exactly as for
	// training: the Hampel rule's noise floor and the interpolation depend on
	// the whole series, so reading less would change the cleaned values. For
	// a run still in progress the data end at its latest sample, like any
	// series end in training.
	from := r.StartedMs
	to := core.UsToMs(at + int64(F)*beat)
	if r.EndedMs != nil {
		to = *r.EndedMs
	} else if lat, err := st.Latest(ctx, []string{nodes[0].NodeID}, core.ContextFilter{Run: runID}); err == nil && len(lat) > 0 {
		to = max(to, core.UsToMs(lat[0].TsUs))
	}
	if spec.FromMs != nil {
		from = max(from, *spec.FromMs)
	}
	if spec.ToMs != nil {
		to = min(to, *spec.ToMs)
	}
	pts := make([][]core.Point, len(nodes))
	for j, n := range nodes {
		if pts[j], err = readAll(ctx, st, n.NodeID, runID, from+n.delayMs, to+n.delayMs, 0, nil); err != nil {
			return nil, err
		}
	}
	g, reason := alignRun(&spec, nodes, r, pts, from, to, 1, nil)
	if g == nil {
		return nil, core.Errorf(core.CodeDatasetEmpty, "run %s around %d: %s", runID, atMs, reason)
	}
	// Index of `at` in the common grid.
	k := int((at - g.startUs) / beat)
	if k-H < 0 || k+F > g.steps {
		return nil, core.Errorf(core.CodeDatasetEmpty, "run %s has no complete window at %s: it needs %d history and %d horizon steps of %s inside the run's usable data, %s to %s", runID, time.UnixMilli(atMs).UTC().Format(time.RFC3339), H, F, core.FormatPeriod(time.Duration(beat)*time.Microsecond), time.UnixMicro(g.startUs).UTC().Format(time.RFC3339), time.UnixMicro(g.startUs+int64(g.steps-1)*beat).UTC().Format(time.RFC3339))
	}
	nAll := len(nodes)
	w := &ServeWindow{RunID: runID, AtMs: core.UsToMs(at)}
	var ctrl, tgt []int
	for j, n := range nodes {
		switch n.Role {
		case RoleControl:
			ctrl = append(ctrl, j)
		case RoleTarget:
			tgt = append(tgt, j)
		}
	}
	for i := k - H; i < k; i++ {
		for j := 0; j < nAll; j++ {
			v := g.vals[i*nAll+j]
			if math.IsNaN(float64(v)) {
				w.Missing++
			}
			w.X = append(w.X, v)
		}
	}
	for i := k; i < k+F; i++ {
		if len(ctrl) == 0 {
			w.U = append(w.U, 0)
		}
		for _, j := range ctrl {
			w.U = append(w.U, g.vals[i*nAll+j])
		}
		for _, j := range tgt {
			w.Y = append(w.Y, g.vals[i*nAll+j])
		}
	}
	for i := k - H; i < k+F; i++ {
		w.TS = append(w.TS, core.UsToMs(g.startUs+int64(i)*beat))
	}
	return w, nil
}

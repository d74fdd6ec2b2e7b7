package dataset

import (
	"context"
	"encoding/json"

	"github.com/aml-project/aml/internal/core"
)

// ServeGrid is one whole run cleaned and aligned onto a registered
// dataset's grid by the training code path (the dataset's own spec, node
// resolution, unit contracts, state/range/Hampel cleaning, alignment and
// interpolation): what a model trained on the dataset sees of a run it
// was not trained on. Shadow evidence and the recalibration scheduler use
// it to compare a model with what the line did after the model was made,
// without a second implementation of cleaning.
type ServeGrid struct {
	RunID   string
	StartUs int64 // time of grid step 0, epoch µs
	BeatUs  int64 // grid step, µs
	Steps   int
	// Nodes is the column order (the manifest's allNodes order).
	Nodes []string
	// Vals is [Steps][len(Nodes)] row-major in model units, NaN where
	// missing after cleaning and interpolation.
	Vals []float32
}

// BuildServeGrid cleans and aligns the whole of run runID (line, product
// and recipe must be the dataset's) with dataset d's spec. Unlike a build
// it reads the whole run regardless of the spec's fromMs/toMs — those
// select which data went into the dataset, not how a run is prepared — and
// it applies no minimum length and no maxDropRatio exclusion: the caller
// decides what to do with missing values. A run without any common grid
// step is AML_DATASET_EMPTY. For a static_response dataset the grid's
// complete steps are the rows the run gives (its inputs then targets are
// the manifest's Inputs and Targets columns).
func BuildServeGrid(ctx context.Context, st interface {
	core.Meta
	core.TimeSeries
}, d core.Dataset, runID string) (*ServeGrid, error) {
	var spec Spec
	if err := json.Unmarshal([]byte(d.SpecJSON), &spec); err != nil {
		return nil, core.Wrap(core.CodeDatasetTampered, err, "dataset %s spec", d.ID)
	}
	spec.Normalize()
	// A static_response dataset's rows are the grid steps of its runs,
	// aligned the same way: its serve grid is the rows a run gives.
	nodes, err := resolveNodes(ctx, st, &spec)
	if err != nil {
		return nil, err
	}
	r, err := st.GetRun(ctx, runID)
	if err != nil {
		return nil, err
	}
	if r.LineID != spec.LineID || r.ProductID != spec.ProductID || r.RecipeID != spec.RecipeID {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "run", "run %s is %s/%s/%s; the dataset is %s/%s/%s", runID, r.LineID, r.ProductID, r.RecipeID, spec.LineID, spec.ProductID, spec.RecipeID)
	}
	if r.EndedMs == nil {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "run", "run %s has not ended", runID)
	}
	from, to := r.StartedMs, *r.EndedMs
	pts := make([][]core.Point, len(nodes))
	for j, n := range nodes {
		if pts[j], err = readAll(ctx, st, n.NodeID, runID, from+n.delayMs, to+n.delayMs, 0, nil); err != nil {
			return nil, err
		}
	}
	// maxDropRatio is a dataset-selection rule: lift it so the grid is
	// returned whatever its missing share.
	one := 1.0
	spec.Cleaning.MaxDropRatio = &one
	g, reason := alignRun(&spec, nodes, r, pts, from, to, 1, nil)
	if g == nil {
		return nil, core.Errorf(core.CodeDatasetEmpty, "run %s: %s", runID, reason)
	}
	out := &ServeGrid{RunID: runID, StartUs: g.startUs, BeatUs: spec.BeatUs(), Steps: g.steps, Vals: g.vals}
	for _, n := range nodes {
		out.Nodes = append(out.Nodes, n.NodeID)
	}
	return out, nil
}

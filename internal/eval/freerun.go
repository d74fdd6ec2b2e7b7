package eval

import (
	"context"
	"encoding/json"
	"math"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/model"
)

// RunSimulator is a model that can simulate a whole run in free run (the
// long-horizon use of a dynamic model, as opposed to [model.Predictor]'s
// fixed-horizon windows). The native linear predictors (aml.arx/1,
// aml.statespace/1) implement it.
//
// inputs are the run's control columns and outputs its target columns, in
// the dataset's order (manifest controls and targets) and model units, one
// row per grid step. The first nInit outputs are measured values for
// initialisation; every later output must be simulated from the inputs
// only. [FreeRun] passes exactly nInit output rows (and len(inputs) ≥
// nInit), so a simulator cannot see the values it is scored on. The result
// has one row per input row (len(inputs) × number of targets); rows before
// nInit are not scored.
type RunSimulator interface {
	SimulateRun(inputs, outputs [][]float64, nInit int) ([][]float64, error)
}

// RunFreeRun is the free-run result of one run.
type RunFreeRun struct {
	RunID string
	// GridSteps is the run's grid length; Offset and Steps locate the
	// simulated part (the longest NaN-free segment, the whole run when it
	// has no missing control or target value).
	GridSteps, Offset, Steps int
	// N is the number of scored steps (Steps − nInit); RMSE and NRMSE are
	// per target over them (NRMSE = RMSE / std of the run's scored true
	// values).
	N           int
	RMSE, NRMSE []float64
	// Skipped says why the run was not scored (N = 0), "" if it was.
	Skipped string
}

// FreeRunMetrics are a model's free-run metrics on one split.
type FreeRunMetrics struct {
	Split string
	Runs  []RunFreeRun
	// Targets pools the scored steps of every run of the split: RMSE,
	// NRMSE (RMSE / population std of the true values over the scored
	// steps), MAE, R2 and N (scored steps). The one-step fields do not
	// apply and are NaN.
	Targets []TargetMetrics
	// MeanNRMSE is the mean of Targets' NRMSE.
	MeanNRMSE float64
	// InitSteps is nInit: the measured steps given to the simulator at the
	// start of every run, not scored.
	InitSteps int
}

// FreeRun simulates every run of split ("train", "val" or "test") with sim
// and scores the simulation against the run's grid. For each run (in the
// manifest's split order) it takes the control (input) and target columns
// of the run's aligned grid (Bundle.RunGrid). If some of those values are
// missing (NaN), only the longest NaN-free segment of consecutive steps is
// simulated (the earliest of equally long ones); other columns
// (disturbances, features) are not used. The simulator gets the segment's
// inputs and its first nInit target rows; steps nInit … end of the segment
// are scored. A run whose segment has no more than nInit steps is listed as
// skipped. Metrics are in model units; definitions as for [Evaluate]
// (population std, R2 = 1 − SSE/SST, the degenerate cases alike). A split
// without any scored step has NaN metrics.
//
// A simulation of the wrong shape or with a non-finite scored value fails
// with AML_MODEL_INVALID; an error of the simulator is returned as is.
func FreeRun(ctx context.Context, b *dataset.Bundle, sim RunSimulator, split string, nInit int) (*FreeRunMetrics, error) {
	if b == nil || sim == nil {
		return nil, core.Errorf(core.CodeInternal, "eval.FreeRun: nil bundle or simulator")
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	man := b.Manifest
	if man.Kind != dataset.KindDynamic {
		return nil, core.Errorf(core.CodeInvalidArgument, "free-run evaluation needs a dynamic dataset, this one is %s", man.Kind)
	}
	if nInit < 0 {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "nInit", "must not be negative, got %d", nInit)
	}
	var runs []string
	switch split {
	case dataset.SplitTrain:
		runs = man.Split.Train.RunIDs
	case dataset.SplitVal:
		runs = man.Split.Val.RunIDs
	case dataset.SplitTest:
		runs = man.Split.Test.RunIDs
	default:
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "split", "unknown split %q: train, val or test", split)
	}
	col := map[string]int{}
	for j, n := range man.AllNodes {
		col[n] = j
	}
	index := func(names []string) ([]int, error) {
		out := make([]int, len(names))
		for i, n := range names {
			j, ok := col[n]
			if !ok {
				return nil, core.FieldErrorf(core.CodeDatasetTampered, "manifest.json", "node %s is not among allNodes", n)
			}
			out[i] = j
		}
		return out, nil
	}
	ci, err := index(man.Controls)
	if err != nil {
		return nil, err
	}
	ti, err := index(man.Targets)
	if err != nil {
		return nil, err
	}
	nAll, nC, nT := len(man.AllNodes), len(ci), len(ti)
	fm := &FreeRunMetrics{Split: split, InitSteps: nInit}
	// scored (true, predicted) values per target, pooled over runs
	yt := make([][]float64, nT)
	yp := make([][]float64, nT)
	for _, id := range runs {
		if err := ctx.Err(); err != nil {
			return nil, core.Wrap(core.CodeInternal, err, "free-run evaluation cancelled")
		}
		_, vals, ok := b.RunGrid(id)
		if !ok {
			return nil, core.FieldErrorf(core.CodeDatasetTampered, "manifest.json", "run %s of the %s split has no grid", id, split)
		}
		T := len(vals) / nAll
		lo, hi := longestFinite(vals, T, nAll, append(append([]int{}, ci...), ti...))
		rr := RunFreeRun{RunID: id, GridSteps: T, Offset: lo, Steps: hi - lo}
		if hi-lo <= nInit {
			rr.Skipped = "no NaN-free segment longer than the initialisation"
			if hi-lo == T {
				rr.Skipped = "the run is not longer than the initialisation"
			}
			fm.Runs = append(fm.Runs, rr)
			continue
		}
		L := hi - lo
		in := make([][]float64, L)
		truth := make([][]float64, L)
		for k := 0; k < L; k++ {
			row := vals[(lo+k)*nAll : (lo+k+1)*nAll]
			in[k] = make([]float64, nC)
			for i, j := range ci {
				in[k][i] = float64(row[j])
			}
			truth[k] = make([]float64, nT)
			for i, j := range ti {
				truth[k][i] = float64(row[j])
			}
		}
		init := make([][]float64, nInit)
		for k := range init {
			init[k] = append([]float64(nil), truth[k]...)
		}
		pred, err := sim.SimulateRun(in, init, nInit)
		if err != nil {
			return nil, err
		}
		if len(pred) != L {
			return nil, model.Invalidf("simulation", "the model simulated %d steps of run %s, need %d", len(pred), id, L)
		}
		rr.N = L - nInit
		rr.RMSE, rr.NRMSE = make([]float64, nT), make([]float64, nT)
		for i := 0; i < nT; i++ {
			var sse, mean, sst float64
			for k := nInit; k < L; k++ {
				if len(pred[k]) != nT {
					return nil, model.Invalidf("simulation", "step %d of run %s has %d values, need %d targets", k, id, len(pred[k]), nT)
				}
				p := pred[k][i]
				if !finite(p) {
					return nil, model.Invalidf("simulation", "the model simulated %v for run %s, step %d, target %s", p, id, lo+k, man.Targets[i])
				}
				e := p - truth[k][i]
				sse += e * e
				mean += truth[k][i]
				yt[i] = append(yt[i], truth[k][i])
				yp[i] = append(yp[i], p)
			}
			n := float64(rr.N)
			mean /= n
			for k := nInit; k < L; k++ {
				d := truth[k][i] - mean
				sst += d * d
			}
			rr.RMSE[i] = math.Sqrt(sse / n)
			rr.NRMSE[i] = ratio(rr.RMSE[i], math.Sqrt(sst/n))
		}
		fm.Runs = append(fm.Runs, rr)
	}
	nan := math.NaN()
	sum := 0.0
	for i := 0; i < nT; i++ {
		tm := TargetMetrics{Target: man.Targets[i], N: len(yt[i]), OneStepRMSE: nan, OneStepNRMSE: nan}
		if tm.N == 0 {
			tm.RMSE, tm.NRMSE, tm.MAE, tm.R2 = nan, nan, nan, nan
		} else {
			n := float64(tm.N)
			mean := 0.0
			for _, v := range yt[i] {
				mean += v
			}
			mean /= n
			var sse, sae, sst float64
			for k, v := range yt[i] {
				e := yp[i][k] - v
				sse += e * e
				sae += math.Abs(e)
				sst += (v - mean) * (v - mean)
			}
			tm.RMSE = math.Sqrt(sse / n)
			tm.NRMSE = ratio(tm.RMSE, math.Sqrt(sst/n))
			tm.MAE = sae / n
			switch {
			case sst > 0:
				tm.R2 = 1 - sse/sst
			case sse == 0:
				tm.R2 = 1
			default:
				tm.R2 = math.Inf(-1)
			}
		}
		sum += tm.NRMSE
		fm.Targets = append(fm.Targets, tm)
	}
	fm.MeanNRMSE = sum / float64(nT)
	return fm, nil
}

// longestFinite returns the longest run [lo, hi) of grid rows whose columns
// cols are all finite (the earliest of equally long ones).
func longestFinite(vals []float32, T, nAll int, cols []int) (lo, hi int) {
	start := 0
	for k := 0; k <= T; k++ {
		ok := k < T
		if ok {
			row := vals[k*nAll : (k+1)*nAll]
			for _, j := range cols {
				if v := float64(row[j]); math.IsNaN(v) || math.IsInf(v, 0) {
					ok = false
					break
				}
			}
		}
		if ok {
			continue
		}
		if k-start > hi-lo {
			lo, hi = start, k
		}
		start = k + 1
	}
	return lo, hi
}

type runFreeRunJSON struct {
	RunID     string `json:"runId"`
	GridSteps int    `json:"gridSteps"`
	Offset    int    `json:"offset"`
	Steps     int    `json:"steps"`
	N         int    `json:"n"`
	RMSE      []jf   `json:"rmse"`
	NRMSE     []jf   `json:"nrmse"`
	Skipped   string `json:"skipped,omitempty"`
}

func freeRunJFs(v []float64) []jf {
	out := make([]jf, len(v))
	for i, x := range v {
		out[i] = jf(x)
	}
	return out
}

func freeRunFloats(v []jf) []float64 {
	if v == nil {
		return nil
	}
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = float64(x)
	}
	return out
}

// MarshalJSON writes non-finite values as null.
func (r RunFreeRun) MarshalJSON() ([]byte, error) {
	return json.Marshal(runFreeRunJSON{r.RunID, r.GridSteps, r.Offset, r.Steps, r.N, freeRunJFs(r.RMSE), freeRunJFs(r.NRMSE), r.Skipped})
}

// UnmarshalJSON reads null as NaN.
func (r *RunFreeRun) UnmarshalJSON(b []byte) error {
	var j runFreeRunJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = RunFreeRun{j.RunID, j.GridSteps, j.Offset, j.Steps, j.N, freeRunFloats(j.RMSE), freeRunFloats(j.NRMSE), j.Skipped}
	return nil
}

type freeRunJSON struct {
	Split     string          `json:"split"`
	Runs      []RunFreeRun    `json:"runs"`
	Targets   []TargetMetrics `json:"targets"`
	MeanNRMSE jf              `json:"meanNrmse"`
	InitSteps int             `json:"initSteps"`
}

// MarshalJSON writes non-finite values as null.
func (m FreeRunMetrics) MarshalJSON() ([]byte, error) {
	return json.Marshal(freeRunJSON{m.Split, m.Runs, m.Targets, jf(m.MeanNRMSE), m.InitSteps})
}

// UnmarshalJSON reads null as NaN.
func (m *FreeRunMetrics) UnmarshalJSON(b []byte) error {
	var j freeRunJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*m = FreeRunMetrics{j.Split, j.Runs, j.Targets, float64(j.MeanNRMSE), j.InitSteps}
	return nil
}

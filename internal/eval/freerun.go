package eval

import (
	"context"
	"encoding/json"
	"fmt"
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

// Divergence thresholds of a free run (see [FreeRun]). A segment's free
// run diverges at its first scored step whose simulated value of some
// target is not finite or lies more than DivergenceRangeFactor ranges
// from the middle of that target's measured range over the segment, or,
// failing that, when a target's NRMSE over the segment exceeds
// DivergenceNRMSE (the step is then the one with the largest error). The
// mean predictor has NRMSE 1 and a stable model with a wrong gain or
// offset stays within a few ranges; 10 ranges or an NRMSE of 10 is no
// poor fit but a simulation running away (an unstable pole grows
// geometrically and crosses the bound within a few time constants).
const (
	DivergenceRangeFactor = 10
	DivergenceNRMSE       = 10
)

// FreeRunSegment is one NaN-free segment of a run's grid: rows [Offset,
// Offset+Steps) whose controls and targets are all finite. N is its number
// of scored steps (Steps − nInit), 0 when it was skipped (Steps ≤ nInit);
// Diverged says whether its free run diverged.
type FreeRunSegment struct {
	Offset   int  `json:"offset"`
	Steps    int  `json:"steps"`
	N        int  `json:"n"`
	Skipped  bool `json:"skipped,omitempty"`
	Diverged bool `json:"diverged,omitempty"`
}

// Divergence locates a diverged free run: the run, the segment (index
// into the run's Segments), the grid step within the run, the target and
// why (a non-finite value, the range bound or the NRMSE bound).
type Divergence struct {
	RunID   string `json:"runId"`
	Segment int    `json:"segment"`
	Step    int    `json:"step"`
	Target  string `json:"target"`
	Reason  string `json:"reason"`
}

// String is a one-line description.
func (d *Divergence) String() string {
	return fmt.Sprintf("run %s, segment %d, step %d, target %s: %s", d.RunID, d.Segment, d.Step, d.Target, d.Reason)
}

// RunFreeRun is the free-run result of one run.
type RunFreeRun struct {
	RunID string
	// GridSteps is the run's grid length.
	GridSteps int
	// Segments are the run's NaN-free segments in grid order, each
	// simulated on its own (the model re-initialised after every gap) or
	// skipped when not longer than nInit.
	Segments []FreeRunSegment
	// N is the number of scored steps (Σ segments' N); RMSE and NRMSE are
	// per target over them (NRMSE = RMSE / std of the run's scored true
	// values).
	N           int
	RMSE, NRMSE []float64
	// Skipped says why the run was not scored (N = 0), "" if it was.
	Skipped string
	// Divergence is the run's first diverged segment, nil if none.
	Divergence *Divergence
}

// FreeRunMetrics are a model's free-run metrics on one split.
type FreeRunMetrics struct {
	Split string
	Runs  []RunFreeRun
	// Targets pools the scored steps of every segment of every run of the
	// split: RMSE, NRMSE (RMSE / population std of the true values over
	// the scored steps), MAE, R2 and N (scored steps). The one-step fields
	// do not apply and are NaN. A non-finite simulated value makes them
	// non-finite too (null in JSON); Diverged says so.
	Targets []TargetMetrics
	// MeanNRMSE is the mean of Targets' NRMSE.
	MeanNRMSE float64
	// InitSteps is nInit: the measured steps given to the simulator at the
	// start of every segment, not scored.
	InitSteps int
	// Segments and SegmentSteps are the number and lengths of the
	// segments scored; SkippedSegments and SkippedSteps those of the
	// segments skipped (not longer than InitSteps). NotScored is the
	// number of grid steps of the split's runs not scored: missing rows,
	// initialisation rows and skipped segments.
	Segments        int
	SegmentSteps    []int
	SkippedSegments int
	SkippedSteps    []int
	NotScored       int
	// Diverged says whether some segment's free run diverged; Divergence
	// is the first one (see [DivergenceRangeFactor]) and DivergedSegments
	// their number.
	Diverged         bool
	DivergedSegments int
	Divergence       *Divergence
}

// Summary is a one-line description of the segments, e.g. "free run over
// 3 segments (1 skipped, 12 samples not scored)".
func (m *FreeRunMetrics) Summary() string {
	s := fmt.Sprintf("free run over %d segment(s) (%d skipped, %d samples not scored)", m.Segments, m.SkippedSegments, m.NotScored)
	if m.Diverged {
		s += fmt.Sprintf("; DIVERGED in %d segment(s), first %s", m.DivergedSegments, m.Divergence)
	}
	return s
}

// FreeRun simulates every run of split ("train", "val" or "test") with sim
// and scores the simulation against the run's grid. For each run (in the
// manifest's split order) it takes the control (input) and target columns
// of the run's aligned grid (Bundle.RunGrid) and simulates each NaN-free
// segment of consecutive steps separately (see [FreeRunGrid]); other
// columns (disturbances, features) are not used. A segment not longer than
// nInit is skipped and counted; a run without any scored segment is listed
// as skipped. Metrics are in model units, pooled over every scored step;
// definitions as for [Evaluate] (population std, R2 = 1 − SSE/SST, the
// degenerate cases alike). A split without any scored step has NaN
// metrics.
//
// A simulation of the wrong shape fails with AML_MODEL_INVALID; an error
// of the simulator is returned as is. A non-finite simulated value is no
// error: the segment is flagged as diverged.
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
	nAll, nT := len(man.AllNodes), len(ti)
	fm := &FreeRunMetrics{Split: split, InitSteps: nInit, SegmentSteps: []int{}, SkippedSteps: []int{}}
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
		rr, truth, pred, err := FreeRunGrid(id, vals, nAll, ci, ti, man.Targets, nInit, func(in, init [][]float64) ([][]float64, error) {
			return sim.SimulateRun(in, init, nInit)
		})
		if err != nil {
			return nil, err
		}
		for i := range nT {
			yt[i] = append(yt[i], truth[i]...)
			yp[i] = append(yp[i], pred[i]...)
		}
		fm.add(rr)
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
			case math.IsNaN(sse):
				tm.R2 = nan
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

// add counts run rr's segments into m.
func (m *FreeRunMetrics) add(rr RunFreeRun) {
	m.Runs = append(m.Runs, rr)
	m.NotScored += rr.GridSteps - rr.N
	for _, s := range rr.Segments {
		if s.Skipped {
			m.SkippedSegments++
			m.SkippedSteps = append(m.SkippedSteps, s.Steps)
		} else {
			m.Segments++
			m.SegmentSteps = append(m.SegmentSteps, s.Steps)
		}
		if s.Diverged {
			m.DivergedSegments++
		}
	}
	if rr.Divergence != nil {
		if !m.Diverged {
			m.Divergence = rr.Divergence
		}
		m.Diverged = true
	}
}

// FreeRunGrid is the free run of one run: vals is its grid (row-major,
// nAll columns per step), ci and ti the control and target columns,
// targets the target names. Every NaN-free segment (all ci and ti columns
// finite) longer than nInit is simulated on its own: simulate gets the
// segment's control rows and its first nInit target rows (the model is
// re-initialised after every gap) and returns one row of len(ti) targets
// per control row; rows nInit… are scored and checked for divergence
// (thresholds [DivergenceRangeFactor], [DivergenceNRMSE]). It returns the
// run's result and its scored true and simulated values per target, in
// grid order. A simulation of the wrong shape fails with
// AML_MODEL_INVALID; an error of simulate is returned as is.
func FreeRunGrid(runID string, vals []float32, nAll int, ci, ti []int, targets []string, nInit int,
	simulate func(inputs, init [][]float64) ([][]float64, error)) (RunFreeRun, [][]float64, [][]float64, error) {
	nC, nT := len(ci), len(ti)
	T := 0
	if nAll > 0 {
		T = len(vals) / nAll
	}
	rr := RunFreeRun{RunID: runID, GridSteps: T, Segments: []FreeRunSegment{}}
	yt := make([][]float64, nT)
	yp := make([][]float64, nT)
	sse := make([]float64, nT)
	for si, sg := range finiteSegments(vals, T, nAll, append(append([]int{}, ci...), ti...)) {
		lo, L := sg[0], sg[1]-sg[0]
		seg := FreeRunSegment{Offset: lo, Steps: L}
		if L <= nInit {
			seg.Skipped = true
			rr.Segments = append(rr.Segments, seg)
			continue
		}
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
		pred, err := simulate(in, init)
		if err != nil {
			return rr, nil, nil, err
		}
		if len(pred) != L {
			return rr, nil, nil, model.Invalidf("simulation", "the model simulated %d steps of run %s (segment at step %d), need %d", len(pred), runID, lo, L)
		}
		for k := nInit; k < L; k++ {
			if len(pred[k]) != nT {
				return rr, nil, nil, model.Invalidf("simulation", "step %d of run %s has %d values, need %d targets", lo+k, runID, len(pred[k]), nT)
			}
		}
		div := divergence(truth, pred, nInit)
		seg.N, seg.Diverged = L-nInit, div != nil
		rr.N += seg.N
		rr.Segments = append(rr.Segments, seg)
		for i := 0; i < nT; i++ {
			for k := nInit; k < L; k++ {
				e := pred[k][i] - truth[k][i]
				sse[i] += e * e
				yt[i] = append(yt[i], truth[k][i])
				yp[i] = append(yp[i], pred[k][i])
			}
		}
		if div != nil && rr.Divergence == nil {
			div.RunID, div.Segment, div.Step, div.Target = runID, si, lo+div.Step, targets[div.Target0]
			rr.Divergence = &div.Divergence
		}
	}
	if rr.N == 0 {
		switch {
		case len(rr.Segments) == 1 && rr.Segments[0].Steps == T:
			rr.Skipped = "the run is not longer than the initialisation"
		case len(rr.Segments) == 0:
			rr.Skipped = "the run has no NaN-free step"
		default:
			rr.Skipped = "no NaN-free segment longer than the initialisation"
		}
		return rr, yt, yp, nil
	}
	rr.RMSE, rr.NRMSE = make([]float64, nT), make([]float64, nT)
	for i := 0; i < nT; i++ {
		n := float64(rr.N)
		rr.RMSE[i] = math.Sqrt(sse[i] / n)
		rr.NRMSE[i] = ratio(rr.RMSE[i], popStd(yt[i]))
	}
	return rr, yt, yp, nil
}

type segDivergence struct {
	Divergence
	Target0 int // target index
}

// divergence checks one simulated segment (scored rows nInit…): the first
// step with a non-finite value or one beyond DivergenceRangeFactor ranges
// of the segment's measured values, else the largest error of a target
// whose NRMSE exceeds DivergenceNRMSE; nil when none. Step is relative to
// the segment.
func divergence(truth, pred [][]float64, nInit int) *segDivergence {
	L, nT := len(truth), 0
	if L > 0 {
		nT = len(truth[0])
	}
	lo, hi := make([]float64, nT), make([]float64, nT)
	for i := 0; i < nT; i++ {
		lo[i], hi[i] = math.Inf(1), math.Inf(-1)
		for k := 0; k < L; k++ {
			lo[i], hi[i] = math.Min(lo[i], truth[k][i]), math.Max(hi[i], truth[k][i])
		}
	}
	for k := nInit; k < L; k++ {
		for i := 0; i < nT; i++ {
			p := pred[k][i]
			if !finite(p) {
				return &segDivergence{Divergence{Step: k, Reason: fmt.Sprintf("the simulation is %v", p)}, i}
			}
			r, mid := hi[i]-lo[i], (hi[i]+lo[i])/2
			if r > 0 && math.Abs(p-mid) > DivergenceRangeFactor*r {
				return &segDivergence{Divergence{Step: k, Reason: fmt.Sprintf("the simulation %.4g is more than %d× the measured range [%.4g, %.4g] from its middle",
					p, DivergenceRangeFactor, lo[i], hi[i])}, i}
			}
		}
	}
	for i := 0; i < nT; i++ {
		tv := make([]float64, 0, L-nInit)
		var sse, worst float64
		at := nInit
		for k := nInit; k < L; k++ {
			e := pred[k][i] - truth[k][i]
			sse += e * e
			if math.Abs(e) > worst {
				worst, at = math.Abs(e), k
			}
			tv = append(tv, truth[k][i])
		}
		nr := ratio(math.Sqrt(sse/float64(len(tv))), popStd(tv))
		if nr > DivergenceNRMSE {
			return &segDivergence{Divergence{Step: at, Reason: fmt.Sprintf("the segment's NRMSE %.4g exceeds %d (largest error here)", nr, DivergenceNRMSE)}, i}
		}
	}
	return nil
}

// popStd is the population standard deviation of v.
func popStd(v []float64) float64 {
	n := float64(len(v))
	mean := 0.0
	for _, x := range v {
		mean += x
	}
	mean /= n
	sst := 0.0
	for _, x := range v {
		sst += (x - mean) * (x - mean)
	}
	return math.Sqrt(sst / n)
}

// finiteSegments returns every maximal run [lo, hi) of grid rows whose
// columns cols are all finite, in order.
func finiteSegments(vals []float32, T, nAll int, cols []int) [][2]int {
	var out [][2]int
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
		if k > start {
			out = append(out, [2]int{start, k})
		}
		start = k + 1
	}
	return out
}

type runFreeRunJSON struct {
	RunID      string           `json:"runId"`
	GridSteps  int              `json:"gridSteps"`
	Segments   []FreeRunSegment `json:"segments"`
	N          int              `json:"n"`
	RMSE       []jf             `json:"rmse"`
	NRMSE      []jf             `json:"nrmse"`
	Skipped    string           `json:"skipped,omitempty"`
	Divergence *Divergence      `json:"divergence,omitempty"`
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
	return json.Marshal(runFreeRunJSON{r.RunID, r.GridSteps, r.Segments, r.N, freeRunJFs(r.RMSE), freeRunJFs(r.NRMSE), r.Skipped, r.Divergence})
}

// UnmarshalJSON reads null as NaN.
func (r *RunFreeRun) UnmarshalJSON(b []byte) error {
	var j runFreeRunJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*r = RunFreeRun{j.RunID, j.GridSteps, j.Segments, j.N, freeRunFloats(j.RMSE), freeRunFloats(j.NRMSE), j.Skipped, j.Divergence}
	return nil
}

type freeRunJSON struct {
	Split            string          `json:"split"`
	Runs             []RunFreeRun    `json:"runs"`
	Targets          []TargetMetrics `json:"targets"`
	MeanNRMSE        jf              `json:"meanNrmse"`
	InitSteps        int             `json:"initSteps"`
	Segments         int             `json:"segments"`
	SegmentSteps     []int           `json:"segmentSteps"`
	SkippedSegments  int             `json:"skippedSegments"`
	SkippedSteps     []int           `json:"skippedSteps"`
	NotScored        int             `json:"notScored"`
	Diverged         bool            `json:"diverged"`
	DivergedSegments int             `json:"divergedSegments"`
	Divergence       *Divergence     `json:"divergence,omitempty"`
}

// MarshalJSON writes non-finite values as null.
func (m FreeRunMetrics) MarshalJSON() ([]byte, error) {
	return json.Marshal(freeRunJSON{m.Split, m.Runs, m.Targets, jf(m.MeanNRMSE), m.InitSteps, m.Segments, m.SegmentSteps,
		m.SkippedSegments, m.SkippedSteps, m.NotScored, m.Diverged, m.DivergedSegments, m.Divergence})
}

// UnmarshalJSON reads null as NaN.
func (m *FreeRunMetrics) UnmarshalJSON(b []byte) error {
	var j freeRunJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*m = FreeRunMetrics{j.Split, j.Runs, j.Targets, float64(j.MeanNRMSE), j.InitSteps, j.Segments, j.SegmentSteps,
		j.SkippedSegments, j.SkippedSteps, j.NotScored, j.Diverged, j.DivergedSegments, j.Divergence}
	return nil
}

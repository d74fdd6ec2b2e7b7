package eval

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/model"
)

// MinCalibrationWindows is the fewest val windows [Calibrate] accepts. A
// coverage level q additionally needs n ≥ q/(1−q) windows for the
// finite-sample quantile to exist (19 for 0.95, 99 for 0.99); see
// [CalibrationWindowsNeeded].
const MinCalibrationWindows = 20

// Conformal is a split-conformal calibration of a model on a dataset: a
// symmetric prediction interval ŷ ± Widths[f][k] per horizon step f and
// target k, in model units.
//
// The half-widths are the finite-sample split-conformal quantile of the
// absolute residuals |y − ŷ| over the calibration split (the val windows,
// which the model was not fitted on); the coverage is then measured on the
// test split (see [Conformal.MeasureCoverage]), never on the windows the
// quantile came from.
type Conformal struct {
	// Coverage is the target coverage level q, e.g. 0.90.
	Coverage float64 `json:"coverage"`
	// Widths are the half-widths [F][nTgt] in model units.
	Widths [][]float64 `json:"widths"`
	// CalibrationWindows is n, the number of calibration windows; every
	// width is the Rank-th smallest of n residuals.
	CalibrationWindows int `json:"calibrationWindows"`
	// Rank is ⌈(n+1)·q⌉.
	Rank int `json:"rank"`
	// Split is the calibration split: "val", disjoint from the train
	// split the model was fitted on and from the test split coverage is
	// measured on.
	Split string `json:"split"`
	// Targets names the targets (the manifest's order).
	Targets []string `json:"targets"`
}

// CoverageReport is the empirical coverage of a [Conformal] interval on
// the test split.
type CoverageReport struct {
	// Target is the calibrated coverage level q.
	Target float64 `json:"target"`
	// Measured is the fraction of test values (every window, step and
	// target) inside ŷ ± width: measured on TEST windows, never on the
	// calibration windows.
	Measured float64 `json:"measured"`
	// PerTarget[k] is the fraction over target k's W·F values.
	PerTarget []float64 `json:"perTarget"`
	// PerStep[f] is the fraction over step f's W·nTgt values.
	PerStep []float64 `json:"perStep"`
	// TestWindows is W.
	TestWindows int `json:"testWindows"`
	// Split is the split coverage was measured on ("test").
	Split string `json:"split"`
}

// conformalRank is ⌈(n+1)·q⌉, the 1-based rank of the finite-sample split
// conformal quantile among n sorted residuals. The product is computed in
// floating point, so a value within rounding of an integer counts as that
// integer (30·0.9 is 27, not 28).
func conformalRank(n int, q float64) int {
	v := float64(n+1) * q
	r := int(math.Ceil(v - 1e-12*math.Max(1, v)))
	return max(r, 1)
}

// CalibrationWindowsNeeded is the fewest calibration windows split
// conformal calibration at coverage q needs: at least
// [MinCalibrationWindows], and enough that ⌈(n+1)·q⌉ ≤ n (else the
// quantile is the n+1-th of n residuals, an infinite interval).
func CalibrationWindowsNeeded(q float64) int {
	if !(q > 0 && q < 1) {
		return math.MaxInt
	}
	n := max(1, int(q/(1-q))-1)
	for conformalRank(n, q) > n {
		n++
	}
	return max(n, MinCalibrationWindows)
}

// checkCoverageLevel validates a coverage level q ∈ (0, 1).
func checkCoverageLevel(q float64) error {
	if !(q > 0 && q < 1) {
		return core.FieldErrorf(core.CodeInvalidArgument, "coverage", "must be in (0, 1), got %v", q)
	}
	return nil
}

// predictSplit predicts every window of split in batches of at most
// [BatchSize] and calls fn with each window's index, prediction [F·nTgt]
// and true y [F·nTgt]. It fails like [Evaluate] on a model whose horizon
// differs from the dataset's, on a batch of the wrong length and on a
// non-finite prediction.
func predictSplit(ctx context.Context, b *dataset.Bundle, p model.Predictor, split string, fn func(w int, pred, y []float32)) error {
	d := b.Dims()
	if p.Horizon() != d.F {
		return model.Invalidf("horizon", "the model predicts %d step(s), the dataset has horizon %d", p.Horizon(), d.F)
	}
	lo, hi := b.Split(split)
	xl, ul, yl := d.XLen(), d.ULen(), d.YLen()
	targets := b.Manifest.Targets
	for start := lo; start < hi; start += BatchSize {
		if err := ctx.Err(); err != nil {
			return core.Wrap(core.CodeInternal, err, "prediction of the %s split cancelled", split)
		}
		end := min(hi, start+BatchSize)
		bn := end - start
		var u []float32
		if ul > 0 {
			u = b.U[start*ul : end*ul : end*ul]
		}
		pred, err := p.PredictBatch(ctx, b.X[start*xl:end*xl:end*xl], u, bn)
		if err != nil {
			return err
		}
		if len(pred) != bn*yl {
			return model.Invalidf("prediction", "the model returned %d values for %d windows, need %d ([n,F,nTgt] = [%d,%d,%d])", len(pred), bn, bn*yl, bn, d.F, d.YCols)
		}
		for i, v := range pred {
			if !finite(float64(v)) {
				return model.Invalidf("prediction", "the model predicted %v for %s window %d, step %d, target %s", v, split, start+i/yl, (i%yl)/d.YCols, targets[i%d.YCols])
			}
		}
		for w := start; w < end; w++ {
			o := (w - start) * yl
			y := b.Y[w*yl : (w+1)*yl]
			for i, v := range y {
				if !finite(float64(v)) {
					return core.Errorf(core.CodeDatasetTampered, "dataset y of %s window %d, step %d, target %s is not finite", split, w, i/d.YCols, targets[i%d.YCols])
				}
			}
			fn(w, pred[o:o+yl:o+yl], y)
		}
	}
	return nil
}

// Calibrate computes split-conformal half-widths for p on b at coverage
// level q ∈ (0, 1): for each horizon step f and target k it collects the
// absolute residuals |y − ŷ| of the n val windows (the calibration split,
// disjoint from the train windows the model was fitted on and from the
// test windows) and takes the ⌈(n+1)·q⌉-th smallest. Under
// exchangeability of calibration and test windows the interval ŷ ± width
// then covers a new value with probability ≥ q (per step and target).
//
// It fails with AML_INVALID_ARGUMENT when q is not in (0, 1) or the val
// split has fewer than [CalibrationWindowsNeeded](q) windows (the message
// says how many are needed), and like [Evaluate] on an invalid model.
// Neither the train nor the test windows are read.
func Calibrate(ctx context.Context, b *dataset.Bundle, p model.Predictor, coverage float64) (*Conformal, error) {
	if b == nil || p == nil {
		return nil, core.Errorf(core.CodeInternal, "eval.Calibrate: nil bundle or predictor")
	}
	if err := checkCoverageLevel(coverage); err != nil {
		return nil, err
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	d := b.Dims()
	lo, hi := b.Split(dataset.SplitVal)
	n := hi - lo
	if need := CalibrationWindowsNeeded(coverage); n < need {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "split.val", "the val (calibration) split has %d window(s); split-conformal calibration at coverage %g needs at least %d", n, coverage, need)
	}
	F, nT := d.F, d.YCols
	// res[f*nT+k] holds the n residuals of step f, target k.
	res := make([][]float64, F*nT)
	for i := range res {
		res[i] = make([]float64, 0, n)
	}
	err := predictSplit(ctx, b, p, dataset.SplitVal, func(_ int, pred, y []float32) {
		for i, v := range pred {
			res[i] = append(res[i], math.Abs(float64(v)-float64(y[i])))
		}
	})
	if err != nil {
		return nil, err
	}
	rank := conformalRank(n, coverage)
	c := &Conformal{Coverage: coverage, CalibrationWindows: n, Rank: rank, Split: dataset.SplitVal,
		Targets: append([]string(nil), b.Manifest.Targets...), Widths: make([][]float64, F)}
	for f := 0; f < F; f++ {
		c.Widths[f] = make([]float64, nT)
		for k := 0; k < nT; k++ {
			r := res[f*nT+k]
			slices.Sort(r)
			c.Widths[f][k] = r[rank-1]
		}
	}
	return c, nil
}

// checkShape verifies c's widths are [F][nT].
func (c *Conformal) checkShape(F, nT int) error {
	if c == nil {
		return core.Errorf(core.CodeInternal, "eval: nil conformal calibration")
	}
	ok := len(c.Widths) == F
	for _, row := range c.Widths {
		ok = ok && len(row) == nT
	}
	if !ok {
		return core.FieldErrorf(core.CodeInvalidArgument, "widths", "the calibration has widths for %d step(s), the dataset has horizon %d and %d target(s)", len(c.Widths), F, nT)
	}
	return nil
}

// MeasureCoverage predicts every TEST window of b with p and counts the
// true values inside ŷ ± width: Measured over every window, step and
// target, PerTarget over each target's W·F values, PerStep over each
// step's W·nTgt values. The test windows are disjoint from the calibration
// (val) windows the widths came from, so the number is an honest estimate
// of the interval's coverage. An empty test split is an error.
func (c *Conformal) MeasureCoverage(ctx context.Context, b *dataset.Bundle, p model.Predictor) (*CoverageReport, error) {
	if b == nil || p == nil {
		return nil, core.Errorf(core.CodeInternal, "eval.MeasureCoverage: nil bundle or predictor")
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	d := b.Dims()
	F, nT := d.F, d.YCols
	if err := c.checkShape(F, nT); err != nil {
		return nil, err
	}
	lo, hi := b.Split(dataset.SplitTest)
	W := hi - lo
	if W == 0 {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "split.test", "the test split has no windows: coverage cannot be measured")
	}
	inT, inF := make([]int, nT), make([]int, F)
	err := predictSplit(ctx, b, p, dataset.SplitTest, func(_ int, pred, y []float32) {
		for i, v := range pred {
			f, k := i/nT, i%nT
			if math.Abs(float64(v)-float64(y[i])) <= c.Widths[f][k] {
				inT[k]++
				inF[f]++
			}
		}
	})
	if err != nil {
		return nil, err
	}
	r := &CoverageReport{Target: c.Coverage, TestWindows: W, Split: dataset.SplitTest,
		PerTarget: make([]float64, nT), PerStep: make([]float64, F)}
	total := 0
	for k, v := range inT {
		r.PerTarget[k] = float64(v) / float64(W*F)
		total += v
	}
	for f, v := range inF {
		r.PerStep[f] = float64(v) / float64(W*nT)
	}
	r.Measured = float64(total) / float64(W*F*nT)
	return r, nil
}

// Interval returns ŷ − width and ŷ + width for predictions yhat laid out
// [F·nTgt] (one window) or [n·F·nTgt] (a batch), rounded outward to
// float32 so the interval never shrinks below the calibrated width. It
// panics when len(yhat) is not a multiple of F·nTgt.
func (c *Conformal) Interval(yhat []float32) (lo, hi []float32) {
	F := len(c.Widths)
	nT := 0
	if F > 0 {
		nT = len(c.Widths[0])
	}
	yl := F * nT
	if yl == 0 || len(yhat)%yl != 0 {
		panic(fmt.Sprintf("eval: Conformal.Interval got %d values, not a multiple of F·nTgt = %d", len(yhat), yl))
	}
	lo, hi = make([]float32, len(yhat)), make([]float32, len(yhat))
	for i, v := range yhat {
		j := i % yl
		w := c.Widths[j/nT][j%nT]
		lo[i] = down32(float64(v) - w)
		hi[i] = up32(float64(v) + w)
	}
	return lo, hi
}

// down32 is the largest float32 ≤ v; up32 the smallest ≥ v.
func down32(v float64) float32 {
	f := float32(v)
	if float64(f) > v {
		f = math.Nextafter32(f, float32(math.Inf(-1)))
	}
	return f
}

func up32(v float64) float32 {
	f := float32(v)
	if float64(f) < v {
		f = math.Nextafter32(f, float32(math.Inf(1)))
	}
	return f
}

// EnsemblePredictor is a predictor made of several members (an ensemble
// of seeds) that can return each member's predictions: one [n·F·nTgt]
// slice per member, in model units.
type EnsemblePredictor interface {
	PredictMembers(ctx context.Context, x, u []float32, n int) ([][]float32, error)
}

// Disagreement is the ensemble members' spread in units of the calibrated
// interval: for each value (window, step f, target k) the sample standard
// deviation across the members (divisor M−1) divided by the calibrated
// half-width Widths[f][k]. It is never divided by the predicted mean, so it
// does not explode for targets near zero: 1 means the members disagree by
// as much as the model's calibrated error. members[m] is member m's
// prediction, [F·nTgt] or [n·F·nTgt]; all members must have the same
// length. A width of 0 gives 0 when the members agree and +Inf otherwise;
// fewer than two members give NaN (no spread can be measured). It panics
// on members of different or wrong lengths.
func (c *Conformal) Disagreement(members [][]float32) []float64 {
	F := len(c.Widths)
	nT := 0
	if F > 0 {
		nT = len(c.Widths[0])
	}
	yl := F * nT
	if len(members) == 0 {
		return nil
	}
	L := len(members[0])
	if yl == 0 || L%yl != 0 {
		panic(fmt.Sprintf("eval: Conformal.Disagreement: member of %d values, not a multiple of F·nTgt = %d", L, yl))
	}
	for m, p := range members {
		if len(p) != L {
			panic(fmt.Sprintf("eval: Conformal.Disagreement: member %d has %d values, member 0 has %d", m, len(p), L))
		}
	}
	out := make([]float64, L)
	M := float64(len(members))
	for i := range out {
		if len(members) < 2 {
			out[i] = math.NaN()
			continue
		}
		mean := 0.0
		for _, p := range members {
			mean += float64(p[i])
		}
		mean /= M
		ss := 0.0
		for _, p := range members {
			e := float64(p[i]) - mean
			ss += e * e
		}
		j := i % yl
		out[i] = ratio(math.Sqrt(ss/(M-1)), c.Widths[j/nT][j%nT])
	}
	return out
}

// EnsembleDisagreement predicts a batch with every member of p (which
// must implement [EnsemblePredictor]) and returns [Conformal.Disagreement]
// of the members' predictions. It fails with AML_INVALID_ARGUMENT when p
// is not an ensemble, and with AML_MODEL_INVALID when a member's
// prediction has the wrong length or is not finite.
func (c *Conformal) EnsembleDisagreement(ctx context.Context, p model.Predictor, x, u []float32, n int) ([]float64, error) {
	ep, ok := p.(EnsemblePredictor)
	if !ok {
		return nil, core.Errorf(core.CodeInvalidArgument, "model format %s is not an ensemble: it cannot report its members' predictions", p.Format())
	}
	if c == nil || lenFirst(c.Widths) == 0 {
		return nil, core.Errorf(core.CodeInvalidArgument, "eval: the conformal calibration has no widths")
	}
	if err := c.checkShape(len(c.Widths), lenFirst(c.Widths)); err != nil {
		return nil, err
	}
	members, err := ep.PredictMembers(ctx, x, u, n)
	if err != nil {
		return nil, err
	}
	want := n * len(c.Widths) * lenFirst(c.Widths)
	for m, pr := range members {
		if len(pr) != want {
			return nil, model.Invalidf("prediction", "ensemble member %d returned %d values for %d windows, need %d", m, len(pr), n, want)
		}
		for i, v := range pr {
			if !finite(float64(v)) {
				return nil, model.Invalidf("prediction", "ensemble member %d predicted %v at value %d", m, v, i)
			}
		}
	}
	if len(members) == 0 {
		return nil, model.Invalidf("prediction", "the ensemble returned no members")
	}
	return c.Disagreement(members), nil
}

func lenFirst(w [][]float64) int {
	if len(w) == 0 {
		return 0
	}
	return len(w[0])
}

package linear

import (
	"errors"
	"fmt"
	"math"
)

// Selection criteria for SelectARX.
const (
	CriterionSimulation = "simulation"
	CriterionOneStep    = "one_step"
)

// Score is the validation result of one candidate model.
type Score struct {
	Orders    ARXOrders // ARX candidates
	Lambda    float64   // ARX candidates
	Order     int       // state-space candidates
	BlockRows int       // state-space candidates
	Criterion string
	Start     int       // first validation sample included in the metrics
	RMSE      []float64 // per output
	NRMSE     []float64 // per output
	// Value is the mean NRMSE over outputs, the quantity minimised; +Inf
	// when the fit failed or the prediction diverged.
	Value float64
	Err   error
	// Folds is the number of cross-validation blocks (0: scored on a
	// validation record).
	Folds int
	// Skipped, when not empty, says why the candidate was not fitted: the
	// data cannot support it.
	Skipped string
}

func (s Score) String() string {
	if s.Skipped != "" {
		return fmt.Sprintf("%v λ=%g order=%d: skipped, %s", s.Orders, s.Lambda, s.Order, s.Skipped)
	}
	if s.Err != nil {
		return fmt.Sprintf("%v λ=%g order=%d: error %v", s.Orders, s.Lambda, s.Order, s.Err)
	}
	if s.Order > 0 {
		return fmt.Sprintf("n=%d i=%d %s meanNRMSE=%.4f RMSE=%.4g", s.Order, s.BlockRows, s.Criterion, s.Value, s.RMSE)
	}
	return fmt.Sprintf("%v λ=%g %s meanNRMSE=%.4f RMSE=%.4g", s.Orders, s.Lambda, s.Criterion, s.Value, s.RMSE)
}

// SelectARX fits every combination of orders in grid and ridge parameter in
// lambdas (nil means {0}) on the training data and scores it on the
// validation data with criterion "simulation" (free run initialised with the
// first measured validation outputs) or "one_step". All candidates are
// scored over the same samples k ≥ max MaxLag of the grid, and the free run
// is initialised with exactly those samples. The model with the smallest mean
// NRMSE is returned (fitted on the training data only) with all scores, in
// grid-major, lambda-minor order.
func SelectARX(yTr, uTr, yVal, uVal [][]float64, grid []ARXOrders, lambdas []float64, criterion string) (*ARX, []Score, error) {
	criterion, lambdas, start, err := arxSelectArgs(grid, lambdas, criterion)
	if err != nil {
		return nil, nil, err
	}
	if _, _, err := checkPair(yVal, uVal); err != nil {
		return nil, nil, err
	}
	if start >= len(yVal) {
		return nil, nil, errShortData
	}
	fit := func(o ARXOrders, lam float64) (*ARX, error) { return FitARX(yTr, uTr, o, lam) }
	return selectARX([][][]float64{yVal}, [][][]float64{uVal}, grid, lambdas, criterion, start, fit, nil)
}

// arxSelectArgs checks the criterion and the grid of SelectARX and
// SelectARXSegments, defaults the criterion and lambdas, and returns the
// first scored sample: the largest MaxLag of the grid.
func arxSelectArgs(grid []ARXOrders, lambdas []float64, criterion string) (string, []float64, int, error) {
	if criterion == "" {
		criterion = CriterionSimulation
	}
	if criterion != CriterionSimulation && criterion != CriterionOneStep {
		return "", nil, 0, fmt.Errorf("linear: unknown criterion %q", criterion)
	}
	if len(grid) == 0 {
		return "", nil, 0, errors.New("linear: empty ARX grid")
	}
	if len(lambdas) == 0 {
		lambdas = []float64{0}
	}
	start := 0
	for _, o := range grid {
		start = max(start, o.MaxLag())
	}
	return criterion, lambdas, start, nil
}

// selectARX fits every candidate of grid × lambdas with fit and scores it
// on the validation segments yVal, uVal (a single record is one segment)
// by the criterion over the samples k ≥ start of every segment, pooled;
// the free run of a segment is initialised with its first start measured
// outputs. progress is as in SelectARXSegments.
func selectARX(yVal, uVal [][][]float64, grid []ARXOrders, lambdas []float64, criterion string, start int, fit func(o ARXOrders, lambda float64) (*ARX, error), progress func(done, total int) error) (*ARX, []Score, error) {
	var best *ARX
	bestV := math.Inf(1)
	var scores []Score
	total := len(grid) * len(lambdas)
	for _, o := range grid {
		for _, lam := range lambdas {
			sc := Score{Orders: o, Lambda: lam, Criterion: criterion, Start: start, Value: math.Inf(1)}
			if m, err := fit(o, lam); err != nil {
				sc.Err = err
			} else {
				preds := make([][][]float64, len(yVal))
				for k := range yVal {
					if criterion == CriterionSimulation {
						preds[k] = m.Simulate(uVal[k], yVal[k][:start])
					} else {
						preds[k] = m.PredictOneStep(yVal[k], uVal[k])
					}
				}
				sc.RMSE, sc.NRMSE = pooledScore(yVal, preds, start)
				sc.Value = finiteOr(Mean(sc.NRMSE))
				if sc.Value < bestV {
					best, bestV = m, sc.Value
				}
			}
			scores = append(scores, sc)
			if err := segProgress(progress, len(scores), total); err != nil {
				return nil, scores, err
			}
		}
	}
	if best == nil {
		return nil, scores, errors.New("linear: no ARX candidate could be fitted and evaluated")
	}
	return best, scores, nil
}

// SelectStateSpace fits one model per order in orders (all sharing the same
// PO-MOESP decomposition of the training data, with opts otherwise as
// given) and scores each on the validation record by free-run simulation:
// the initial state is estimated from the first opts.NInit validation
// samples and the mean NRMSE is taken over k ≥ NInit. The best model
// (fitted on the training data only) and all scores are returned.
func SelectStateSpace(yTr, uTr, yVal, uVal [][]float64, orders []int, opts SubspaceOptions) (*StateSpace, []Score, error) {
	if len(orders) == 0 {
		return nil, nil, errNoOrders
	}
	d, err := prepareSS(yTr, uTr, opts.Scaling)
	if err != nil {
		return nil, nil, err
	}
	if _, _, err := checkPair(yVal, uVal); err != nil {
		return nil, nil, err
	}
	maxN, err := maxOrder(orders)
	if err != nil {
		return nil, nil, err
	}
	base := opts
	base.Order = maxN
	base, err = base.withDefaults(d.T, d.ny, d.nu)
	if err != nil {
		return nil, nil, err
	}
	r, err := poMOESP(d, base.BlockRows, !base.NoOffset)
	if err != nil {
		return nil, nil, err
	}
	return selectStateSpace(d, r, base, orders, [][][]float64{yVal}, [][][]float64{uVal}, nil)
}

var errNoOrders = errors.New("linear: no candidate orders")

// maxOrder checks that every candidate order is positive and returns the
// largest.
func maxOrder(orders []int) (int, error) {
	maxN := 0
	for _, n := range orders {
		if n <= 0 {
			return 0, fmt.Errorf("linear: order %d must be positive", n)
		}
		maxN = max(maxN, n)
	}
	return maxN, nil
}

// selectStateSpace fits one model per order from the decomposition r of
// the training segments d (base holds the options with defaults) and
// scores each by free-run simulation of the validation segments yVal, uVal
// (a single record is one segment), every segment from the initial state
// estimated on its first base.NInit samples, over the samples k ≥ NInit of
// all segments, pooled. progress is as in SelectStateSpaceSegments.
func selectStateSpace(d *segData, r *moespResult, base SubspaceOptions, orders []int, yVal, uVal [][][]float64, progress func(done, total int) error) (*StateSpace, []Score, error) {
	var best *StateSpace
	bestV := math.Inf(1)
	var scores []Score
	start := base.NInit
	for _, n := range orders {
		o := base
		o.Order = n
		sc := Score{Order: n, BlockRows: base.BlockRows, Criterion: CriterionSimulation, Start: start, Value: math.Inf(1)}
		if m, err := fitFromMOESP(d, r, o); err != nil {
			sc.Err = err
		} else {
			preds := make([][][]float64, len(yVal))
			for k := range yVal {
				preds[k] = m.SimulateFrom(yVal[k], uVal[k], start)
			}
			sc.RMSE, sc.NRMSE = pooledScore(yVal, preds, start)
			sc.Value = finiteOr(Mean(sc.NRMSE))
			if sc.Value < bestV {
				best, bestV = m, sc.Value
			}
		}
		scores = append(scores, sc)
		if err := segProgress(progress, len(scores), len(orders)); err != nil {
			return nil, scores, err
		}
	}
	if best == nil {
		return nil, scores, errors.New("linear: no state-space candidate could be fitted")
	}
	return best, scores, nil
}

// pooledScore computes per-output RMSE and NRMSE over samples k ≥ start of
// every segment together (the std is that of the pooled true values). With
// one segment they are RMSE and NRMSE of that segment.
func pooledScore(yTrue, yPred [][][]float64, start int) (rmse, nrmse []float64) {
	if len(yTrue) == 1 {
		return RMSE(yTrue[0], yPred[0], start), NRMSE(yTrue[0], yPred[0], start)
	}
	var yt, yp [][]float64
	for k := range yTrue {
		if len(yTrue[k]) > start {
			yt = append(yt, yTrue[k][start:]...)
			yp = append(yp, yPred[k][start:]...)
		}
	}
	return RMSE(yt, yp, 0), NRMSE(yt, yp, 0)
}

func segProgress(progress func(done, total int) error, done, total int) error {
	if progress == nil {
		return nil
	}
	return progress(done, total)
}

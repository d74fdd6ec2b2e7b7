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
}

func (s Score) String() string {
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
	if criterion == "" {
		criterion = CriterionSimulation
	}
	if criterion != CriterionSimulation && criterion != CriterionOneStep {
		return nil, nil, fmt.Errorf("linear: unknown criterion %q", criterion)
	}
	if len(grid) == 0 {
		return nil, nil, errors.New("linear: empty ARX grid")
	}
	if len(lambdas) == 0 {
		lambdas = []float64{0}
	}
	if _, _, err := checkPair(yVal, uVal); err != nil {
		return nil, nil, err
	}
	start := 0
	for _, o := range grid {
		start = max(start, o.MaxLag())
	}
	if start >= len(yVal) {
		return nil, nil, errShortData
	}
	var best *ARX
	bestV := math.Inf(1)
	var scores []Score
	for _, o := range grid {
		for _, lam := range lambdas {
			sc := Score{Orders: o, Lambda: lam, Criterion: criterion, Start: start, Value: math.Inf(1)}
			m, err := FitARX(yTr, uTr, o, lam)
			if err != nil {
				sc.Err = err
				scores = append(scores, sc)
				continue
			}
			var pred [][]float64
			if criterion == CriterionSimulation {
				pred = m.Simulate(uVal, yVal[:start])
			} else {
				pred = m.PredictOneStep(yVal, uVal)
			}
			sc.RMSE = RMSE(yVal, pred, start)
			sc.NRMSE = NRMSE(yVal, pred, start)
			sc.Value = finiteOr(Mean(sc.NRMSE))
			scores = append(scores, sc)
			if sc.Value < bestV {
				best, bestV = m, sc.Value
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
		return nil, nil, errors.New("linear: no candidate orders")
	}
	d, err := prepareSS(yTr, uTr, opts.Scaling)
	if err != nil {
		return nil, nil, err
	}
	if _, _, err := checkPair(yVal, uVal); err != nil {
		return nil, nil, err
	}
	maxN := 0
	for _, n := range orders {
		if n <= 0 {
			return nil, nil, fmt.Errorf("linear: order %d must be positive", n)
		}
		maxN = max(maxN, n)
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
	var best *StateSpace
	bestV := math.Inf(1)
	var scores []Score
	start := base.NInit
	for _, n := range orders {
		o := base
		o.Order = n
		sc := Score{Order: n, BlockRows: base.BlockRows, Criterion: CriterionSimulation, Start: start, Value: math.Inf(1)}
		m, err := fitFromMOESP(d, r, o)
		if err != nil {
			sc.Err = err
			scores = append(scores, sc)
			continue
		}
		pred := m.SimulateFrom(yVal, uVal, start)
		sc.RMSE = RMSE(yVal, pred, start)
		sc.NRMSE = NRMSE(yVal, pred, start)
		sc.Value = finiteOr(Mean(sc.NRMSE))
		scores = append(scores, sc)
		if sc.Value < bestV {
			best, bestV = m, sc.Value
		}
	}
	if best == nil {
		return nil, scores, errors.New("linear: no state-space candidate could be fitted")
	}
	return best, scores, nil
}

package linear

// Structure selection by block cross-validation on the estimation data, a
// grid that adapts to the data, and input-delay estimation.
//
// Block cross-validation: the estimation segments, taken one after the
// other, are cut into K contiguous blocks of (about) equal sample count.
// For fold f every candidate is fitted on the segments' pieces outside
// block f (a segment cut by the block leaves a piece before and one after
// it, which are never joined) and scored by free-run simulation (or
// one-step prediction) of the pieces inside block f; the candidate's score
// is the mean over the folds of its mean NRMSE, and the winner is refitted
// on all estimation segments. No validation record is needed, so a
// dataset's val split stays unseen for calibration.
//
// Adaptive grid: a candidate the data cannot support (an ARX whose
// regressors outnumber a fold's regression rows or whose largest lag
// leaves no held-out piece to score, a state-space order not below
// NY·BlockRows for the block rows the data allow) is not fitted; its Score
// has Skipped set to the reason, and the selection fails only when no
// candidate is feasible.

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// DefaultCVFolds is the number of blocks of SelectARXCV and
// SelectStateSpaceCV when K ≤ 1 is given.
const DefaultCVFolds = 3

// OrderTol is the relative margin within which SelectStateSpaceCV
// prefers a smaller order to the one with the best score: past the true
// order the refined models simulate alike and their CV means differ by
// noise.
const OrderTol = 0.01

// DelayTol is the relative margin within which EstimateDelays prefers a
// shorter delay to the one with the best score.
const DelayTol = 0.01

// cvFold holds the training and held-out pieces of one fold.
type cvFold struct {
	yTr, uTr, yVa, uVa [][][]float64
}

// cvFolds cuts the segments into k contiguous blocks over their
// concatenated samples (pieces are never joined).
func cvFolds(ys, us [][][]float64, k int) []cvFold {
	total := 0
	for _, y := range ys {
		total += len(y)
	}
	folds := make([]cvFold, k)
	for f := range folds {
		lo, hi := f*total/k, (f+1)*total/k
		off := 0
		for s, y := range ys {
			T := len(y)
			a, b := max(lo-off, 0), min(hi-off, T) // block within the segment
			if a >= b {
				folds[f].yTr, folds[f].uTr = append(folds[f].yTr, y), append(folds[f].uTr, us[s])
			} else {
				if a > 0 {
					folds[f].yTr, folds[f].uTr = append(folds[f].yTr, y[:a]), append(folds[f].uTr, us[s][:a])
				}
				if b < T {
					folds[f].yTr, folds[f].uTr = append(folds[f].yTr, y[b:]), append(folds[f].uTr, us[s][b:])
				}
				folds[f].yVa, folds[f].uVa = append(folds[f].yVa, y[a:b]), append(folds[f].uVa, us[s][a:b])
			}
			off += T
		}
	}
	return folds
}

// cvArgs checks the segments and the number of folds.
func cvArgs(ys, us [][][]float64, k int) (ny, nu, K int, err error) {
	ny, nu, err = checkSegments(ys, us)
	if err != nil {
		return 0, 0, 0, err
	}
	if k <= 1 {
		k = DefaultCVFolds
	}
	return ny, nu, k, nil
}

// regressionRows is the number of ARX regression rows of segments with
// the largest lag lag.
func regressionRows(ys [][][]float64, lag int) int {
	n := 0
	for _, y := range ys {
		n += max(0, len(y)-lag)
	}
	return n
}

// arxSkipReason says why the candidate o cannot be fitted and scored in
// every fold (scored from sample start of a held-out piece), "" if it can.
func arxSkipReason(o ARXOrders, ny, nu int, icpt bool, lambda float64, folds []cvFold, start int) string {
	p := numRegressors(o, ny, nu, icpt)
	for f, fd := range folds {
		if r := regressionRows(fd.yTr, o.MaxLag()); r == 0 || (lambda == 0 && r < p) {
			return fmt.Sprintf("%d regressors per output, fold %d has %d regression rows", p, f+1, r)
		}
		if yv, _ := usableSegments(fd.yVa, fd.uVa, start); len(yv) == 0 {
			return fmt.Sprintf("largest lag %d: no held-out piece of fold %d is longer", start, f+1)
		}
	}
	return ""
}

// SelectARXCV selects the ARX structure among grid × lambdas (nil means
// {0}) by K-fold block cross-validation of the estimation segments ys, us
// (K ≤ 1: DefaultCVFolds) with criterion "simulation" (free run from the
// first measured outputs of each held-out piece, default) or "one_step".
// All feasible candidates are scored from the same sample of every
// held-out piece, the largest MaxLag among them. Infeasible candidates are
// skipped (Score.Skipped). The winner, refitted on all segments with opts
// (Lambda replaced by the chosen one), is returned with one Score per
// candidate (grid-major, lambda-minor; RMSE and NRMSE are the means over
// the folds). progress is as in SelectARXSegments.
func SelectARXCV(ys, us [][][]float64, grid []ARXOrders, lambdas []float64, criterion string, opts ARXOptions, k int, progress func(done, total int) error) (*ARX, []Score, error) {
	criterion, lambdas, _, err := arxSelectArgs(grid, lambdas, criterion)
	if err != nil {
		return nil, nil, err
	}
	ny, nu, k, err := cvArgs(ys, us, k)
	if err != nil {
		return nil, nil, err
	}
	for _, o := range grid {
		if err := o.validateInputs(nu); err != nil {
			return nil, nil, err
		}
	}
	folds := cvFolds(ys, us, k)
	// the common first scored sample: the largest lag of the candidates
	// that can be fitted in every fold and leave a piece to score
	start := 0
	for _, o := range grid {
		if arxSkipReason(o, ny, nu, !opts.NoIntercept, 0, folds, o.MaxLag()) == "" {
			start = max(start, o.MaxLag())
		}
	}
	total := len(grid) * len(lambdas)
	var scores []Score
	bestI, bestV := -1, math.Inf(1)
	for _, o := range grid {
		for _, lam := range lambdas {
			sc := Score{Orders: o, Lambda: lam, Criterion: criterion, Start: start, Folds: k, Value: math.Inf(1)}
			if sc.Skipped = arxSkipReason(o, ny, nu, !opts.NoIntercept, lam, folds, start); sc.Skipped == "" {
				op := opts
				op.Lambda = lam
				sc.RMSE, sc.NRMSE = make([]float64, ny), make([]float64, ny)
				sum := 0.0
				for _, fd := range folds {
					m, err := fitARX(fd.yTr, fd.uTr, ny, nu, o, op)
					if err != nil {
						sc.Err = err
						break
					}
					yv, uv := usableSegments(fd.yVa, fd.uVa, start)
					preds := make([][][]float64, len(yv))
					for s := range yv {
						if criterion == CriterionSimulation {
							preds[s] = m.Simulate(uv[s], yv[s][:start])
						} else {
							preds[s] = m.PredictOneStep(yv[s], uv[s])
						}
					}
					r, n := pooledScore(yv, preds, start)
					for j := range r {
						sc.RMSE[j] += r[j] / float64(k)
						sc.NRMSE[j] += n[j] / float64(k)
					}
					sum += finiteOr(Mean(n))
				}
				if sc.Err == nil {
					sc.Value = finiteOr(sum / float64(k))
				} else {
					sc.RMSE, sc.NRMSE = nil, nil
				}
				if sc.Value < bestV {
					bestI, bestV = len(scores), sc.Value
				}
			}
			scores = append(scores, sc)
			if err := segProgress(progress, len(scores), total); err != nil {
				return nil, scores, err
			}
		}
	}
	if bestI < 0 {
		return nil, scores, noCandidate("ARX", scores)
	}
	op := opts
	op.Lambda = scores[bestI].Lambda
	m, err := fitARX(ys, us, ny, nu, scores[bestI].Orders, op)
	if err != nil {
		return nil, scores, err
	}
	return m, scores, nil
}

// noCandidate is the error of a selection without a usable candidate,
// naming the first reasons.
func noCandidate(kind string, scores []Score) error {
	var why []string
	for _, s := range scores {
		r := s.Skipped
		if r == "" && s.Err != nil {
			r = s.Err.Error()
		}
		if r != "" && len(why) < 3 {
			why = append(why, r)
		}
	}
	if len(why) == 0 {
		return fmt.Errorf("linear: no %s candidate could be fitted and evaluated", kind)
	}
	return fmt.Errorf("linear: no %s candidate is feasible (%s)", kind, strings.Join(why, "; "))
}

// ssFeasible splits orders into those the segments d support with opts
// (Order set to each) and skipped scores giving the reason for the rest.
// Feasibility is downward closed, so the largest feasible order fixes
// block rows that every feasible order can use.
func ssFeasible(d *segData, orders []int, opts SubspaceOptions, what string) (ok []int, skipped map[int]string) {
	skipped = map[int]string{}
	for _, n := range orders {
		o := opts
		o.Order = n
		if _, err := o.withSegmentDefaults(d); err != nil {
			msg := strings.TrimPrefix(err.Error(), "linear: ")
			if what != "" {
				msg = what + ": " + msg
			}
			skipped[n] = msg
			continue
		}
		ok = append(ok, n)
	}
	return ok, skipped
}

// SelectStateSpaceCV selects the state-space order among orders by K-fold
// block cross-validation of the estimation segments (K ≤ 1:
// DefaultCVFolds): in every fold one PO-MOESP decomposition of the
// training pieces is shared by the orders, each model is simulated over
// every held-out piece longer than opts.NInit from the initial state
// estimated on its first NInit samples, and the order's score is the mean
// over the folds of its mean NRMSE (samples k ≥ NInit); the smallest
// order whose score is within OrderTol of the best wins. Orders that some
// fold's data cannot support are skipped (Score.Skipped); the chosen order
// is refitted on all segments (FitSubspaceSegments with opts, MaxOrder the
// largest feasible order). progress is as in SelectStateSpaceSegments.
func SelectStateSpaceCV(ys, us [][][]float64, orders []int, opts SubspaceOptions, k int, progress func(done, total int) error) (*StateSpace, []Score, error) {
	if len(orders) == 0 {
		return nil, nil, errNoOrders
	}
	if _, err := maxOrder(orders); err != nil {
		return nil, nil, err
	}
	ny, _, k, err := cvArgs(ys, us, k)
	if err != nil {
		return nil, nil, err
	}
	nInit := opts.NInit
	if nInit == 0 {
		nInit = 5
	}
	folds := cvFolds(ys, us, k)
	skipped := map[int]string{}
	feasible := orders
	var ds []*segData
	for f, fd := range folds {
		d, err := prepareSegments(fd.yTr, fd.uTr, opts.Scaling)
		if err != nil {
			return nil, nil, err
		}
		if yv, _ := usableSegments(fd.yVa, fd.uVa, nInit); len(yv) == 0 {
			return nil, nil, fmt.Errorf("linear: no held-out piece of fold %d is longer than NInit = %d", f+1, nInit)
		}
		var sk map[int]string
		feasible, sk = ssFeasible(d, feasible, opts, fmt.Sprintf("fold %d (%d samples)", f+1, d.T))
		for n, r := range sk {
			skipped[n] = r
		}
		ds = append(ds, d)
	}
	full, err := prepareSegments(ys, us, opts.Scaling)
	if err != nil {
		return nil, nil, err
	}
	var sk map[int]string
	feasible, sk = ssFeasible(full, feasible, opts, fmt.Sprintf("all %d samples", full.T))
	for n, r := range sk {
		skipped[n] = r
	}
	scores := make([]Score, len(orders))
	idx := map[int]int{}
	for i, n := range orders {
		scores[i] = Score{Order: n, Criterion: CriterionSimulation, Start: nInit, Folds: k, Value: math.Inf(1), Skipped: skipped[n]}
		idx[n] = i
	}
	if len(feasible) == 0 {
		return nil, scores, noCandidate("state-space", scores)
	}
	maxN := 0
	for _, n := range feasible {
		maxN = max(maxN, n)
	}
	total := k * len(feasible)
	done := 0
	if err := segProgress(progress, 0, total); err != nil {
		return nil, scores, err
	}
	sums := make([]float64, len(orders))
	for f, fd := range folds {
		base := opts
		base.Order = maxN
		base.NInit = nInit
		if base, err = base.withSegmentDefaults(ds[f]); err != nil {
			return nil, scores, err
		}
		r, err := poMOESP(ds[f], base.BlockRows, !base.NoOffset)
		if err != nil {
			return nil, scores, err
		}
		yv, uv := usableSegments(fd.yVa, fd.uVa, nInit)
		for _, n := range feasible {
			sc := &scores[idx[n]]
			if sc.Err != nil {
				continue
			}
			sc.BlockRows = max(sc.BlockRows, base.BlockRows)
			o := base
			o.Order = n
			m, err := fitFromMOESP(ds[f], r, o)
			if err != nil {
				sc.Err = fmt.Errorf("fold %d: %w", f+1, err)
			} else {
				preds := make([][][]float64, len(yv))
				for s := range yv {
					preds[s] = m.SimulateFrom(yv[s], uv[s], nInit)
				}
				rm, nr := pooledScore(yv, preds, nInit)
				if sc.RMSE == nil {
					sc.RMSE, sc.NRMSE = make([]float64, ny), make([]float64, ny)
				}
				for j := range rm {
					sc.RMSE[j] += rm[j] / float64(k)
					sc.NRMSE[j] += nr[j] / float64(k)
				}
				sums[idx[n]] += finiteOr(Mean(nr))
			}
			done++
			if err := segProgress(progress, done, total); err != nil {
				return nil, scores, err
			}
		}
	}
	bestV := math.Inf(1)
	for _, n := range feasible {
		i := idx[n]
		if scores[i].Err != nil {
			scores[i].RMSE, scores[i].NRMSE = nil, nil
			continue
		}
		scores[i].Value = finiteOr(sums[i] / float64(k))
		bestV = min(bestV, scores[i].Value)
	}
	// the smallest order within OrderTol of the best score
	bestI := -1
	for _, n := range feasible {
		i := idx[n]
		if v := scores[i].Value; !math.IsInf(bestV, 1) && v <= bestV*(1+OrderTol) && (bestI < 0 || n < scores[bestI].Order) {
			bestI = i
		}
	}
	if bestI < 0 {
		return nil, scores, noCandidate("state-space", scores)
	}
	o := opts
	o.Order = scores[bestI].Order
	o.MaxOrder = maxN
	m, err := FitSubspaceSegments(ys, us, o)
	if err != nil {
		return nil, scores, err
	}
	return m, scores, nil
}

// DelayScore is the score of one candidate delay of one input in
// EstimateDelays.
type DelayScore struct {
	Input, NK int
	// Value is the mean one-step NRMSE over the outputs on the estimation
	// data (+Inf when the fit failed).
	Value float64
}

// EstimateDelays estimates one delay per input by an ARX sweep on the
// estimation segments: starting from every input at delay minDelay, each
// input in turn (two passes over the inputs) takes the delay nk ∈
// minDelay..maxDelay whose ARX(na, nb, per-input nk, opts) fit has the
// smallest one-step NRMSE (mean over outputs) on the segments, the other
// inputs keeping their current delays. Every candidate has the same number
// of parameters and is scored over the same samples (k ≥ max(na,
// maxDelay+nb−1) of every segment), so the in-sample residual compares
// them fairly: a window nk … nk+nb−1 that starts before the true delay
// wastes a coefficient on a lag with no effect, one that starts after it
// misses the first lag that acts. The smallest delay whose score is
// within DelayTol of the input's best wins (with no clear evidence,
// as on a slow process whose delays all score alike, the shortest). The
// scores of the last pass are returned, input-major.
func EstimateDelays(ys, us [][][]float64, na, nb, minDelay, maxDelay int, opts ARXOptions) ([]int, []DelayScore, error) {
	ny, nu, err := checkSegments(ys, us)
	if err != nil {
		return nil, nil, err
	}
	if nb < 1 || na < 0 || minDelay < 0 || maxDelay < minDelay {
		return nil, nil, fmt.Errorf("linear: delay sweep needs nb ≥ 1, na ≥ 0 and 0 ≤ minDelay ≤ maxDelay (na=%d nb=%d delays %d..%d)", na, nb, minDelay, maxDelay)
	}
	start := max(na, maxDelay+nb-1)
	yv, uv := usableSegments(ys, us, start)
	if len(yv) == 0 {
		return nil, nil, fmt.Errorf("linear: no segment is longer than %d samples for the delay sweep", start)
	}
	nks := make([]int, nu)
	for a := range nks {
		nks[a] = minDelay
	}
	var scores []DelayScore
	for pass := 0; pass < 2; pass++ {
		scores = scores[:0]
		changed := false
		for a := 0; a < nu; a++ {
			bestV := math.Inf(1)
			first := len(scores)
			for nk := minDelay; nk <= maxDelay; nk++ {
				cand := append([]int(nil), nks...)
				cand[a] = nk
				o := ARXOrders{NA: na, NB: nb, NKs: cand}
				v := math.Inf(1)
				if m, err := fitARX(ys, us, ny, nu, o, opts); err == nil {
					preds := make([][][]float64, len(yv))
					for s := range yv {
						preds[s] = m.PredictOneStep(yv[s], uv[s])
					}
					_, n := pooledScore(yv, preds, start)
					v = finiteOr(Mean(n))
				}
				scores = append(scores, DelayScore{Input: a, NK: nk, Value: v})
				bestV = min(bestV, v)
			}
			if math.IsInf(bestV, 1) {
				return nil, scores, errors.New("linear: no delay candidate could be fitted")
			}
			// the smallest delay within DelayTol of the best: a later
			// window must earn its place (slow processes score all delays
			// alike)
			best := nks[a]
			for _, c := range scores[first:] {
				if c.Value <= bestV*(1+DelayTol) {
					best = c.NK
					break
				}
			}
			if best != nks[a] {
				nks[a], changed = best, true
			}
		}
		if !changed && pass > 0 {
			break
		}
	}
	return nks, scores, nil
}

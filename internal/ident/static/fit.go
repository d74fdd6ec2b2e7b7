package static

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
)

// Model kinds.
const (
	KindPoly = "poly"
	KindGP   = "gp"
)

// Options controls Fit. Zero numeric fields take their defaults; the
// booleans are used as given, so start from DefaultOptions to get the
// documented defaults (Interactions true, GP true).
type Options struct {
	// Degrees are the candidate polynomial degrees (≥ 0). Default {1, 2, 3}.
	Degrees []int `json:"degrees,omitempty"`
	// Lambdas are the candidate ridge penalties (≥ 0, in standardised
	// units, on every term but the intercept). Default: 21 points,
	// log-spaced by half decades from 1e-8 to 1e2.
	Lambdas []float64 `json:"lambdas,omitempty"`
	// Folds is the number of inner CV folds used for selection. Default 5;
	// reduced to n when the training set has fewer than Folds rows.
	Folds int `json:"folds,omitempty"`
	// Seed fixes the (shuffled) assignment of training rows to inner folds.
	Seed uint64 `json:"seed"`
	// Interactions: true = every monomial up to the degree; false = pure
	// powers x_i^k only. DefaultOptions sets true.
	Interactions bool `json:"interactions"`
	// GP: also try a Gaussian process (ARD RBF + noise kernel,
	// hyperparameters by maximum marginal likelihood) and keep it when its
	// inner-CV score beats the selected polynomial's.
	GP bool `json:"gp"`
	// Parsimony sets the one-standard-error rule: among the polynomials, the
	// lowest degree whose best CV score is within Parsimony standard errors
	// of the overall best (SE over the inner folds, plus 1e-12 absolute) is
	// chosen, with its best λ. Default 1; negative = plain argmin.
	Parsimony float64 `json:"parsimony,omitempty"`
	// GPMaxRows skips the GP candidate when Fit gets more rows than this
	// (exact GP hyperparameter search is O(n³) per likelihood evaluation).
	// Default 500; negative = no limit.
	GPMaxRows int `json:"gp_max_rows,omitempty"`
}

// DefaultOptions returns the documented defaults: degrees {1,2,3}, the
// 1e-8..1e2 λ grid, 5 folds, seed 0, interactions and the GP candidate on.
func DefaultOptions() Options {
	o := Options{Interactions: true, GP: true}
	return o.withDefaults()
}

// DefaultLambdas is the default ridge grid: 10^(−8 + k/2), k = 0..20.
func DefaultLambdas() []float64 {
	l := make([]float64, 21)
	for k := range l {
		l[k] = math.Pow(10, -8+0.5*float64(k))
	}
	return l
}

func (o Options) withDefaults() Options {
	if len(o.Degrees) == 0 {
		o.Degrees = []int{1, 2, 3}
	}
	if len(o.Lambdas) == 0 {
		o.Lambdas = DefaultLambdas()
	}
	if o.Folds == 0 {
		o.Folds = 5
	}
	if o.Parsimony == 0 {
		o.Parsimony = 1
	}
	if o.GPMaxRows == 0 {
		o.GPMaxRows = 500
	}
	return o
}

func (o Options) validate() error {
	for _, d := range o.Degrees {
		if d < 0 || d > 10 {
			return fmt.Errorf("static: degree %d outside 0..10", d)
		}
	}
	for _, l := range o.Lambdas {
		if !(l >= 0) || math.IsInf(l, 0) {
			return fmt.Errorf("static: ridge penalty %v not a finite value ≥ 0", l)
		}
	}
	if o.Folds < 2 {
		return fmt.Errorf("static: %d folds, need at least 2", o.Folds)
	}
	return nil
}

// Model is a fitted static response model. Inputs are standardised with
// the training means and population standard deviations (InMean, InStd),
// outputs likewise (OutMean, OutStd); every coefficient and hyperparameter
// is in those standardised units.
type Model struct {
	Kind         string  `json:"kind"` // "poly" | "gp"
	Degree       int     `json:"degree,omitempty"`
	Lambda       float64 `json:"lambda,omitempty"`
	Interactions bool    `json:"interactions,omitempty"`
	// Terms[t][i] is the exponent of input i in term t; Terms[0] is the
	// intercept. Poly only.
	Terms [][]int `json:"terms,omitempty"`
	// Coef[o][t] is the coefficient of term t for output o: the prediction
	// is OutMean[o] + OutStd[o]·Σ_t Coef[o][t]·Π_i z_i^Terms[t][i] with
	// z_i = (x_i − InMean[i]) / InStd[i]. Poly only.
	Coef    [][]float64 `json:"coef,omitempty"`
	InMean  []float64   `json:"in_mean"`
	InStd   []float64   `json:"in_std"`
	OutMean []float64   `json:"out_mean"`
	OutStd  []float64   `json:"out_std"`
	// GP only: standardised training inputs, per-output hyperparameters
	// and weights α = (K + σn²I)⁻¹ y_std. The prediction is
	// OutMean[o] + OutStd[o]·Σ_j α_j k(z, GPX[j]).
	GPX      [][]float64 `json:"gp_x,omitempty"`
	GPParams []GPParams  `json:"gp_params,omitempty"`
	GPAlpha  [][]float64 `json:"gp_alpha,omitempty"`
}

// Candidate is one model tried by the selection and its inner-CV score.
type Candidate struct {
	Kind   string  `json:"kind"`
	Degree int     `json:"degree"`
	Lambda float64 `json:"lambda"`
	// CVMSE is the out-of-fold mean squared error in standardised output
	// units (divided by the training variance of each output), averaged
	// over outputs. Lower is better; +Inf when a fold could not be fitted.
	CVMSE float64 `json:"cv_mse"`
	// CVSE is the standard error of CVMSE: the standard deviation of the
	// per-fold scores (each a fold's MSE, standardised as above) / √folds.
	CVSE float64 `json:"cv_se"`
	// CVR2 is the pooled out-of-fold R² (SST about the mean of all
	// training rows), averaged over outputs.
	CVR2 float64 `json:"cv_r2"`
}

// Selection reports every candidate's inner-CV score and the choice. The
// polynomial candidates come first, ordered by degree then λ; the GP
// candidate, when tried, is last.
type Selection struct {
	Folds int `json:"folds"`
	// GPSkipped is set when Options.GP asked for the GP but the training
	// set had more than Options.GPMaxRows rows.
	GPSkipped  bool        `json:"gp_skipped,omitempty"`
	Candidates []Candidate `json:"candidates"`
	// BestPoly indexes the polynomial chosen by the parsimony rule; Chosen
	// indexes the final model: BestPoly, or the GP candidate when its CVMSE
	// is below that of every polynomial.
	BestPoly int `json:"best_poly"`
	Chosen   int `json:"chosen"`
}

// ChosenCandidate returns the candidate that was fitted on all rows.
func (s *Selection) ChosenCandidate() Candidate { return s.Candidates[s.Chosen] }

func checkData(X, Y [][]float64) (n, d, m int, err error) {
	n = len(X)
	if n == 0 {
		return 0, 0, 0, errors.New("static: no rows")
	}
	if len(Y) != n {
		return 0, 0, 0, fmt.Errorf("static: %d input rows but %d output rows", n, len(Y))
	}
	d, m = len(X[0]), len(Y[0])
	if d == 0 || m == 0 {
		return 0, 0, 0, errors.New("static: need at least one input and one output column")
	}
	for i := 0; i < n; i++ {
		if len(X[i]) != d || len(Y[i]) != m {
			return 0, 0, 0, fmt.Errorf("static: row %d has %d inputs / %d outputs, want %d / %d", i, len(X[i]), len(Y[i]), d, m)
		}
		for _, v := range X[i] {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return 0, 0, 0, fmt.Errorf("static: row %d: non-finite input", i)
			}
		}
		for _, v := range Y[i] {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return 0, 0, 0, fmt.Errorf("static: row %d: non-finite output", i)
			}
		}
	}
	return n, d, m, nil
}

// innerFolds assigns n rows to k folds: a seeded permutation, then
// position mod k. It returns the test index sets.
func innerFolds(n, k int, seed uint64) [][]int {
	r := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
	perm := r.Perm(n)
	folds := make([][]int, k)
	for pos, i := range perm {
		folds[pos%k] = append(folds[pos%k], i)
	}
	for _, f := range folds {
		sort.Ints(f)
	}
	return folds
}

func complement(n int, test []int) []int {
	in := make([]bool, n)
	for _, i := range test {
		in[i] = true
	}
	tr := make([]int, 0, n-len(test))
	for i := 0; i < n; i++ {
		if !in[i] {
			tr = append(tr, i)
		}
	}
	return tr
}

func pick(rows [][]float64, idx []int) [][]float64 {
	out := make([][]float64, len(idx))
	for k, i := range idx {
		out[k] = rows[i]
	}
	return out
}

// Fit selects and fits a static response model on (X, Y): row i of X holds
// one part's inputs, row i of Y its outputs. Every polynomial candidate
// (degree × λ) and, with opt.GP, the GP is scored by k-fold CV on these
// rows only; the winner is refitted on all of them.
func Fit(X, Y [][]float64, opt Options) (*Model, *Selection, error) {
	n, d, m, err := checkData(X, Y)
	if err != nil {
		return nil, nil, err
	}
	opt = opt.withDefaults()
	if err := opt.validate(); err != nil {
		return nil, nil, err
	}
	if n < 2 {
		return nil, nil, fmt.Errorf("static: %d rows, need at least 2 for cross-validation", n)
	}
	tryGP := opt.GP && (opt.GPMaxRows < 0 || n <= opt.GPMaxRows)
	k := min(opt.Folds, n)
	folds := innerFolds(n, k, opt.Seed)
	outAll := newScaler(Y)
	degrees := append([]int(nil), opt.Degrees...)
	sort.Ints(degrees)
	degrees = uniqInts(degrees)
	lambdas := opt.Lambdas

	nPoly := len(degrees) * len(lambdas)
	nCand := nPoly
	if tryGP {
		nCand++
	}
	// sse[c][f][o] is candidate c's squared error on fold f, output o.
	sse := make([][][]float64, nCand)
	failed := make([]bool, nCand)
	for c := range sse {
		sse[c] = make([][]float64, k)
		for f := range sse[c] {
			sse[c][f] = make([]float64, m)
		}
	}
	termsByDeg := make(map[int][][]int, len(degrees))
	for _, deg := range degrees {
		t, err := Terms(d, deg, opt.Interactions)
		if err != nil {
			return nil, nil, err
		}
		termsByDeg[deg] = t
	}
	for f, test := range folds {
		train := complement(n, test)
		Xtr, Ytr := pick(X, train), pick(Y, train)
		Xte, Yte := pick(X, test), pick(Y, test)
		for di, deg := range degrees {
			pp, err := newPolyPath(Xtr, Ytr, termsByDeg[deg])
			for li, lam := range lambdas {
				c := di*len(lambdas) + li
				if err != nil {
					failed[c] = true
					continue
				}
				pred := polyPredict(Xte, pp.in, pp.out, pp.terms, pp.coef(lam))
				addSSE(sse[c][f], pred, Yte)
			}
		}
		if tryGP {
			c := nPoly
			g, err := fitGP(Xtr, Ytr)
			if err != nil {
				failed[c] = true
				continue
			}
			addSSE(sse[c][f], g.Predict(Xte), Yte)
		}
	}
	sel := &Selection{Folds: k, Candidates: make([]Candidate, nCand), GPSkipped: opt.GP && !tryGP}
	for c := range sel.Candidates {
		cand := Candidate{Kind: KindPoly}
		if c < nPoly {
			cand.Degree = degrees[c/len(lambdas)]
			cand.Lambda = lambdas[c%len(lambdas)]
		} else {
			cand.Kind = KindGP
		}
		if failed[c] {
			cand.CVMSE, cand.CVSE, cand.CVR2 = math.Inf(1), math.Inf(1), math.Inf(-1)
		} else {
			cand.CVMSE, cand.CVSE = cvScore(sse[c], folds, outAll.std)
			cand.CVR2 = 1 - cand.CVMSE
		}
		sel.Candidates[c] = cand
	}
	sel.BestPoly = choosePoly(sel.Candidates[:nPoly], opt.Parsimony)
	sel.Chosen = sel.BestPoly
	if tryGP {
		minPoly := math.Inf(1)
		for _, c := range sel.Candidates[:nPoly] {
			minPoly = math.Min(minPoly, c.CVMSE)
		}
		if sel.Candidates[nPoly].CVMSE < minPoly {
			sel.Chosen = nPoly
		}
	}
	if math.IsInf(sel.Candidates[sel.Chosen].CVMSE, 1) {
		return nil, sel, errors.New("static: no candidate could be fitted")
	}
	ch := sel.Candidates[sel.Chosen]
	var model *Model
	if ch.Kind == KindGP {
		model, err = fitGP(X, Y)
	} else {
		model, err = fitPoly(X, Y, termsByDeg[ch.Degree], ch.Lambda)
		if model != nil {
			model.Degree, model.Interactions = ch.Degree, opt.Interactions
		}
	}
	if err != nil {
		return nil, sel, err
	}
	return model, sel, nil
}

func uniqInts(s []int) []int {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// cvScore turns per-fold squared errors into the standardised CV MSE
// (pooled over folds, averaged over outputs) and its standard error (std of
// the per-fold standardised MSEs / √k).
func cvScore(sse [][]float64, folds [][]int, std []float64) (mse, se float64) {
	k := len(folds)
	m := len(std)
	n := 0
	per := make([]float64, k)
	total := 0.0
	for f, test := range folds {
		n += len(test)
		for o := 0; o < m; o++ {
			v := sse[f][o] / (std[o] * std[o])
			total += v / float64(m)
			per[f] += v / float64(len(test)) / float64(m)
		}
	}
	mse = total / float64(n)
	if math.IsNaN(mse) {
		return math.Inf(1), math.Inf(1)
	}
	mu := 0.0
	for _, v := range per {
		mu += v / float64(k)
	}
	ss := 0.0
	for _, v := range per {
		ss += (v - mu) * (v - mu)
	}
	if k > 1 {
		se = math.Sqrt(ss/float64(k-1)) / math.Sqrt(float64(k))
	}
	return mse, se
}

// choosePoly applies the one-standard-error rule to the polynomial
// candidates (ordered by degree, then λ): find the best CVMSE, take the
// lowest degree that comes within nSE standard errors of it, and within that
// degree the best λ.
func choosePoly(c []Candidate, nSE float64) int {
	best := 0
	for i := range c {
		if c[i].CVMSE < c[best].CVMSE {
			best = i
		}
	}
	if nSE < 0 {
		return best
	}
	limit := c[best].CVMSE + nSE*c[best].CVSE + 1e-12
	for i := range c {
		if c[i].CVMSE <= limit {
			deg := c[i].Degree
			pick := i
			for j := i; j < len(c) && c[j].Degree == deg; j++ {
				if c[j].CVMSE < c[pick].CVMSE {
					pick = j
				}
			}
			return pick
		}
	}
	return best
}

func addSSE(sse []float64, pred, y [][]float64) {
	for i := range y {
		for o := range sse {
			e := pred[i][o] - y[i][o]
			sse[o] += e * e
		}
	}
}

func fitPoly(X, Y [][]float64, terms [][]int, lambda float64) (*Model, error) {
	pp, err := newPolyPath(X, Y, terms)
	if err != nil {
		return nil, err
	}
	return &Model{
		Kind: KindPoly, Lambda: lambda, Terms: terms, Coef: pp.coef(lambda),
		InMean: pp.in.mean, InStd: pp.in.std, OutMean: pp.out.mean, OutStd: pp.out.std,
	}, nil
}

func fitGP(X, Y [][]float64) (*Model, error) {
	in, out := newScaler(X), newScaler(Y)
	n, m := len(X), len(Y[0])
	z := make([][]float64, n)
	for i := range X {
		z[i] = in.apply(X[i], nil)
	}
	mod := &Model{Kind: KindGP, InMean: in.mean, InStd: in.std, OutMean: out.mean, OutStd: out.std, GPX: z,
		GPParams: make([]GPParams, m), GPAlpha: make([][]float64, m)}
	y := make([]float64, n)
	for o := 0; o < m; o++ {
		for i := range Y {
			y[i] = (Y[i][o] - out.mean[o]) / out.std[o]
		}
		p, a, err := fitGP1(z, y)
		if err != nil {
			return nil, err
		}
		mod.GPParams[o], mod.GPAlpha[o] = p, a
	}
	return mod, nil
}

// Predict returns the model's outputs for every row of X (original units).
// It panics if a row's length differs from the number of inputs.
func (m *Model) Predict(X [][]float64) [][]float64 {
	d := len(m.InMean)
	for i, x := range X {
		if len(x) != d {
			panic(fmt.Sprintf("static: Predict row %d has %d inputs, model has %d", i, len(x), d))
		}
	}
	in := scaler{mean: m.InMean, std: m.InStd}
	out := scaler{mean: m.OutMean, std: m.OutStd}
	if m.Kind != KindGP {
		return polyPredict(X, in, out, m.Terms, m.Coef)
	}
	res := make([][]float64, len(X))
	z := make([]float64, d)
	for i, x := range X {
		in.apply(x, z)
		row := make([]float64, len(m.OutMean))
		for o := range row {
			row[o] = out.mean[o] + out.std[o]*gpPredict1(m.GPX, m.GPParams[o], m.GPAlpha[o], z)
		}
		res[i] = row
	}
	return res
}

package static

import (
	"errors"
	"math"

	"gonum.org/v1/gonum/mat"
	"gonum.org/v1/gonum/optimize"
)

// GP hyperparameter bounds, in standardised units (inputs and output have
// unit variance on the training set). Outside the bounds the negative log
// marginal likelihood gets a steep quadratic penalty, which keeps the
// optimiser away from degenerate kernels (σn → 0 on noise-free data, ℓ → ∞
// on irrelevant inputs) without a constrained solver.
const (
	gpMinLength = 0.05
	gpMaxLength = 100
	gpMinSignal = 0.01
	gpMaxSignal = 30
	gpMinNoise  = 1e-4
	gpMaxNoise  = 3
	gpJitter    = 1e-10
	gpPenalty   = 100
)

// GPParams are the hyperparameters of one output's GP: an ARD
// squared-exponential kernel σf²·exp(−½Σ_k (z_k−z'_k)²/ℓ_k²) plus noise
// σn²·δ, all in standardised units.
type GPParams struct {
	LengthScale []float64 `json:"length_scale"` // per input, standardised units
	SignalVar   float64   `json:"signal_var"`
	NoiseVar    float64   `json:"noise_var"`
}

// gpObjective evaluates the penalised negative log marginal likelihood of
// y (standardised) under an ARD-RBF + noise kernel on inputs z, and its
// gradient with respect to θ = (log ℓ_1..log ℓ_d, log σf, log σn).
type gpObjective struct {
	z    [][]float64
	y    []float64
	sq   [][]float64 // sq[k] = packed upper triangle of (z_ik − z_jk)²
	n, d int

	k    *mat.SymDense
	kinv *mat.SymDense
	chol mat.Cholesky

	lastX    []float64
	lastF    float64
	lastG    []float64
	lastGood bool
}

func newGPObjective(z [][]float64, y []float64) *gpObjective {
	n, d := len(z), len(z[0])
	o := &gpObjective{z: z, y: y, n: n, d: d,
		k: mat.NewSymDense(n, nil), kinv: mat.NewSymDense(n, nil)}
	o.sq = make([][]float64, d)
	for k := 0; k < d; k++ {
		s := make([]float64, n*n)
		for i := 0; i < n; i++ {
			for j := i; j < n; j++ {
				e := z[i][k] - z[j][k]
				s[i*n+j] = e * e
			}
		}
		o.sq[k] = s
	}
	return o
}

func penalty(v, lo, hi float64) (p, dp float64) {
	switch {
	case v < lo:
		return gpPenalty * (lo - v) * (lo - v), -2 * gpPenalty * (lo - v)
	case v > hi:
		return gpPenalty * (v - hi) * (v - hi), 2 * gpPenalty * (v - hi)
	}
	return 0, 0
}

func (o *gpObjective) params(theta []float64) GPParams {
	p := GPParams{LengthScale: make([]float64, o.d)}
	for k := 0; k < o.d; k++ {
		p.LengthScale[k] = math.Exp(theta[k])
	}
	p.SignalVar = math.Exp(2 * theta[o.d])
	p.NoiseVar = math.Exp(2*theta[o.d+1]) + gpJitter
	return p
}

// buildK fills o.k with the kernel matrix including the noise term and
// returns the noise-free part's scale factors (1/ℓ²).
func (o *gpObjective) buildK(p GPParams) []float64 {
	n := o.n
	il2 := make([]float64, o.d)
	for k, l := range p.LengthScale {
		il2[k] = 1 / (l * l)
	}
	raw := o.k.RawSymmetric().Data
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			r := 0.0
			for k := 0; k < o.d; k++ {
				r += o.sq[k][i*n+j] * il2[k]
			}
			v := p.SignalVar * math.Exp(-0.5*r)
			if i == j {
				v += p.NoiseVar
			}
			raw[i*n+j] = v
		}
	}
	return il2
}

func (o *gpObjective) eval(theta []float64) {
	if o.lastX != nil && floatsEqual(o.lastX, theta) {
		return
	}
	o.lastX = append(o.lastX[:0], theta...)
	if o.lastG == nil {
		o.lastG = make([]float64, len(theta))
	}
	g := o.lastG
	for i := range g {
		g[i] = 0
	}
	n, d := o.n, o.d
	p := o.params(theta)
	il2 := o.buildK(p)
	if !o.chol.Factorize(o.k) {
		o.lastF = math.Inf(1)
		o.lastGood = false
		return
	}
	o.lastGood = true
	alpha := mat.NewVecDense(n, nil)
	if err := o.chol.SolveVecTo(alpha, mat.NewVecDense(n, o.y)); err != nil {
		o.lastF = math.Inf(1)
		o.lastGood = false
		return
	}
	f := 0.5*mat.Dot(alpha, mat.NewVecDense(n, o.y)) + 0.5*o.chol.LogDet() + 0.5*float64(n)*math.Log(2*math.Pi)
	if err := o.chol.InverseTo(o.kinv); err != nil {
		o.lastF = math.Inf(1)
		o.lastGood = false
		return
	}
	kr := o.k.RawSymmetric().Data
	ki := o.kinv.RawSymmetric().Data
	a := alpha.RawVector().Data
	// W = ααᵀ − K⁻¹; ∂f/∂θ = −½ tr(W ∂K/∂θ).
	trW := 0.0
	gsf := 0.0
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			w := a[i]*a[j] - ki[i*n+j]
			kf := kr[i*n+j]
			if i == j {
				kf -= p.NoiseVar
				trW += w
			}
			mult := 2.0
			if i == j {
				mult = 1
			}
			wk := mult * w * kf
			gsf += wk
			for k := 0; k < d; k++ {
				g[k] += wk * o.sq[k][i*n+j] * il2[k]
			}
		}
	}
	for k := 0; k < d; k++ {
		g[k] *= -0.5
	}
	g[d] = -0.5 * 2 * gsf
	g[d+1] = -0.5 * 2 * (p.NoiseVar - gpJitter) * trW
	// Bounds.
	for k := 0; k < d; k++ {
		pv, dp := penalty(theta[k], math.Log(gpMinLength), math.Log(gpMaxLength))
		f += pv
		g[k] += dp
	}
	pv, dp := penalty(theta[d], math.Log(gpMinSignal), math.Log(gpMaxSignal))
	f += pv
	g[d] += dp
	pv, dp = penalty(theta[d+1], math.Log(gpMinNoise), math.Log(gpMaxNoise))
	f += pv
	g[d+1] += dp
	o.lastF = f
}

func floatsEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// gpStarts are the deterministic starting points of the marginal-likelihood
// search: (ℓ for every input, σf, σn) in standardised units.
var gpStarts = [][3]float64{
	{1, 1, 0.1},
	{3, 1, 0.01},
	{10, 3, 0.001},
}

// fitGP1 fits one output's hyperparameters by maximising the marginal
// likelihood (L-BFGS from each start in gpStarts, best optimum kept) and
// returns them with α = (K + σn²I)⁻¹y.
func fitGP1(z [][]float64, y []float64) (GPParams, []float64, error) {
	o := newGPObjective(z, y)
	d := o.d
	prob := optimize.Problem{
		Func: func(x []float64) float64 {
			o.eval(x)
			return o.lastF
		},
		Grad: func(grad, x []float64) {
			o.eval(x)
			copy(grad, o.lastG)
		},
	}
	bestF := math.Inf(1)
	var bestX []float64
	for _, st := range gpStarts {
		x0 := make([]float64, d+2)
		for k := 0; k < d; k++ {
			x0[k] = math.Log(st[0])
		}
		x0[d] = math.Log(st[1])
		x0[d+1] = math.Log(st[2])
		settings := &optimize.Settings{
			MajorIterations:   200,
			GradientThreshold: 1e-5,
			Converger:         &optimize.FunctionConverge{Absolute: 1e-7, Iterations: 20},
		}
		res, _ := optimize.Minimize(prob, x0, settings, &optimize.LBFGS{})
		cand := x0
		if res != nil && len(res.X) == len(x0) {
			cand = res.X
		}
		o.lastX = nil
		o.eval(cand)
		if o.lastGood && o.lastF < bestF {
			bestF = o.lastF
			bestX = append([]float64(nil), cand...)
		}
	}
	if bestX == nil {
		return GPParams{}, nil, errors.New("static: GP kernel matrix not positive definite at any start")
	}
	p := o.params(bestX)
	o.buildK(p)
	if !o.chol.Factorize(o.k) {
		return GPParams{}, nil, errors.New("static: GP kernel matrix not positive definite")
	}
	alpha := mat.NewVecDense(o.n, nil)
	if err := o.chol.SolveVecTo(alpha, mat.NewVecDense(o.n, y)); err != nil {
		return GPParams{}, nil, err
	}
	return p, alpha.RawVector().Data, nil
}

// gpPredict1 returns the standardised-unit posterior mean of one output at
// standardised inputs zq.
func gpPredict1(ztrain [][]float64, p GPParams, alpha []float64, zq []float64) float64 {
	v := 0.0
	for i, zi := range ztrain {
		r := 0.0
		for k, l := range p.LengthScale {
			e := (zq[k] - zi[k]) / l
			r += e * e
		}
		v += alpha[i] * p.SignalVar * math.Exp(-0.5*r)
	}
	return v
}

package analysis

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/aml-project/aml/internal/ident/linear"
)

// arx22 simulates y(k) = 1.5 y(k−1) − 0.7 y(k−2) + u(k−1) + 0.5 u(k−2) + e(k)
// with white u and white noise e.
func arx22(n int, seed uint64) (y, u [][]float64) {
	r := rand.New(rand.NewPCG(seed, 3))
	y, u = make([][]float64, n), make([][]float64, n)
	for k := 0; k < n; k++ {
		u[k] = []float64{r.NormFloat64()}
		v := 0.2 * r.NormFloat64()
		if k >= 2 {
			v += 1.5*y[k-1][0] - 0.7*y[k-2][0] + u[k-1][0] + 0.5*u[k-2][0]
		}
		y[k] = []float64{v}
	}
	return y, u
}

// TestResidualWhiteness: the one-step residuals of a correctly ordered
// ARX(2,2) fit are white and uncorrelated with the input; those of an
// under-ordered ARX(1,1) fit are not white.
func TestResidualWhiteness(t *testing.T) {
	y, u := arx22(3000, 1)
	for _, c := range []struct {
		o     linear.ARXOrders
		white bool
	}{{linear.ARXOrders{NA: 2, NB: 2, NK: 1}, true}, {linear.ARXOrders{NA: 1, NB: 1, NK: 1}, false}} {
		m, err := linear.FitARX(y, u, c.o, 0)
		if err != nil {
			t.Fatal(err)
		}
		p := m.PredictOneStep(y, u)
		e := make([][]float64, len(y))
		for k := range e {
			e[k] = []float64{y[k][0] - p[k][0]} // NaN before the largest lag
		}
		rep, err := ResidualAnalysis(e, u, 25, 0)
		if err != nil {
			t.Fatal(err)
		}
		or := rep.Outputs[0]
		t.Logf("%v: N %d, bound ±%.4f, autocorrelation outside %.0f%% (lag 1: %.3f), cross outside %.0f%%: %s",
			c.o, or.N, or.Bound, 100*or.Auto.Outside, or.Auto.Values[1], 100*or.Cross[0].Outside, or.Verdict)
		if got := or.Verdict == White; got != c.white {
			t.Errorf("%v: verdict %s", c.o, or.Verdict)
		}
		if c.white && !or.Independent[0] {
			t.Errorf("%v: residuals correlated with the input (%.0f%% of lags outside)", c.o, 100*or.Cross[0].Outside)
		}
		if or.N != len(y)-c.o.MaxLag() || or.Auto.Values[0] != 1 || len(or.Cross[0].Lags) != 51 || or.Cross[0].Lags[0] != -25 {
			t.Errorf("%v: N %d, lag 0 %v, cross lags %v", c.o, or.N, or.Auto.Values[0], or.Cross[0].Lags)
		}
	}
}

// fopdtStep is the exact sampled response of a continuous FOPDT (gain k,
// time constant tau, dead time theta, seconds) to piecewise-constant
// inputs that change at the sample instants, from rest at u[0]: the
// superposition of the steps of u.
func fopdtStep(u []float64, dt, k, tau, theta float64) []float64 {
	y := make([]float64, len(u))
	for j := 1; j < len(u); j++ {
		du := u[j] - u[j-1]
		if du == 0 {
			continue
		}
		for i := j; i < len(u); i++ {
			if t := float64(i-j)*dt - theta; t > 0 {
				y[i] += k * du * (1 - math.Exp(-t/tau))
			}
		}
	}
	return y
}

// TestStepResponsesFOPDT: the step figures of a known 2×2 FOPDT system
// (the own-line tank's first row and a second CV) equal the truth: gains
// to 1e-4, dead time and settling time within a sampling step, the time
// constant within 3 % (it is 0.98·τ from the 2 % crossing).
func TestStepResponsesFOPDT(t *testing.T) {
	const dt = 5.0
	type fo struct{ k, tau, theta float64 }
	truth := [2][2]fo{{{0.9, 90, 15}, {-0.6, 90, 5}}, {{0.3, 40, 0}, {0, 1, 0}}}
	sim := func(u [][]float64) [][]float64 {
		y := make([][]float64, len(u))
		for k := range y {
			y[k] = []float64{50, 20}
		}
		for mv := 0; mv < 2; mv++ {
			col := make([]float64, len(u))
			for k := range u {
				col[k] = u[k][mv]
			}
			for cv := 0; cv < 2; cv++ {
				p := truth[cv][mv]
				for k, v := range fopdtStep(col, dt, p.k, p.tau, p.theta) {
					y[k][cv] += v
				}
			}
		}
		return y
	}
	rep, err := StepResponses(sim, StepOptions{U0: []float64{50, 15}, Steps: []float64{2, -1}, Pre: 3, N: 200, Dt: dt})
	if err != nil {
		t.Fatal(err)
	}
	for cv := range truth {
		for mv, p := range truth[cv] {
			s := rep.Pairs[cv][mv]
			t.Logf("CV %d ← MV %d: gain %.4f, dead time %.1f s, τ %.1f s, settling %.1f s", cv, mv, s.Gain, s.DeadTime, s.TimeConstant, s.SettlingTime)
			if math.Abs(rep.Gains[cv][mv]-p.k) > 1e-4*math.Abs(p.k)+1e-12 {
				t.Errorf("CV %d MV %d: gain %v, want %v", cv, mv, rep.Gains[cv][mv], p.k)
			}
			if p.k == 0 {
				if !math.IsNaN(s.DeadTime) {
					t.Errorf("CV %d MV %d: no response but dead time %v", cv, mv, s.DeadTime)
				}
				continue
			}
			// the 2 % point lies 0.0202·τ after θ, at the next sample
			settle := p.theta + p.tau*math.Log(50)
			if s.DeadTime < p.theta || s.DeadTime > p.theta+0.0202*p.tau+dt {
				t.Errorf("CV %d MV %d: dead time %v, want %v", cv, mv, s.DeadTime, p.theta)
			}
			if math.Abs(s.TimeConstant-p.tau) > 0.03*p.tau {
				t.Errorf("CV %d MV %d: time constant %v, want %v", cv, mv, s.TimeConstant, p.tau)
			}
			if math.Abs(s.SettlingTime-settle) > dt {
				t.Errorf("CV %d MV %d: settling time %v, want %v", cv, mv, s.SettlingTime, settle)
			}
		}
	}
}

package lm

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// segmentFit is a calibration-sized problem: B segments of T samples of
//
//	y(t) = l0·e^(−s0·t) + l1·e^(−s1·t)·cos(s2·t) + l2·t·e^(−s3·t) + s4
//
// with five shared parameters s and three per segment l (as the injection
// grey-box of aml demo: five physics parameters, three unmeasured initial
// states per segment), noisy data.
type segmentFit struct {
	ts, ys [][]float64
}

var segTruth = []float64{0.8, 0.3, 1.1, 0.5, 0.2}

func newSegmentFit(B, T int) *segmentFit {
	r := rand.New(rand.NewPCG(11, 12))
	f := &segmentFit{}
	for b := 0; b < B; b++ {
		l := []float64{1 + r.Float64(), 2 * r.NormFloat64(), r.NormFloat64()}
		ts, ys := make([]float64, T), make([]float64, T)
		for i := range ts {
			ts[i] = 10 * float64(i) / float64(T)
			ys[i] = segModel(segTruth, l, ts[i]) + 0.01*r.NormFloat64()
		}
		f.ts, f.ys = append(f.ts, ts), append(f.ys, ys)
	}
	return f
}

func segModel(s, l []float64, t float64) float64 {
	return l[0]*math.Exp(-s[0]*t) + l[1]*math.Exp(-s[1]*t)*math.Cos(s[2]*t) + l[2]*t*math.Exp(-s[3]*t) + s[4]
}

func (f *segmentFit) problem() Problem {
	p := Problem{Shared: 5}
	for _, ts := range f.ts {
		p.Local = append(p.Local, 3)
		p.Rows = append(p.Rows, len(ts))
	}
	p.Residuals = func(r [][]float64, s []float64, l [][]float64) bool {
		for b, ts := range f.ts {
			for i, t := range ts {
				r[b][i] = segModel(s, l[b], t) - f.ys[b][i]
			}
		}
		return true
	}
	p.Jacobian = func(js, jl *mat.Dense, b int, s, l, _ []float64) {
		for i, t := range f.ts[b] {
			e0, e1, e3 := math.Exp(-s[0]*t), math.Exp(-s[1]*t), math.Exp(-s[3]*t)
			c, sn := math.Cos(s[2]*t), math.Sin(s[2]*t)
			js.Set(i, 0, -t*l[0]*e0)
			js.Set(i, 1, -t*l[1]*e1*c)
			js.Set(i, 2, -t*l[1]*e1*sn)
			js.Set(i, 3, -t*t*l[2]*e3)
			js.Set(i, 4, 1)
			jl.Set(i, 0, e0)
			jl.Set(i, 1, e1*c)
			jl.Set(i, 2, t*e3)
		}
	}
	return p
}

func (f *segmentFit) start() ([]float64, [][]float64) {
	s := []float64{1, 0.4, 1, 0.6, 0}
	l := make([][]float64, len(f.ts))
	for b := range l {
		l[b] = []float64{1, 0, 0}
	}
	return s, l
}

// BenchmarkSolve is a whole solve of 28 segments × 400 samples (5 shared
// and 3 local parameters each, 89 in all) from a fixed start, with the
// calibration's rules and with the state-space refinement's.
func BenchmarkSolve(b *testing.B) {
	f := newSegmentFit(28, 400)
	p := f.problem()
	s0, l0 := f.start()
	for _, c := range []struct {
		name string
		s    Settings
	}{{"default", DefaultSettings()}, {"pem-like", pemLike()}} {
		b.Run(c.name, func(b *testing.B) {
			var res *Result
			for i := 0; i < b.N; i++ {
				var err error
				if res, err = Solve(context.Background(), p, s0, l0, &c.s); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(res.Iterations), "iterations")
		})
	}
}

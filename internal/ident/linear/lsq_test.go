package linear

import (
	"math"
	"math/rand/v2"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// denseARX solves the ARX regression of fitARX the way it was solved
// before the solver took rows: Φ and Y built as matrices (segments
// stacked, ridge rows √λ·e_i last), then lstsq.
func denseARX(t *testing.T, ys, us [][][]float64, o ARXOrders, opts ARXOptions) *mat.Dense {
	t.Helper()
	ny, nu := len(ys[0][0]), len(us[0][0])
	icpt := !opts.NoIntercept
	ymean, ystd := channelStats(concatRows(ys), opts.Scaling)
	umean, ustd := channelStats(concatRows(us), opts.Scaling)
	p := numRegressors(o, ny, nu, icpt)
	lag := o.MaxLag()
	nr := 0
	for _, y := range ys {
		nr += max(0, len(y)-lag)
	}
	nPen := 0
	if opts.Lambda > 0 {
		nPen = p
		if icpt {
			nPen--
		}
	}
	outs, nrhs := []int{0}, ny
	if o.Diag {
		outs, nrhs = make([]int, ny), 1
		for i := range outs {
			outs[i] = i
		}
	}
	theta := mat.NewDense(p, ny, nil)
	for _, out := range outs {
		phi := mat.NewDense(nr+nPen, p, nil)
		yt := mat.NewDense(nr+nPen, nrhs, nil)
		r := 0
		for s := range ys {
			y, u := normalize(ys[s], ymean, ystd), normalize(us[s], umean, ustd)
			for k := lag; k < len(ys[s]); k++ {
				fillRegressor(phi.RawRowView(r), o, ny, nu, icpt, y, u, k, out)
				if o.Diag {
					yt.Set(r, 0, y[k*ny+out])
				} else {
					copy(yt.RawRowView(r), y[k*ny:(k+1)*ny])
				}
				r++
			}
		}
		for i := 0; i < nPen; i++ {
			phi.Set(nr+i, i, math.Sqrt(opts.Lambda))
		}
		x, err := lstsq(phi, yt)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < p; i++ {
			for j := 0; j < nrhs; j++ {
				theta.Set(i, out+j, x.At(i, j))
			}
		}
	}
	return theta
}

// TestFitARXRowsIsDense: the ARX fit, which hands the solver its rows a
// panel at a time, gives the bits of the matrix form — several segments
// (one too short for a regression row), MIMO full and diagonal, ridge.
func TestFitARXRowsIsDense(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	lens := []int{3000, 4, 9000, 700}
	var ys, us [][][]float64
	for _, T := range lens {
		ys = append(ys, randn(r, T, 2))
		us = append(us, randn(r, T, 3))
	}
	for _, tc := range []struct {
		o    ARXOrders
		opts ARXOptions
	}{
		{ARXOrders{NA: 3, NB: 4, NK: 1}, ARXOptions{}},
		{ARXOrders{NA: 3, NB: 4, NK: 0, Diag: true}, ARXOptions{}},
		{ARXOrders{NA: 2, NB: 3, NK: 1}, ARXOptions{Lambda: 5, NoIntercept: true}},
		{ARXOrders{NA: 2, NB: 3, NK: 1, Diag: true}, ARXOptions{Lambda: 0.5}},
	} {
		m, err := FitARXSegments(ys, us, tc.o, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if want := denseARX(t, ys, us, tc.o, tc.opts); !mat.Equal(m.Theta, want) {
			t.Errorf("%+v %+v: θ differs from the matrix form", tc.o, tc.opts)
		}
	}
}

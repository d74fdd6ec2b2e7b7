package linear

import (
	"math/rand/v2"
	"testing"

	"github.com/aml-project/aml/internal/ident/lsq"
	"gonum.org/v1/gonum/mat"
)

// Benchmark problem: single-output ARX with 3 inputs, na = nb = 10, nk = 1,
// i.e. 10 + 3·10 = 40 regressors (+ intercept), on 200 000 regression rows.
const (
	benchRows = 200_000
	benchNU   = 3
)

var benchOrders = ARXOrders{NA: 10, NB: 10, NK: 1}

func benchData() (y, u [][]float64) {
	r := rand.New(rand.NewPCG(1, 2))
	T := benchRows + benchOrders.MaxLag()
	u = randn(r, T, benchNU)
	y = make([][]float64, T)
	for k := range y {
		v := 0.3 * r.NormFloat64()
		if k >= 1 {
			v += 0.7*y[k-1][0] + u[k-1][0] - 0.5*u[k-1][1]
		}
		if k >= 2 {
			v += -0.1*y[k-2][0] + 0.2*u[k-2][2]
		}
		y[k] = []float64{v}
	}
	return y, u
}

// benchMatrix builds the exact regression problem that FitARX solves.
func benchMatrix(y, u [][]float64) (phi, yt *mat.Dense) {
	mean, scale := channelStats(y, Standardize)
	umean, uscale := channelStats(u, Standardize)
	ys := normalize(y, mean, scale)
	us := normalize(u, umean, uscale)
	p := numRegressors(benchOrders, 1, benchNU, true)
	lag := benchOrders.MaxLag()
	nr := len(y) - lag
	phi = mat.NewDense(nr, p, nil)
	yt = mat.NewDense(nr, 1, nil)
	raw := phi.RawMatrix()
	for r := 0; r < nr; r++ {
		fillRegressor(raw.Data[r*raw.Stride:r*raw.Stride+p], benchOrders, 1, benchNU, true, ys, us, r+lag, 0)
		yt.Set(r, 0, ys[r+lag])
	}
	return phi, yt
}

func BenchmarkARXFit(b *testing.B) {
	y, u := benchData()
	b.ResetTimer()
	for b.Loop() {
		m, err := FitARX(y, u, benchOrders, 0)
		if err != nil {
			b.Fatal(err)
		}
		if m.NumRegressors() != 41 || m.TrainRows != benchRows {
			b.Fatalf("unexpected problem size %d × %d", m.TrainRows, m.NumRegressors())
		}
	}
}

func BenchmarkGonumQRSolve(b *testing.B) {
	phi, yt := benchMatrix(benchData())
	b.ResetTimer()
	for b.Loop() {
		var qr mat.QR
		qr.Factorize(phi)
		var x mat.Dense
		if err := qr.SolveTo(&x, false, yt); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSimulate measures free-run simulation throughput (reported as
// steps/s) of an 8-state, 5-input, 2-output state-space model (the size of
// the winding models) and of the tanks-size ARX model.
func BenchmarkSimulate(b *testing.B) {
	const T = 100_000
	r := rand.New(rand.NewPCG(3, 4))
	u := randn(r, T, 5)
	b.Run("StateSpace_n8_nu5_ny2", func(b *testing.B) {
		n, ny, nu := 8, 2, 5
		a := make([]float64, n*n)
		for i := 0; i < n; i++ {
			a[i*n+i] = 0.9 - 0.05*float64(i)
			if i+1 < n {
				a[i*n+i+1] = 0.1
			}
		}
		bb, c, d := make([]float64, n*nu), make([]float64, ny*n), make([]float64, ny*nu)
		for i := range bb {
			bb[i] = r.NormFloat64()
		}
		for i := range c {
			c[i] = r.NormFloat64()
		}
		m := newStateSpace(n, ny, nu, a, bb, c, d)
		m.YMean, m.YStd = []float64{0, 0}, []float64{1, 1}
		m.UMean, m.UStd = make([]float64, nu), []float64{1, 1, 1, 1, 1}
		x0 := make([]float64, n)
		for b.Loop() {
			_ = m.Simulate(u, x0)
		}
		b.ReportMetric(float64(T)*float64(b.N)/b.Elapsed().Seconds(), "steps/s")
	})
	b.Run("ARX_na8_nb9_siso", func(b *testing.B) {
		uu := columns(u, 0)
		y := make([][]float64, T)
		for k := range y {
			v := uu[k][0]
			if k > 0 {
				v += 0.9 * y[k-1][0]
			}
			y[k] = []float64{v + 0.01*r.NormFloat64()}
		}
		m, err := FitARX(y, uu, tanksARX, 0)
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for b.Loop() {
			_ = m.Simulate(uu, y[:8])
		}
		b.ReportMetric(float64(T)*float64(b.N)/b.Elapsed().Seconds(), "steps/s")
	})
}

// BenchmarkLstsq solves the 200 000 × 41 regression problem of
// BenchmarkARXFit with the shared solver (internal/ident/lsq, TSQR on all
// cores) and with a plain gonum mat.QR Factorize + SolveTo, in the same
// run. bench/lstsq_numpy.sh runs numpy.linalg.lstsq on the same shape.
func BenchmarkLstsq(b *testing.B) {
	phi, yt := benchMatrix(benchData())
	b.Run("lsq", func(b *testing.B) {
		for b.Loop() {
			if _, err := lsq.Solve(phi, yt); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gonumQR", func(b *testing.B) {
		for b.Loop() {
			var qr mat.QR
			qr.Factorize(phi)
			var x mat.Dense
			if err := qr.SolveTo(&x, false, yt); err != nil {
				b.Fatal(err)
			}
		}
	})
}

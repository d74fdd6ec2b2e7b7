package lsq

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"gonum.org/v1/gonum/mat"
)

// gonumQR is the reference: the solver the trainers used before this
// package (gonum mat.QR, SVD fallback above CondLimit).
func gonumQR(t *testing.T, a, b *mat.Dense) *mat.Dense {
	t.Helper()
	var qr mat.QR
	qr.Factorize(a)
	if qr.Cond() <= CondLimit {
		var x mat.Dense
		if err := qr.SolveTo(&x, false, b); err == nil {
			return &x
		}
	}
	x, err := SolveSVD(a, b)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func randDense(r *rand.Rand, rows, cols int) *mat.Dense {
	m := mat.NewDense(rows, cols, nil)
	d := m.RawMatrix().Data
	for i := range d {
		d[i] = r.NormFloat64()
	}
	return m
}

// relErr is ‖x − ref‖_F / ‖ref‖_F.
func relErr(x, ref *mat.Dense) float64 {
	var d mat.Dense
	d.Sub(x, ref)
	return mat.Norm(&d, 2) / mat.Norm(ref, 2)
}

// problem returns A (rows×cols) = G·S·Vᵀ, G Gaussian (well conditioned for
// tall shapes), V orthogonal, S with singular values spread log-uniformly
// over [1/cond, 1], so cond(A) ≈ cond; B = A·θ + noise (k columns).
func problem(seed uint64, rows, cols, k int, cond, noise float64) (a, b *mat.Dense) {
	r := rand.New(rand.NewPCG(seed, 7))
	u := randDense(r, rows, cols)
	h := randDense(r, cols, cols)
	var qv mat.QR
	qv.Factorize(h)
	var v mat.Dense
	qv.QTo(&v)
	s := mat.NewDiagDense(cols, nil)
	for i := 0; i < cols; i++ {
		e := 0.0
		if cols > 1 {
			e = float64(i) / float64(cols-1)
		}
		s.SetDiag(i, math.Pow(cond, -e))
	}
	a = new(mat.Dense)
	a.Product(u, s, v.T())
	a.Scale(float64(rows), a) // arbitrary overall scale
	theta := randDense(r, cols, k)
	b = new(mat.Dense)
	b.Mul(a, theta)
	e := randDense(r, rows, k)
	e.Scale(noise*mat.Norm(b, 2)/math.Sqrt(float64(rows*k)), e)
	b.Add(b, e)
	return a, b
}

// TestSolveMatchesGonumQR: well- and ill-conditioned problems, row counts
// around the panel and chunk boundaries, one and several right-hand sides.
// The tolerance is the forward-error bound of a backward-stable solver,
// a small multiple of cond·ε (plus cond²·ε·residual), relative.
func TestSolveMatchesGonumQR(t *testing.T) {
	cases := []struct {
		rows, cols, k int
		cond, noise   float64
	}{
		{1, 1, 1, 1, 0},
		{5, 5, 1, 10, 0},
		{63, 7, 1, 1e2, 1e-3},
		{64, 7, 2, 1e2, 1e-3},
		{65, 7, 3, 1e2, 1e-3},
		{chunkRows - 1, 12, 1, 1e4, 1e-2},
		{chunkRows, 12, 1, 1e4, 1e-2},
		{chunkRows + 1, 12, 1, 1e4, 1e-2},
		{3*chunkRows + 17, 41, 1, 1e3, 1e-2},
		{3*chunkRows + 17, 41, 4, 1e8, 1e-6},
		{2*chunkRows + 5, 20, 2, 1e10, 0},
		{2*chunkRows + 5, 20, 1, 1e11, 1e-9},
		{500, 40, 1, 1e6, 1e-1},
	}
	for i, tc := range cases {
		a, b := problem(uint64(i+1), tc.rows, tc.cols, tc.k, tc.cond, tc.noise)
		x, err := Solve(a, b)
		if err != nil {
			t.Fatal(err)
		}
		ref := gonumQR(t, a, b)
		eps := 2.220446049250313e-16
		tol := 10 * eps * (tc.cond + tc.cond*tc.cond*tc.noise)
		tol = max(tol, 1e-13)
		e := relErr(x, ref)
		t.Logf("%d×%d k %d cond %.0e: relative difference %.2g (tolerance %.2g)", tc.rows, tc.cols, tc.k, tc.cond, e, tol)
		if !(e <= tol) {
			t.Errorf("case %d: relative difference to gonum QR %.3g > %.3g", i, e, tol)
		}
	}
}

// TestSolveRankDeficient: a duplicated column and an all-zero column give
// the truncated-SVD minimum-norm solution, as the QR + SVD fallback did.
func TestSolveRankDeficient(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	rows, cols := 2*chunkRows+100, 6
	a := randDense(r, rows, cols)
	for i := 0; i < rows; i++ {
		a.Set(i, 3, a.At(i, 1)) // duplicate column
		a.Set(i, 5, 0)          // zero column
	}
	b := randDense(r, rows, 2)
	x, err := Solve(a, b)
	if err != nil {
		t.Fatal(err)
	}
	ref := gonumQR(t, a, b)
	if e := relErr(x, ref); e > 1e-10 {
		t.Fatalf("rank-deficient: relative difference to the reference %.3g", e)
	}
	for j := 0; j < 2; j++ {
		if x.At(5, j) != 0 {
			t.Errorf("zero column got coefficient %g", x.At(5, j))
		}
		if d := math.Abs(x.At(1, j) - x.At(3, j)); d > 1e-10*math.Abs(x.At(1, j)) {
			t.Errorf("duplicated columns not split evenly (minimum norm): %g vs %g", x.At(1, j), x.At(3, j))
		}
	}
	// fewer rows than columns: minimum-norm solution too
	a2, b2 := randDense(r, 3, 5), randDense(r, 3, 1)
	x2, err := Solve(a2, b2)
	if err != nil {
		t.Fatal(err)
	}
	if e := relErr(x2, gonumQRWide(t, a2, b2)); e > 1e-12 {
		t.Fatalf("wide problem: relative difference %.3g", e)
	}
	// all zero
	x3, err := Solve(mat.NewDense(10, 2, nil), mat.NewDense(10, 1, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}))
	if err != nil {
		t.Fatal(err)
	}
	if x3.At(0, 0) != 0 || x3.At(1, 0) != 0 {
		t.Fatalf("zero matrix: got %v", mat.Formatted(x3))
	}
}

func gonumQRWide(t *testing.T, a, b *mat.Dense) *mat.Dense {
	t.Helper()
	x, err := SolveSVD(a, b)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestFactorIndependentOfCores: the row partition does not depend on
// GOMAXPROCS, so one and all cores give the same bits.
func TestFactorIndependentOfCores(t *testing.T) {
	a, b := problem(9, 5*chunkRows+333, 17, 2, 1e5, 1e-3)
	prev := runtime.GOMAXPROCS(1)
	r1 := Factor(a, b)
	runtime.GOMAXPROCS(max(4, prev))
	r4 := Factor(a, b)
	runtime.GOMAXPROCS(prev)
	for i := range r1 {
		if r1[i] != r4[i] {
			t.Fatalf("R[%d] differs between 1 and %d cores: %v vs %v", i, max(4, prev), r1[i], r4[i])
		}
	}
}

// TestFactorIsQR: RᵀR = [A B]ᵀ[A B] and R is upper triangular; the last
// diagonal entry of a one-column B is the residual norm.
func TestFactorIsQR(t *testing.T) {
	a, b := problem(11, chunkRows+700, 9, 1, 1e3, 1e-2)
	R := Factor(a, b)
	w := 10
	for i := 0; i < w; i++ {
		for j := 0; j < i; j++ {
			if R[i*w+j] != 0 {
				t.Fatalf("R[%d,%d] = %g below the diagonal", i, j, R[i*w+j])
			}
		}
	}
	rm := mat.NewDense(w, w, R)
	var ab mat.Dense
	ab.Augment(a, b)
	var g1, g2 mat.Dense
	g1.Mul(rm.T(), rm)
	g2.Mul(ab.T(), &ab)
	var d mat.Dense
	d.Sub(&g1, &g2)
	if e := mat.Norm(&d, 2) / mat.Norm(&g2, 2); e > 1e-13 {
		t.Fatalf("‖RᵀR − [A B]ᵀ[A B]‖/‖·‖ = %.3g", e)
	}
	x, err := Solve(a, b)
	if err != nil {
		t.Fatal(err)
	}
	var res mat.Dense
	res.Mul(a, x)
	res.Sub(&res, b)
	if got, want := math.Abs(R[w*w-1]), mat.Norm(&res, 2); math.Abs(got-want) > 1e-10*want {
		t.Fatalf("|R[w,w]| %g, residual norm %g", got, want)
	}
}

// TestSolveBadInput: NaN data gives an error, not a silent number.
func TestSolveBadInput(t *testing.T) {
	a, b := problem(5, 100, 3, 1, 10, 0)
	a.Set(7, 1, math.NaN())
	if x, err := Solve(a, b); err == nil {
		t.Fatalf("NaN in A: no error, x = %v", mat.Formatted(x))
	}
	if _, err := Solve(a, mat.NewDense(99, 1, nil)); err == nil {
		t.Fatal("row mismatch: no error")
	}
}

// rowsOf is the Rows form of the matrices a, b.
func rowsOf(a, b *mat.Dense) Rows {
	r, c := a.Dims()
	_, k := b.Dims()
	return Rows{N: r, C: c, K: k, Fill: func(dst []float64, i0, n int) {
		w := c + k
		for i := 0; i < n; i++ {
			copy(dst[i*w:i*w+c], a.RawRowView(i0+i))
			copy(dst[i*w+c:(i+1)*w], b.RawRowView(i0+i))
		}
	}}
}

// TestSolveRowsIsSolve: the row form gives Solve's bits, on the QR path,
// on the SVD fallback (rank deficient) and for a wide problem.
func TestSolveRowsIsSolve(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	a1, b1 := problem(13, 3*chunkRows+45, 23, 3, 1e6, 1e-3)
	a2 := randDense(r, chunkRows+9, 5)
	for i := 0; i < chunkRows+9; i++ {
		a2.Set(i, 4, 2*a2.At(i, 0))
	}
	b2 := randDense(r, chunkRows+9, 1)
	a3, b3 := randDense(r, 4, 6), randDense(r, 4, 2)
	for i, p := range [][2]*mat.Dense{{a1, b1}, {a2, b2}, {a3, b3}} {
		want, err := Solve(p[0], p[1])
		if err != nil {
			t.Fatal(err)
		}
		got, err := SolveRows(rowsOf(p[0], p[1]))
		if err != nil {
			t.Fatal(err)
		}
		if !mat.Equal(got, want) {
			t.Errorf("problem %d: SolveRows differs from Solve by %.3g", i, relErr(got, want))
		}
	}
	if _, err := SolveRows(Rows{N: 10, C: 2, K: 1}); err == nil {
		t.Error("no Fill: no error")
	}
}

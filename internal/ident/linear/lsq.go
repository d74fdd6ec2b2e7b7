package linear

import (
	"errors"

	"gonum.org/v1/gonum/mat"
)

// qrCondLimit is the condition number of R above which the QR solution is
// replaced by a truncated-SVD (minimum-norm) solution.
const qrCondLimit = 1e12

// lstsq returns X minimising ||A X - B||_F. It uses a Householder QR
// factorisation (gonum mat.QR, LAPACK Dgeqrf) and falls back to a truncated
// SVD minimum-norm solution when A is numerically rank deficient.
func lstsq(a, b *mat.Dense) (*mat.Dense, error) {
	r, c := a.Dims()
	if r < c {
		return lstsqSVD(a, b)
	}
	var qr mat.QR
	qr.Factorize(a)
	if qr.Cond() <= qrCondLimit {
		var x mat.Dense
		if err := qr.SolveTo(&x, false, b); err == nil {
			return &x, nil
		}
	}
	return lstsqSVD(a, b)
}

// lstsqSVD is the rank-revealing fallback: singular values below
// 1e-12·σ_max are discarded.
func lstsqSVD(a, b *mat.Dense) (*mat.Dense, error) {
	var svd mat.SVD
	if !svd.Factorize(a, mat.SVDThin) {
		return nil, errors.New("linear: SVD failed in least squares")
	}
	rank := svd.Rank(1e-12)
	if rank == 0 {
		_, c := a.Dims()
		_, bc := b.Dims()
		return mat.NewDense(c, bc, nil), nil
	}
	var x mat.Dense
	svd.SolveTo(&x, b, rank)
	return &x, nil
}

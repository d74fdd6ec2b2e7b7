package linear

import (
	"github.com/aml-project/aml/internal/ident/lsq"
	"gonum.org/v1/gonum/mat"
)

// lstsq returns X minimising ||A X - B||_F with the shared solver
// (internal/ident/lsq: a tall-skinny Householder QR over row blocks on all
// cores, and the truncated-SVD minimum-norm solution when A is numerically
// rank deficient, cond(R) > 1e12, or has fewer rows than columns).
func lstsq(a, b *mat.Dense) (*mat.Dense, error) {
	return lsq.Solve(a, b)
}

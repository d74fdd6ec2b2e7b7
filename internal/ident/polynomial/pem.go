package polynomial

import (
	"context"
	"math"

	"gonum.org/v1/gonum/mat"

	"github.com/aml-project/aml/internal/ident/lm"
)

// pemProblem is a prediction-error problem of the polynomial models
// without local parameters: resid writes the prediction errors of segment
// blk for parameters th into r (rows[blk] values), valid says whether th
// is admissible (stable, minimum phase). The Jacobian is a forward
// difference of resid.
func pemProblem(rows []int, np int, valid func(th []float64) bool, resid func(blk int, th, r []float64)) lm.Problem {
	return lm.Problem{Shared: np, Local: make([]int, len(rows)), Rows: rows,
		Residuals: func(r [][]float64, shared []float64, _ [][]float64) bool {
			if !valid(shared) {
				return false
			}
			for s := range rows {
				resid(s, shared, r[s])
			}
			return true
		},
		Jacobian: func(js, _ *mat.Dense, blk int, shared, _, _ []float64) {
			th := append([]float64(nil), shared...)
			base := make([]float64, rows[blk])
			resid(blk, th, base)
			pert := make([]float64, rows[blk])
			for j := 0; j < np; j++ {
				h := 1e-6 * math.Max(1, math.Abs(th[j]))
				th[j] += h
				resid(blk, th, pert)
				for k := range pert {
					js.Set(k, j, (pert[k]-base[k])/h)
				}
				th[j] = shared[j]
			}
		}}
}

// solvePEM minimises p from th0 with the package's LM settings.
func solvePEM(ctx context.Context, p lm.Problem, th0 []float64) (*lm.Result, error) {
	set := lm.DefaultSettings()
	set.MaxIterations = 60
	return lm.Solve(ctx, p, th0, make([][]float64, len(p.Rows)), &set)
}

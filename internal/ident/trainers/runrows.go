package trainers

import (
	"fmt"

	"github.com/aml-project/aml/internal/dataset"
)

// runRows checks and picks what a run simulator (eval.RunSimulator) of a
// linear, output-error or process model needs from a run: u, the model's
// inputs (controls column uIn[i] of each of the run's nC-wide input rows),
// and y, its first nInit outputs (target column outTgt[o] of each nT-wide
// output row), all finite.
func runRows(inputs, outputs [][]float64, nInit, nC, nT int, uIn, outTgt []int) (u, y [][]float64, err error) {
	if nInit < 0 || nInit > len(inputs) || nInit > len(outputs) {
		return nil, nil, fmt.Errorf("SimulateRun: nInit %d with %d input and %d output rows", nInit, len(inputs), len(outputs))
	}
	u = make([][]float64, len(inputs))
	for k, row := range inputs {
		if len(row) != nC {
			return nil, nil, fmt.Errorf("SimulateRun: input row %d has %d values, the dataset has %d controls", k, len(row), nC)
		}
		u[k] = make([]float64, len(uIn))
		for i, j := range uIn {
			u[k][i] = row[j]
		}
		if !linFiniteRow(u[k]) {
			return nil, nil, fmt.Errorf("SimulateRun: input row %d is not finite", k)
		}
	}
	y = make([][]float64, nInit)
	for k := range y {
		if len(outputs[k]) != nT {
			return nil, nil, fmt.Errorf("SimulateRun: output row %d has %d values, the dataset has %d targets", k, len(outputs[k]), nT)
		}
		y[k] = make([]float64, len(outTgt))
		for o, j := range outTgt {
			y[k][o] = outputs[k][j]
		}
		if !linFiniteRow(y[k]) {
			return nil, nil, fmt.Errorf("SimulateRun: initial output row %d is not finite", k)
		}
	}
	return u, y, nil
}

// windowRows fills us ([H+F][inputs]) and ys ([H][outputs]) with window w
// of a PredictBatch batch (x [n,H,xCols], u [n,F,uCols]): the model inputs
// (x columns xIn over the history, u columns uIn over the horizon) and
// outputs (x columns xOut) a linear or process model starts from.
func windowRows(d dataset.Dims, x, u []float32, w int, xIn, xOut, uIn []int, us, ys [][]float64) {
	H, F, nAll, uc := d.H, d.F, d.XCols, d.UCols
	xw := x[w*H*nAll : (w+1)*H*nAll]
	uw := u[w*F*uc : (w+1)*F*uc]
	for k := 0; k < H; k++ {
		row := xw[k*nAll : (k+1)*nAll]
		for i, j := range xIn {
			us[k][i] = float64(row[j])
		}
		for o, j := range xOut {
			ys[k][o] = float64(row[j])
		}
	}
	for f := 0; f < F; f++ {
		row := uw[f*uc : (f+1)*uc]
		for i, j := range uIn {
			us[H+f][i] = float64(row[j])
		}
	}
}

package trainers

import "fmt"

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

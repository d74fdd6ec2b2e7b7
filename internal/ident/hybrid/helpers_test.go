package hybrid

import (
	"encoding/csv"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/aml-project/aml/internal/physics"
)

const (
	sharedDir   = "../../../../shared/datasets"
	physicsDir  = "../../../examples/physics"
	tanksDir    = sharedDir + "/cascaded_tanks"
	empsDataDir = sharedDir + "/emps"
)

func needShared(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(sharedDir); err != nil {
		t.Skip("shared datasets folder absent")
	}
}

// readCSV returns the named columns of a CSV file.
func readCSV(t testing.TB, path string, cols ...string) [][]float64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	idx := make([]int, len(cols))
	for i, c := range cols {
		idx[i] = -1
		for j, h := range rows[0] {
			if h == c {
				idx[i] = j
			}
		}
		if idx[i] < 0 {
			t.Fatalf("%s: no column %s", path, c)
		}
	}
	out := make([][]float64, len(cols))
	for _, r := range rows[1:] {
		for i, j := range idx {
			v, err := strconv.ParseFloat(r[j], 64)
			if err != nil {
				t.Fatal(err)
			}
			out[i] = append(out[i], v)
		}
	}
	return out
}

// segmentOf makes a one-run segment from columns of inputs and outputs.
func segmentOf(run string, ins, outs [][]float64) *Segment {
	T := len(ins[0])
	g := &Segment{Run: run, U: make([][]float64, T), Y: make([][]float64, T)}
	for k := 0; k < T; k++ {
		g.U[k] = make([]float64, len(ins))
		for i := range ins {
			g.U[k][i] = ins[i][k]
		}
		g.Y[k] = make([]float64, len(outs))
		for i := range outs {
			g.Y[k][i] = outs[i][k]
		}
	}
	return g
}

func parseModel(t testing.TB, path string) *physics.Model {
	t.Helper()
	m, err := physics.ParseFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func tanksSegments(t testing.TB) (train, test *Segment) {
	needShared(t)
	e := readCSV(t, filepath.Join(tanksDir, "cascaded_tanks_estimation.csv"), "u_V", "y_V")
	v := readCSV(t, filepath.Join(tanksDir, "cascaded_tanks_validation.csv"), "u_V", "y_V")
	return segmentOf("est", e[:1], e[1:]), segmentOf("val", v[:1], v[1:])
}

func empsSegments(t testing.TB) (train, test *Segment) {
	needShared(t)
	e := readCSV(t, filepath.Join(empsDataDir, "emps_train_DATA_EMPS.csv"), "vir_V", "qm_m")
	v := readCSV(t, filepath.Join(empsDataDir, "emps_test_DATA_EMPS_PULSES.csv"), "vir_V", "qm_m")
	return segmentOf("train", e[:1], e[1:]), segmentOf("test", v[:1], v[1:])
}

// freeRunRMSE predicts g with m from its first nInit rows and returns the
// RMSE per output over rows nInit… of the hybrid and of the physics alone.
func freeRunRMSE(t testing.TB, m *Model, g *Segment, nInit int) (hyb, phys []float64) {
	t.Helper()
	sim, err := m.NewSim()
	if err != nil {
		t.Fatal(err)
	}
	p, err := m.Simulate(sim, g.U, g.D, g.Y[:nInit], nInit)
	if err != nil {
		t.Fatal(err)
	}
	ny := len(g.Y[0])
	hyb, phys = make([]float64, ny), make([]float64, ny)
	for o := 0; o < ny; o++ {
		var a, b, n float64
		for k := nInit; k < g.Len(); k++ {
			y := g.Y[k][o]
			if math.IsNaN(y) {
				continue
			}
			a += (p.Y[k][o] - y) * (p.Y[k][o] - y)
			b += (p.Phys[k][o] - y) * (p.Phys[k][o] - y)
			n++
		}
		hyb[o], phys[o] = math.Sqrt(a/n), math.Sqrt(b/n)
	}
	return hyb, phys
}

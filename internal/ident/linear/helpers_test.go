package linear

import (
	"encoding/csv"
	"errors"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

const sharedDir = "../../../../shared/datasets"

// readCSV loads a numeric CSV with a header; it skips the test when the
// shared datasets folder is absent.
func readCSV(t testing.TB, rel string) (header []string, rows [][]float64) {
	t.Helper()
	if _, err := os.Stat(sharedDir); errors.Is(err, fs.ErrNotExist) {
		t.Skip("shared datasets folder absent")
	}
	f, err := os.Open(filepath.Join(sharedDir, rel))
	if err != nil {
		t.Fatalf("open %s: %v", rel, err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatalf("read %s: %v", rel, err)
	}
	header = recs[0]
	for i, r := range recs[1:] {
		row := make([]float64, len(r))
		for j, s := range r {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil {
				t.Fatalf("%s row %d col %d: %v", rel, i, j, err)
			}
			row[j] = v
		}
		rows = append(rows, row)
	}
	return header, rows
}

// columns picks columns idx of rows into a [T][len(idx)] array.
func columns(rows [][]float64, idx ...int) [][]float64 {
	out := make([][]float64, len(rows))
	for k, r := range rows {
		o := make([]float64, len(idx))
		for i, j := range idx {
			o[i] = r[j]
		}
		out[k] = o
	}
	return out
}

type tanksData struct{ uEst, yEst, uVal, yVal [][]float64 }

func loadTanks(t testing.TB) tanksData {
	_, est := readCSV(t, "cascaded_tanks/cascaded_tanks_estimation.csv")
	_, val := readCSV(t, "cascaded_tanks/cascaded_tanks_validation.csv")
	return tanksData{columns(est, 2), columns(est, 3), columns(val, 2), columns(val, 3)}
}

type windingData struct{ uEst, yEst, uVal, yVal [][]float64 }

func loadWinding(t testing.TB) windingData {
	_, rows := readCSV(t, "daisy_winding/winding.csv")
	u := columns(rows, 0, 1, 2, 3, 4)
	y := columns(rows, 5, 6)
	nEst := 2 * len(rows) / 3
	return windingData{u[:nEst], y[:nEst], u[nEst:], y[nEst:]}
}

func randn(r *rand.Rand, T, w int) [][]float64 {
	out := make([][]float64, T)
	for k := range out {
		out[k] = make([]float64, w)
		for i := range out[k] {
			out[k][i] = r.NormFloat64()
		}
	}
	return out
}

func maxAbsDiff(a, b [][]float64, start int) float64 {
	m := 0.0
	for k := start; k < len(a); k++ {
		for i := range a[k] {
			m = math.Max(m, math.Abs(a[k][i]-b[k][i]))
		}
	}
	return m
}

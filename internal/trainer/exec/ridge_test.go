//go:build unix

package extrun

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The end-to-end test of examples/trainers/ridge_arx.py: a hand-made
// dataset with a known linear structure, the trainer run through Run, and
// the written aml.linear-window/1 model evaluated here with the documented
// formula.

func writeF32(t *testing.T, path string, v []float64) {
	t.Helper()
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(f)))
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// roundF32 is what the dataset file stores.
func roundF32(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, f := range v {
		out[i] = float64(float32(f))
	}
	return out
}

// colStats returns per-column population mean and std of rows of width w.
func colStats(v []float64, w int) (mean, std []float64) {
	mean, std = make([]float64, w), make([]float64, w)
	n := len(v) / w
	for i, x := range v {
		mean[i%w] += x / float64(n)
	}
	for i, x := range v {
		d := x - mean[i%w]
		std[i%w] += d * d / float64(n)
	}
	for j := range std {
		std[j] = math.Sqrt(std[j])
	}
	return mean, std
}

type toyDataset struct {
	dir                        string
	static                     bool
	N, H, F, nAll, nCtrl, nTgt int
	x, u, y                    []float64
	train, val, test           [2]int // offset, count
}

func (d *toyDataset) write(t *testing.T) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(d.dir, "arrays"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeF32(t, filepath.Join(d.dir, "arrays", "x.f32"), d.x)
	writeF32(t, filepath.Join(d.dir, "arrays", "y.f32"), d.y)
	trX := d.x[:d.train[1]*d.H*d.nAll]
	trY := d.y[:d.train[1]*d.F*d.nTgt]
	xm, xs := colStats(trX, d.nAll)
	ym, ys := colStats(trY, d.nTgt)
	split := func(p [2]int) map[string]any {
		return map[string]any{"runIds": []string{}, "offset": p[0], "count": p[1]}
	}
	m := map[string]any{
		"formatVersion": 1, "targets": []string{"y0"}, "allNodes": []string{"a", "b", "y0"},
		"split": map[string]any{"mode": "by_run", "train": split(d.train), "val": split(d.val), "test": split(d.test)},
	}
	if d.static {
		m["kind"] = "static"
		m["inputs"] = []string{"a", "b"}
		m["controls"] = []string{}
		m["shapes"] = map[string][]int{"x": {d.N, d.nAll}, "y": {d.N, d.nTgt}}
		m["norm"] = map[string]any{"x": map[string]any{"mean": xm, "std": xs}, "u": map[string]any{"mean": []float64{}, "std": []float64{}},
			"y": map[string]any{"mean": ym, "std": ys}}
	} else {
		writeF32(t, filepath.Join(d.dir, "arrays", "u.f32"), d.u)
		um, us := colStats(d.u[:d.train[1]*d.F*d.nCtrl], d.nCtrl)
		m["kind"] = "dynamic"
		m["controls"] = []string{"a"}
		m["historySteps"], m["horizonSteps"] = d.H, d.F
		m["shapes"] = map[string][]int{"x": {d.N, d.H, d.nAll}, "u": {d.N, d.F, d.nCtrl}, "y": {d.N, d.F, d.nTgt}}
		m["norm"] = map[string]any{"x": map[string]any{"mean": xm, "std": xs}, "u": map[string]any{"mean": um, "std": us},
			"y": map[string]any{"mean": ym, "std": ys}}
	}
	b, _ := json.MarshalIndent(m, "", " ")
	if err := os.WriteFile(filepath.Join(d.dir, "manifest.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// linearModel is model.json as documented in docs/external-trainer.md.
type linearModel struct {
	Format     string `json:"format"`
	History    int    `json:"history"`
	Horizon    int    `json:"horizon"`
	XCols      int    `json:"xCols"`
	UCols      int    `json:"uCols"`
	YCols      int    `json:"yCols"`
	Normalized bool   `json:"normalized"`
	Norm       struct {
		X, U, Y struct{ Mean, Std []float64 }
	} `json:"norm"`
	Weights [][]float64 `json:"weights"`
}

// predict evaluates the model on window w of the dataset.
func (m *linearModel) predict(d *toyDataset, w int) []float64 {
	var feats []float64
	xw := d.x[w*d.H*d.nAll : (w+1)*d.H*d.nAll]
	for i, v := range xw {
		c := i % m.XCols
		feats = append(feats, (v-m.Norm.X.Mean[c])/m.Norm.X.Std[c])
	}
	if m.UCols > 0 {
		uw := d.u[w*d.F*d.nCtrl : (w+1)*d.F*d.nCtrl]
		for i, v := range uw {
			c := i % m.UCols
			feats = append(feats, (v-m.Norm.U.Mean[c])/m.Norm.U.Std[c])
		}
	}
	feats = append(feats, 1)
	out := make([]float64, m.Horizon*m.YCols)
	for r := range out {
		s := 0.0
		for j, wv := range m.Weights[r] {
			s += wv * feats[j]
		}
		k := r % m.YCols
		out[r] = s*m.Norm.Y.Std[k] + m.Norm.Y.Mean[k]
	}
	return out
}

func runRidge(t *testing.T, py string, ds *toyDataset, params map[string]any) (Result, []Event, *linearModel) {
	t.Helper()
	script, err := filepath.Abs(filepath.Join("..", "..", "..", "examples", "trainers", "ridge_arx.py"))
	if err != nil {
		t.Fatal(err)
	}
	dir := jobDir(t)
	art := filepath.Join(dir, "artifacts")
	if err := os.Mkdir(art, 0o755); err != nil {
		t.Fatal(err)
	}
	job, _ := json.Marshal(map[string]any{"jobId": "job-test", "datasetPath": ds.dir, "params": params, "seed": 7, "artifactsDir": art})
	if err := os.WriteFile(filepath.Join(dir, "job.json"), job, 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var evs []Event
	res, err := Run(context.Background(), Spec{JobDir: dir, Command: []string{script}, Readable: []string{ds.dir}, PathOverride: filepath.Dir(py) + ":" + DefaultPath,
		WallTimeout: 2 * time.Minute, StallTimeout: 30 * time.Second}, func(e Event) {
		mu.Lock()
		evs = append(evs, e)
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(art, "model.json"))
	if err != nil {
		t.Logf("log:\n%s", readLog(t, res))
		return res, evs, nil
	}
	var m linearModel
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("model.json: %v", err)
	}
	return res, evs, &m
}

func TestRidgeARXRecoversLinearStructure(t *testing.T) {
	py := python(t)
	const N, H, F, nAll, nCtrl, nTgt = 400, 5, 3, 3, 1, 1
	ds := &toyDataset{dir: jobDir(t), N: N, H: H, F: F, nAll: nAll, nCtrl: nCtrl, nTgt: nTgt,
		train: [2]int{0, 300}, val: [2]int{300, 50}, test: [2]int{350, 50}}
	rng := rand.New(rand.NewPCG(1, 2))
	a, b, c := []float64{0.9, 0.8, 0.7}, []float64{1.5, -2, 0.5}, []float64{3, 4, 5}
	for w := 0; w < N; w++ {
		for h := 0; h < H; h++ {
			ds.x = append(ds.x, 10+2*rng.NormFloat64(), -5+0.5*rng.NormFloat64(), 100+20*rng.NormFloat64())
		}
		for f := 0; f < F; f++ {
			ds.u = append(ds.u, 10+2*rng.NormFloat64())
		}
	}
	ds.x, ds.u = roundF32(ds.x), roundF32(ds.u)
	for w := 0; w < N; w++ {
		last := ds.x[(w*H+H-1)*nAll+2]
		prev := ds.x[(w*H+H-2)*nAll+1]
		for f := 0; f < F; f++ {
			ds.y = append(ds.y, a[f]*last+b[f]*ds.u[w*F+f]+c[f]+0.3*prev)
		}
	}
	ds.y = roundF32(ds.y)
	ds.write(t)

	res, evs, m := runRidge(t, py, ds, map[string]any{"lambda": 1e-6, "lags": 2, "emitMalformed": true})
	if res.Reason != ReasonExited || res.ExitCode != 0 || !res.Done || m == nil {
		t.Fatalf("trainer: %+v\nlog:\n%s", res, readLog(t, res))
	}
	if res.Malformed != 1 {
		t.Fatalf("malformed %d, want the one emitMalformed line", res.Malformed)
	}
	seen := map[string]bool{}
	for _, e := range evs {
		seen[e.Type] = true
		if e.Type == EventMetrics && !strings.Contains(string(e.Raw), `"source":"trainer-reported"`) {
			t.Fatalf("metrics not labelled trainer-reported: %s", e.Raw)
		}
	}
	if !seen[EventProgress] || !seen[EventStage] || !seen[EventMetrics] || !seen[EventDone] {
		t.Fatalf("events seen: %v", seen)
	}
	if !strings.HasSuffix(strings.Join(res.Files, ","), "artifacts/model.json") {
		t.Fatalf("files %v", res.Files)
	}

	if m.Format != "aml.linear-window/1" || m.History != H || m.Horizon != F || m.XCols != nAll || m.UCols != nCtrl || m.YCols != nTgt || !m.Normalized {
		t.Fatalf("header %+v", m)
	}
	nFeat := H*nAll + F*nCtrl + 1
	if len(m.Weights) != F*nTgt {
		t.Fatalf("%d weight rows", len(m.Weights))
	}
	for r, row := range m.Weights {
		if len(row) != nFeat {
			t.Fatalf("row %d has %d weights, want %d", r, len(row), nFeat)
		}
		for j := 0; j < (H-2)*nAll; j++ {
			if row[j] != 0 {
				t.Fatalf("weight [%d][%d] of an unused history step is %v", r, j, row[j])
			}
		}
	}
	maxErr := 0.0
	for w := ds.test[0]; w < ds.test[0]+ds.test[1]; w++ {
		got := m.predict(ds, w)
		for i, g := range got {
			want := ds.y[w*F*nTgt+i]
			e := math.Abs(g-want) / (1 + math.Abs(want))
			maxErr = math.Max(maxErr, e)
		}
	}
	if maxErr > 1e-3 {
		t.Fatalf("test-window predictions off by up to %.3g (relative)", maxErr)
	}
	t.Logf("max relative error on test windows: %.3g", maxErr)
}

func TestRidgeARXStaticDataset(t *testing.T) {
	py := python(t)
	const N = 200
	ds := &toyDataset{dir: jobDir(t), static: true, N: N, H: 1, F: 1, nAll: 2, nTgt: 1,
		train: [2]int{0, 150}, val: [2]int{150, 25}, test: [2]int{175, 25}}
	rng := rand.New(rand.NewPCG(3, 4))
	for w := 0; w < N; w++ {
		ds.x = append(ds.x, 50+10*rng.NormFloat64(), 0.1*rng.NormFloat64())
	}
	ds.x = roundF32(ds.x)
	for w := 0; w < N; w++ {
		ds.y = append(ds.y, 2*ds.x[2*w]-30*ds.x[2*w+1]+1)
	}
	ds.y = roundF32(ds.y)
	ds.write(t)
	res, _, m := runRidge(t, py, ds, map[string]any{"lambda": 1e-9})
	if res.ExitCode != 0 || !res.Done || m == nil {
		t.Fatalf("trainer: %+v\nlog:\n%s", res, readLog(t, res))
	}
	if m.History != 1 || m.Horizon != 1 || m.XCols != 2 || m.UCols != 0 || len(m.Weights) != 1 || len(m.Weights[0]) != 3 {
		t.Fatalf("static model %+v", m)
	}
	for w := ds.test[0]; w < N; w++ {
		if got, want := m.predict(ds, w)[0], ds.y[w]; math.Abs(got-want) > 1e-3*(1+math.Abs(want)) {
			t.Fatalf("window %d: %v, want %v", w, got, want)
		}
	}
}

func TestRidgeARXBadJob(t *testing.T) {
	py := python(t)
	ds := &toyDataset{dir: filepath.Join(jobDir(t), "missing")}
	res, evs, m := runRidge(t, py, ds, map[string]any{"lambda": -1})
	if res.Reason != ReasonExited || res.ExitCode != 2 || res.Done || m != nil || res.LastError == "" {
		t.Fatalf("%+v", res)
	}
	if len(evs) == 0 || evs[len(evs)-1].Type != EventError || !strings.Contains(res.LastError, "params.lambda") {
		t.Fatalf("last error %q", res.LastError)
	}
}

// TestRidgeARXOnBuiltDataset runs the trainer on a dataset built by
// `aml dataset build` (directory in AML_TEST_DATASET_DIR; skipped without
// it) and compares its test-split RMSE with holding the last target value.
func TestRidgeARXOnBuiltDataset(t *testing.T) {
	dir := os.Getenv("AML_TEST_DATASET_DIR")
	if dir == "" {
		t.Skip("AML_TEST_DATASET_DIR is not set")
	}
	py := python(t)
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var man struct {
		Kind    string           `json:"kind"`
		Shapes  map[string][]int `json:"shapes"`
		Targets []string         `json:"targets"`
		Split   struct{ Test struct{ Offset, Count int } }
	}
	if err := json.Unmarshal(b, &man); err != nil || man.Kind != "dynamic" {
		t.Fatalf("manifest: %v (kind %q)", err, man.Kind)
	}
	read := func(name string) []float64 {
		b, err := os.ReadFile(filepath.Join(dir, "arrays", name))
		if err != nil {
			t.Fatal(err)
		}
		v := make([]float64, len(b)/4)
		for i := range v {
			v[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		}
		return v
	}
	sx, su, sy := man.Shapes["x"], man.Shapes["u"], man.Shapes["y"]
	ds := &toyDataset{dir: dir, N: sx[0], H: sx[1], F: sy[1], nAll: sx[2], nCtrl: su[2], nTgt: sy[2], x: read("x.f32"), u: read("u.f32"), y: read("y.f32")}
	t0 := time.Now()
	res, _, m := runRidge(t, py, ds, map[string]any{})
	if res.ExitCode != 0 || !res.Done || m == nil {
		t.Fatalf("trainer: %+v\nlog:\n%s", res, readLog(t, res))
	}
	t.Logf("trained in %s: %d lines, %d events, %d malformed; log %v", time.Since(t0).Round(time.Millisecond), res.Lines, res.Events, res.Malformed, res.LogFiles)
	se, seHold := make([]float64, ds.nTgt), make([]float64, ds.nTgt)
	for w := man.Split.Test.Offset; w < man.Split.Test.Offset+man.Split.Test.Count; w++ {
		p := m.predict(ds, w)
		for i, g := range p {
			k := i % ds.nTgt
			want := ds.y[w*ds.F*ds.nTgt+i]
			hold := ds.x[(w*ds.H+ds.H-1)*ds.nAll+ds.nAll-ds.nTgt+k]
			se[k] += (g - want) * (g - want)
			seHold[k] += (hold - want) * (hold - want)
		}
	}
	n := float64(man.Split.Test.Count * ds.F)
	for k, name := range man.Targets {
		t.Logf("test RMSE %-12s ridge %.5g   hold-last %.5g", name, math.Sqrt(se[k]/n), math.Sqrt(seHold[k]/n))
	}
}

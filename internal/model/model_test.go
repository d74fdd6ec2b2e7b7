package model

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
)

// dyn is a dynamic manifest with the given dimensions and 10 windows.
func dyn(H, F int, all, ctrl, tgt []string) *dataset.Manifest {
	return &dataset.Manifest{Kind: dataset.KindDynamic, HistorySteps: H, HorizonSteps: F,
		AllNodes: all, Controls: ctrl, Targets: tgt,
		Split: dataset.ManifestSplit{Train: dataset.SplitPart{Count: 10}}}
}

func writeModel(t *testing.T, v any) string {
	t.Helper()
	dir := t.TempDir()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileName), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func approx(t *testing.T, what string, got []float32, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values %v, want %d %v", what, len(got), got, len(want), want)
	}
	for i := range want {
		if math.Abs(float64(got[i])-want[i]) > 1e-6*max(1, math.Abs(want[i])) {
			t.Fatalf("%s[%d] = %v, want %v (all %v)", what, i, got[i], want[i], got)
		}
	}
}

// A 2×2 weight matrix: one x column, no controls (u is the zero column,
// ignored with uCols 0), two targets, H = F = 1, normalised.
func TestLinearNormalizedHandComputed(t *testing.T) {
	m := dyn(1, 1, []string{"a"}, nil, []string{"y0", "y1"})
	dir := writeModel(t, map[string]any{
		"format": FormatLinearWindow, "history": 1, "horizon": 1, "xCols": 1, "uCols": 0, "yCols": 2, "normalized": true,
		"norm": map[string]any{
			"x": map[string]any{"mean": []float64{2}, "std": []float64{4}},
			"u": map[string]any{"mean": []float64{}, "std": []float64{}},
			"y": map[string]any{"mean": []float64{10, -1}, "std": []float64{2, 0.5}},
		},
		"weights":  [][]float64{{0.5, 1}, {-2, 0.25}},
		"trainer":  "ridge_arx.py", // unknown fields are metadata
		"alpha":    1e-3,
		"features": []string{"x[0,a]", "1"},
	})
	p, err := Load(dir, m, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Format() != FormatLinearWindow || p.Horizon() != 1 {
		t.Fatalf("%s %d", p.Format(), p.Horizon())
	}
	// x=6 → x'=1: yn = (1.5, −1.75) → y = (1.5·2+10, −1.75·0.5−1) = (13, −1.875)
	// x=−2 → x'=−1: yn = (0.5, 2.25) → y = (11, 0.125)
	got, err := p.PredictBatch(context.Background(), []float32{6, -2}, []float32{0, 0}, 2)
	if err != nil {
		t.Fatal(err)
	}
	approx(t, "y", got, []float64{13, -1.875, 11, 0.125})
	// The same model using the zero u column (uCols 1) with mean 0, std 1.
	dir = writeModel(t, map[string]any{
		"format": FormatLinearWindow, "history": 1, "horizon": 1, "xCols": 1, "uCols": 1, "yCols": 2, "normalized": true,
		"norm": map[string]any{
			"x": map[string]any{"mean": []float64{2}, "std": []float64{4}},
			"u": map[string]any{"mean": []float64{0}, "std": []float64{1}},
			"y": map[string]any{"mean": []float64{10, -1}, "std": []float64{2, 0.5}},
		},
		"weights": [][]float64{{0.5, 7, 1}, {-2, 7, 0.25}},
	})
	p, err = Load(dir, m, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, _ = p.PredictBatch(context.Background(), []float32{6, -2}, []float32{0, 0}, 2)
	approx(t, "y (uCols 1)", got, []float64{13, -1.875, 11, 0.125})
}

// Feature order: x flattened [H][xCols], then u [F][uCols], then 1; row
// f·nTgt+k predicts step f, target k. Raw (not normalised).
func TestLinearRawLayout(t *testing.T) {
	m := dyn(2, 2, []string{"c", "z"}, []string{"c"}, []string{"z"})
	// feats: x00 x01 x10 x11 u0 u1 1
	dir := writeModel(t, map[string]any{
		"format": FormatLinearWindow, "history": 2, "horizon": 2, "xCols": 2, "uCols": 1, "yCols": 1, "normalized": false,
		"weights": [][]float64{{1, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 1, 0, 1, 0.5}},
	})
	p, err := Load(dir, m, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	x := []float32{1, 2, 3, 4 /* window 1 */, 5, 6, 7, 8}
	u := []float32{10, 20 /* window 1 */, 30, 40}
	got, err := p.PredictBatch(context.Background(), x, u, 2)
	if err != nil {
		t.Fatal(err)
	}
	approx(t, "y", got, []float64{1, 4 + 20 + 0.5, 5, 8 + 40 + 0.5})
	if _, err := p.PredictBatch(context.Background(), x[:7], u, 2); err == nil {
		t.Fatal("short x accepted")
	}
}

func TestLinearStatic(t *testing.T) {
	m := &dataset.Manifest{Kind: dataset.KindStatic, AllNodes: []string{"a", "b", "q"}, Inputs: []string{"a", "b"}, Targets: []string{"q"}}
	for _, h := range []int{0, 1} {
		dir := writeModel(t, map[string]any{
			"format": FormatLinearWindow, "history": h, "horizon": 1, "xCols": 2, "uCols": 0, "yCols": 1, "normalized": false,
			"weights": [][]float64{{2, -1, 0.5}},
		})
		p, err := Load(dir, m, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := p.PredictBatch(context.Background(), []float32{1, 1, 3, 2}, nil, 2)
		if err != nil {
			t.Fatal(err)
		}
		approx(t, "static y", got, []float64{1.5, 4.5})
	}
}

// wantInvalid fails t unless err is a model-invalid error (422) with a
// problem for every field.
func wantInvalid(t *testing.T, err error, fields ...string) {
	t.Helper()
	_ = invalidErr(t, err, fields...)
}

// invalidErr is wantInvalid returning the error for further checks.
func invalidErr(t *testing.T, err error, fields ...string) *core.Error {
	t.Helper()
	var ae *core.Error
	if !errors.As(err, &ae) || ae.Code != CodeModelInvalid || ae.Kind() != core.KindUnprocessable {
		t.Fatalf("want %s/422, got %v", CodeModelInvalid, err)
	}
	for _, f := range fields {
		found := ae.Field == f
		for _, p := range ae.Problems {
			found = found || p.Field == f
		}
		if !found {
			t.Fatalf("no problem for %q in %v", f, err)
		}
	}
	return ae
}

func TestLinearShapeMismatch(t *testing.T) {
	m := dyn(3, 2, []string{"c", "d", "z"}, []string{"c"}, []string{"z"})
	good := func() map[string]any {
		row := make([]float64, 3*3+2*1+1)
		return map[string]any{
			"format": FormatLinearWindow, "history": 3, "horizon": 2, "xCols": 3, "uCols": 1, "yCols": 1, "normalized": false,
			"weights": [][]float64{row, row},
		}
	}
	if _, err := Load(writeModel(t, good()), m, LoadOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		edit   func(v map[string]any)
		fields []string
	}{
		{func(v map[string]any) { v["history"] = 4 }, []string{"history"}},
		{func(v map[string]any) { v["horizon"] = 1; v["xCols"] = 2 }, []string{"horizon", "xCols"}},
		{func(v map[string]any) { v["uCols"] = 2 }, []string{"uCols"}},
		{func(v map[string]any) { v["yCols"] = 2 }, []string{"yCols"}},
		{func(v map[string]any) { delete(v, "normalized") }, []string{"normalized"}},
		{func(v map[string]any) { delete(v, "history") }, []string{"history"}},
		{func(v map[string]any) { v["weights"] = [][]float64{make([]float64, 12)} }, []string{"weights"}},
		{func(v map[string]any) { v["weights"] = [][]float64{make([]float64, 12), make([]float64, 11)} }, []string{"weights[1]"}},
		{func(v map[string]any) { v["normalized"] = true }, []string{"norm"}},
		{func(v map[string]any) {
			v["normalized"] = true
			v["norm"] = map[string]any{
				"x": map[string]any{"mean": []float64{0, 0, 0}, "std": []float64{1, 0, 1}},
				"u": map[string]any{"mean": []float64{0, 0}, "std": []float64{1, 1}},
				"y": map[string]any{"mean": []float64{0}, "std": []float64{1}},
			}
		}, []string{"norm.x.std[1]", "norm.u"}},
	} {
		v := good()
		c.edit(v)
		_, err := Load(writeModel(t, v), m, LoadOptions{})
		wantInvalid(t, err, c.fields...)
	}
	// Static datasets: no u, one row.
	st := &dataset.Manifest{Kind: dataset.KindStatic, AllNodes: []string{"a", "q"}, Inputs: []string{"a"}, Targets: []string{"q"}}
	_, err := Load(writeModel(t, map[string]any{"format": FormatLinearWindow, "history": 2, "horizon": 1, "xCols": 1, "uCols": 1, "yCols": 1,
		"normalized": false, "weights": [][]float64{{1, 2, 3, 4}}}), st, LoadOptions{})
	wantInvalid(t, err, "history", "uCols")
	// No controls: uCols 0 or 1 only.
	nc := dyn(1, 1, []string{"a", "z"}, nil, []string{"z"})
	_, err = Load(writeModel(t, map[string]any{"format": FormatLinearWindow, "history": 1, "horizon": 1, "xCols": 2, "uCols": 2, "yCols": 1,
		"normalized": false, "weights": [][]float64{{1, 2, 3, 4, 5}}}), nc, LoadOptions{})
	wantInvalid(t, err, "uCols")
}

func TestLoadBadArtifacts(t *testing.T) {
	m := dyn(1, 1, []string{"a"}, nil, []string{"z"})
	_, err := Load(t.TempDir(), m, LoadOptions{})
	wantInvalid(t, err, FileName)
	_, err = Load(writeModel(t, map[string]any{"format": "aml.forest/9"}), m, LoadOptions{})
	if e := invalidErr(t, err); !strings.Contains(e.Message, "aml.forest/9") {
		t.Fatalf("message %q", e.Message)
	}
	_, err = Load(writeModel(t, map[string]any{"weights": 1}), m, LoadOptions{})
	wantInvalid(t, err)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(`{"format":"aml.mean/1","horizon":1,"yCols":1,"mean":[NaN]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(dir, m, LoadOptions{})
	wantInvalid(t, err)
	if err := os.WriteFile(filepath.Join(dir, FileName), []byte(`{"format":"aml.mean/1","horizon":1,"yCols":1,"mean":[1]} {}`), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(dir, m, LoadOptions{})
	wantInvalid(t, err)
}

func TestMean(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "model")
	if err := WriteMean(dir, []float64{1.5, -2}, 3); err != nil {
		t.Fatal(err)
	}
	m := dyn(2, 3, []string{"a", "y0", "y1"}, nil, []string{"y0", "y1"})
	p, err := Load(dir, m, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if f, _ := ReadFormat(dir); f != FormatMean || p.Format() != FormatMean || p.Horizon() != 3 {
		t.Fatalf("format %s %s", f, p.Format())
	}
	got, err := p.PredictBatch(context.Background(), make([]float32, 2*2*3), make([]float32, 2*3), 2)
	if err != nil {
		t.Fatal(err)
	}
	approx(t, "mean", got, []float64{1.5, -2, 1.5, -2, 1.5, -2, 1.5, -2, 1.5, -2, 1.5, -2})
	_, err = Load(dir, dyn(2, 2, []string{"a", "y0", "y1"}, nil, []string{"y0", "y1"}), LoadOptions{})
	wantInvalid(t, err, "horizon")
	_, err = Load(dir, dyn(2, 3, []string{"a", "y0"}, nil, []string{"y0"}), LoadOptions{})
	wantInvalid(t, err, "yCols")
	if err := WriteMean(t.TempDir(), []float64{math.NaN()}, 1); err == nil {
		t.Fatal("NaN mean written")
	}
	if err := WriteMean(t.TempDir(), []float64{1}, 0); err == nil {
		t.Fatal("horizon 0 written")
	}
}

func TestExecPredictor(t *testing.T) {
	m := dyn(2, 3, []string{"c", "z"}, []string{"c"}, []string{"z"})
	dir := writeModel(t, map[string]any{"format": FormatExecPredictor, "command": []string{"python3", "predict.py"}, "horizon": 3})
	_, err := Load(dir, m, LoadOptions{})
	wantInvalid(t, err)
	var gotArgs []any
	run := func(ctx context.Context, command []string, artifactDir string, x, u []float32, n, H, F, nAll, nCtrl, nTgt int, timeout time.Duration) ([]float32, error) {
		gotArgs = []any{strings.Join(command, " "), artifactDir, len(x), len(u), n, H, F, nAll, nCtrl, nTgt, timeout}
		out := make([]float32, n*F*nTgt)
		for i := range out {
			out[i] = float32(i)
		}
		return out, nil
	}
	p, err := Load(dir, m, LoadOptions{ExecPredict: run, ExecTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.PredictBatch(context.Background(), make([]float32, 2*2*2), make([]float32, 2*3), 2)
	if err != nil || len(out) != 6 || p.Format() != FormatExecPredictor || p.Horizon() != 3 {
		t.Fatalf("%v %v", out, err)
	}
	want := []any{"python3 predict.py", dir, 8, 6, 2, 2, 3, 2, 1, 1, time.Second}
	for i := range want {
		if gotArgs[i] != want[i] {
			t.Fatalf("args %v, want %v", gotArgs, want)
		}
	}
	short := func(ctx context.Context, command []string, artifactDir string, x, u []float32, n, H, F, nAll, nCtrl, nTgt int, timeout time.Duration) ([]float32, error) {
		return make([]float32, 5), nil
	}
	p, _ = Load(dir, m, LoadOptions{ExecPredict: short})
	_, err = p.PredictBatch(context.Background(), make([]float32, 8), make([]float32, 6), 2)
	wantInvalid(t, err, "prediction")
	_, err = Load(writeModel(t, map[string]any{"format": FormatExecPredictor, "command": []string{}}), m, LoadOptions{ExecPredict: run})
	wantInvalid(t, err, "command")
	_, err = Load(writeModel(t, map[string]any{"format": FormatExecPredictor, "command": []string{"x"}, "yCols": 2}), m, LoadOptions{ExecPredict: run})
	wantInvalid(t, err, "yCols")
}

func TestArtifactHash(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "empty"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "model.json"), []byte(`{"format":"aml.mean/1"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "w.bin"), []byte{1, 2, 3}, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "sub.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	h1, err := ArtifactHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Hand-computed: paths sorted byte-wise ("sub.txt" < "sub/w.bin").
	hx := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	manual := "model.json\n" + hx([]byte(`{"format":"aml.mean/1"}`)) + "\n" +
		"sub.txt\n" + hx([]byte("x")) + "\n" +
		"sub/w.bin\n" + hx([]byte{1, 2, 3}) + "\n"
	if want := hx([]byte(manual)); h1 != want {
		t.Fatalf("hash %s, want %s", h1, want)
	}
	if h2, _ := ArtifactHash(dir); h2 != h1 {
		t.Fatal("hash not stable")
	}
	// Changing any byte changes it; restoring restores it.
	if err := os.WriteFile(filepath.Join(dir, "sub", "w.bin"), []byte{1, 2, 4}, 0o644); err != nil {
		t.Fatal(err)
	}
	if h, _ := ArtifactHash(dir); h == h1 {
		t.Fatal("byte change not detected")
	}
	if err := os.WriteFile(filepath.Join(dir, "sub", "w.bin"), []byte{1, 2, 3}, 0o644); err != nil {
		t.Fatal(err)
	}
	if h, _ := ArtifactHash(dir); h != h1 {
		t.Fatal("restored content hashes differently")
	}
	if err := os.WriteFile(filepath.Join(dir, "extra"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if h, _ := ArtifactHash(dir); h == h1 {
		t.Fatal("added empty file not detected")
	}
	if err := os.Remove(filepath.Join(dir, "extra")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "sub.txt"), filepath.Join(dir, "sub2.txt")); err != nil {
		t.Fatal(err)
	}
	if h, _ := ArtifactHash(dir); h == h1 {
		t.Fatal("rename not detected")
	}
	if err := os.Rename(filepath.Join(dir, "sub2.txt"), filepath.Join(dir, "sub.txt")); err != nil {
		t.Fatal(err)
	}
	// Symlinks are refused, inside and as the root.
	if err := os.Symlink(filepath.Join(dir, "model.json"), filepath.Join(dir, "link")); err != nil {
		t.Skip("symlinks unsupported:", err)
	}
	_, err = ArtifactHash(dir)
	wantInvalid(t, err, "artifact")
	if err := os.Remove(filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "root")
	if err := os.Symlink(dir, root); err != nil {
		t.Fatal(err)
	}
	_, err = ArtifactHash(root)
	wantInvalid(t, err, "artifact")
	_, err = ArtifactHash(filepath.Join(dir, "nope"))
	wantInvalid(t, err, "artifact")
	if h, _ := ArtifactHash(dir); h != h1 {
		t.Fatal("hash changed after removing the link")
	}
}

// TestLoadFormats: a format that is not built in is read by the loader
// the caller passes (LoadOptions.Formats) and refused without it, the
// refusal naming every format the call accepts.
func TestLoadFormats(t *testing.T) {
	m := dyn(1, 1, []string{"a"}, nil, []string{"z"})
	dir := writeModel(t, map[string]any{"format": "aml.forest/9"})
	_, err := Load(dir, m, LoadOptions{})
	if e := invalidErr(t, err); strings.Contains(e.Message, "aml.tree/1") {
		t.Fatalf("message %q names a format the call does not accept", e.Message)
	}
	var got string
	forest := func(b []byte, d string, man *dataset.Manifest) (Predictor, error) {
		got = d
		return loadMean([]byte(`{"format":"aml.mean/1","horizon":1,"yCols":1,"mean":[1]}`), man.Dims())
	}
	p, err := Load(dir, m, LoadOptions{Formats: map[string]FormatLoader{"aml.forest/9": forest}})
	if err != nil || p == nil || got != dir {
		t.Fatalf("Load with the loader: %v, %v, dir %q", p, err, got)
	}
	_, err = Load(writeModel(t, map[string]any{"format": "aml.bush/2"}), m, LoadOptions{Formats: map[string]FormatLoader{"aml.tree/1": forest}})
	if e := invalidErr(t, err); !strings.Contains(e.Message, "aml.linear-window/1, aml.mean/1, aml.exec-predictor/1, aml.tree/1") {
		t.Fatalf("message %q does not list the accepted formats", e.Message)
	}
}

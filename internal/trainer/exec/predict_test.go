//go:build unix

package extrun

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// shPredict runs a /bin/sh predictor script on a small batch.
func shPredict(t *testing.T, script string, n, H, F, nAll, nCtrl, nTgt int, timeout time.Duration) ([]float32, []float32, error) {
	t.Helper()
	art := jobDir(t)
	x := make([]float32, n*H*nAll)
	for i := range x {
		x[i] = float32(i) + 0.5
	}
	u := make([]float32, n*F*nCtrl)
	for i := range u {
		u[i] = -float32(i)
	}
	out, err := Predict(context.Background(), []string{"/bin/sh", "-c", script}, art, x, u, n, H, F, nAll, nCtrl, nTgt, timeout)
	return x, out, err
}

func TestPredictShellHappyPath(t *testing.T) {
	// n=2, F=3, nTgt=2: 12 values = the first 48 bytes of x.f32. The script
	// also checks the request, the environment and the working directory.
	script := `set -e
d="$AML_PREDICT_DIR"
grep -q '"format":"aml.predict/1"' "$d/request.json"
grep -q '"n":2,"history":4,"horizon":3,"xCols":5,"uCols":1,"yCols":2' "$d/request.json"
[ "$(wc -c < "$d/x.f32")" -eq 160 ]
[ "$(wc -c < "$d/u.f32")" -eq 24 ]
[ "$HOME" = "$d" ] && [ "$TMPDIR" = "$d/tmp" ] && [ -z "${AML_JOB_DIR:-}" ]
[ -f marker ]
head -c 48 "$d/x.f32" > "$d/yhat.f32"`
	art := jobDir(t)
	if err := os.WriteFile(filepath.Join(art, "marker"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	x := make([]float32, 2*4*5)
	for i := range x {
		x[i] = float32(i)*1.5 - 3
	}
	u := []float32{1, 2, 3, 4, 5, 6}
	out, err := Predict(context.Background(), []string{"/bin/sh", "-c", script}, art, x, u, 2, 4, 3, 5, 1, 2, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 12 {
		t.Fatalf("%d values", len(out))
	}
	for i, v := range out {
		if v != x[i] {
			t.Fatalf("yhat[%d] = %v, want %v", i, v, x[i])
		}
	}
}

func TestPredictInvalid(t *testing.T) {
	cases := []struct {
		name, script, want string
		timeout            time.Duration
	}{
		{"missing", `echo nothing written`, "wrote no yhat.f32", 0},
		{"short", `head -c 44 "$AML_PREDICT_DIR/x.f32" > "$AML_PREDICT_DIR/yhat.f32"`, "has 44 bytes, need 48", 0},
		{"long", `head -c 52 "$AML_PREDICT_DIR/x.f32" > "$AML_PREDICT_DIR/yhat.f32"`, "has 52 bytes, need 48", 0},
		{"nan", `{ head -c 20 "$AML_PREDICT_DIR/x.f32"; printf '\000\000\300\177'; head -c 24 "$AML_PREDICT_DIR/x.f32"; } > "$AML_PREDICT_DIR/yhat.f32"`, "value 5 (window 0, step 2, target 1) is NaN", 0},
		{"inf", `{ printf '\000\000\200\177'; head -c 44 "$AML_PREDICT_DIR/x.f32"; } > "$AML_PREDICT_DIR/yhat.f32"`, "value 0 (window 0, step 0, target 0) is +Inf", 0},
		{"exit", `echo "model is broken" >&2; head -c 48 "$AML_PREDICT_DIR/x.f32" > "$AML_PREDICT_DIR/yhat.f32"; exit 3`, "exited with code 3; output ends with: model is broken", 0},
		{"symlink", `ln -s /dev/zero "$AML_PREDICT_DIR/yhat.f32"`, "not a regular file", 0},
		{"timeout", `sleep 30`, "did not finish within 200ms", 200 * time.Millisecond},
		{"killed", `kill -9 $$`, "killed by SIGKILL", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, out, err := shPredict(t, c.script, 2, 4, 3, 5, 1, 2, c.timeout)
			if core.CodeOf(err) != CodePredictInvalid || out != nil {
				t.Fatalf("err %v, out %v", err, out)
			}
			var ae *core.Error
			if !errors.As(err, &ae) || ae.Kind() != core.KindUnprocessable {
				t.Fatalf("status: %v", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q lacks %q", err, c.want)
			}
		})
	}
	t.Run("not-found", func(t *testing.T) {
		_, err := Predict(context.Background(), []string{"./predict.sh"}, jobDir(t), make([]float32, 4), make([]float32, 1), 1, 2, 1, 2, 1, 1, 0)
		if core.CodeOf(err) != CodePredictInvalid {
			t.Fatalf("%v", err)
		}
	})
}

func TestPredictBadArguments(t *testing.T) {
	art := jobDir(t)
	cmd := []string{"/bin/true"}
	for _, c := range []struct {
		x, u                       []float32
		n, H, F, nAll, nCtrl, nTgt int
		dir                        string
	}{
		{make([]float32, 3), make([]float32, 1), 1, 2, 1, 2, 1, 1, art},
		{make([]float32, 4), make([]float32, 2), 1, 2, 1, 2, 1, 1, art},
		{make([]float32, 4), nil, 0, 2, 1, 2, 0, 1, art},
		{make([]float32, 4), nil, 1, 2, 1, 2, 0, 1, "relative"},
		{make([]float32, 4), nil, 1, 2, 1, 2, 0, 1, filepath.Join(art, "missing")},
	} {
		_, err := Predict(context.Background(), cmd, c.dir, c.x, c.u, c.n, c.H, c.F, c.nAll, c.nCtrl, c.nTgt, 0)
		if core.CodeOf(err) != core.CodeInvalidArgument {
			t.Fatalf("%+v: %v", c, err)
		}
	}
	// A static batch (nCtrl = 0, no u) is fine.
	out, err := Predict(context.Background(), []string{"/bin/sh", "-c", `head -c 4 "$AML_PREDICT_DIR/x.f32" > "$AML_PREDICT_DIR/yhat.f32"; [ ! -s "$AML_PREDICT_DIR/u.f32" ]`},
		art, []float32{7, 8}, nil, 1, 1, 1, 2, 0, 1, 0)
	if err != nil || len(out) != 1 || out[0] != 7 {
		t.Fatalf("static: %v %v", out, err)
	}
	// Cancellation is the caller's, not an invalid predictor.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err = Predict(ctx, []string{"/bin/sh", "-c", "sleep 30"}, art, []float32{7, 8}, nil, 1, 1, 1, 2, 0, 1, 0)
	if !errors.Is(err, context.DeadlineExceeded) || core.CodeOf(err) == CodePredictInvalid {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestPredictPythonExample(t *testing.T) {
	py := python(t)
	script, err := filepath.Abs(filepath.Join("..", "..", "..", "examples", "trainers", "predict_exec_example.py"))
	if err != nil {
		t.Fatal(err)
	}
	// The artifact directory holds a copy of the script, run by a relative
	// command as model.json's "command" would be.
	art := jobDir(t)
	b, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(art, "predict.py"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	mj, _ := json.Marshal(map[string]any{"format": "aml.exec-predictor/1", "command": []string{"python3", "predict.py"}})
	if err := os.WriteFile(filepath.Join(art, "model.json"), mj, 0o644); err != nil {
		t.Fatal(err)
	}

	const n, H, F, nAll, nCtrl, nTgt = 3, 4, 2, 5, 2, 2
	x := make([]float32, n*H*nAll)
	for i := range x {
		x[i] = float32(math.Sin(float64(i))) * 10
	}
	u := make([]float32, n*F*nCtrl)
	opt := PredictOptions{PathOverride: filepath.Dir(py) + ":" + DefaultPath}
	for _, cmd := range [][]string{{"python3", "predict.py"}, {"predict.py"}} {
		out, err := PredictWith(context.Background(), opt, cmd, art, x, u, n, H, F, nAll, nCtrl, nTgt, 30*time.Second)
		if err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
		for w := 0; w < n; w++ {
			for f := 0; f < F; f++ {
				for k := 0; k < nTgt; k++ {
					want := x[(w*H+H-1)*nAll+nAll-nTgt+k]
					if got := out[(w*F+f)*nTgt+k]; got != want {
						t.Fatalf("%v: yhat[%d,%d,%d] = %v, want %v", cmd, w, f, k, got, want)
					}
				}
			}
		}
	}
}

package extrun

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/safefile"
)

// PredictFormat is the "format" of request.json.
const PredictFormat = "aml.predict/1"

// PredictRequest is request.json of the prediction protocol.
type PredictRequest struct {
	Format  string `json:"format"`
	N       int    `json:"n"`
	History int    `json:"history"`
	Horizon int    `json:"horizon"`
	XCols   int    `json:"xCols"`
	UCols   int    `json:"uCols"`
	YCols   int    `json:"yCols"`
}

// PredictOptions adjust the predictor's environment; the zero value is what
// [Predict] uses.
type PredictOptions struct {
	PathOverride string            // the child's PATH instead of DefaultPath
	AllowEnv     []string          // parent variables passed through
	Env          map[string]string // extra variables
	Sandbox      string            // SandboxAuto, SandboxOff, SandboxRequire
}

// predictLogMax caps one file of the predictor's log (kept only to quote
// its tail in errors).
const predictLogMax = 256 << 10

// maxPredictValues bounds n·H·nAll and friends (4 GiB of float32).
const maxPredictValues = 1 << 30

// Predict runs an executable predictor per the aml.predict/1 protocol
// (docs/external-trainer.md): it writes PRED_DIR/request.json, x.f32
// ([n,H,nAll] little-endian float32, model units) and u.f32 ([n,F,nCtrl]; empty
// when nCtrl is 0), runs command with cwd = artifactDir and
// AML_PREDICT_DIR=PRED_DIR in the whitelisted environment (HOME=PRED_DIR,
// TMPDIR=PRED_DIR/tmp) and reads PRED_DIR/yhat.f32, which must hold exactly
// n·F·nTgt finite float32 values. PRED_DIR is a fresh temporary directory,
// removed afterwards; under Landlock it is the only place the predictor can
// write to (the artifact directory is read-only to it). timeout ≤ 0 means
// none.
//
// Every failure of the predictor (cannot start, non-zero exit, killed,
// timeout, missing/short/long yhat.f32, NaN or Inf) is an AML_PREDICT_INVALID
// error (HTTP 422) quoting the tail of its output; bad arguments are
// AML_INVALID_ARGUMENT; if ctx ends first, ctx.Err() is returned (wrapped).
func Predict(ctx context.Context, command []string, artifactDir string, x, u []float32, n, H, F, nAll, nCtrl, nTgt int, timeout time.Duration) ([]float32, error) {
	return PredictWith(ctx, PredictOptions{}, command, artifactDir, x, u, n, H, F, nAll, nCtrl, nTgt, timeout)
}

// PredictWith is [Predict] with options.
func PredictWith(ctx context.Context, opt PredictOptions, command []string, artifactDir string, x, u []float32, n, H, F, nAll, nCtrl, nTgt int, timeout time.Duration) ([]float32, error) {
	bad := func(field, format string, args ...any) error {
		return core.FieldErrorf(core.CodeInvalidArgument, field, format, args...)
	}
	if len(command) == 0 {
		return nil, bad("command", "empty command")
	}
	if n < 1 || H < 1 || F < 1 || nAll < 1 || nCtrl < 0 || nTgt < 1 {
		return nil, bad("dims", "need n, H, F, nAll, nTgt ≥ 1 and nCtrl ≥ 0, got n=%d H=%d F=%d nAll=%d nCtrl=%d nTgt=%d", n, H, F, nAll, nCtrl, nTgt)
	}
	prod := func(a ...int) int {
		p := 1
		for _, v := range a {
			if v != 0 && p > maxPredictValues/v {
				return -1
			}
			p *= v
		}
		return p
	}
	nx, nu, ny := prod(n, H, nAll), prod(n, F, nCtrl), prod(n, F, nTgt)
	if nx < 0 || nu < 0 || ny < 0 {
		return nil, bad("dims", "batch too large")
	}
	if len(x) != nx {
		return nil, bad("x", "%d values, need n·H·nAll = %d", len(x), nx)
	}
	if len(u) != nu {
		return nil, bad("u", "%d values, need n·F·nCtrl = %d", len(u), nu)
	}
	if !filepath.IsAbs(artifactDir) {
		return nil, bad("artifactDir", "must be an absolute path, got %q", artifactDir)
	}
	artifactDir = filepath.Clean(artifactDir)
	if st, err := os.Stat(artifactDir); err != nil || !st.IsDir() {
		return nil, bad("artifactDir", "%s is not a directory", artifactDir)
	}
	if err := checkSandboxMode(opt.Sandbox); err != nil {
		return nil, err
	}
	path := DefaultPath
	if opt.PathOverride != "" {
		path = opt.PathOverride
	}

	predDir, err := os.MkdirTemp("", "aml-predict-")
	if err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "prediction directory")
	}
	defer func() { _ = os.RemoveAll(predDir) }() // best effort: a temporary directory
	env, err := buildEnv(path, predDir, map[string]string{"AML_PREDICT_DIR": predDir}, opt.AllowEnv, opt.Env)
	if err != nil {
		return nil, err
	}
	argv, err := resolveCommand(command, path, artifactDir)
	if err != nil {
		return nil, predictInvalid("cannot start the predictor: %v", err)
	}
	req, _ := json.Marshal(PredictRequest{Format: PredictFormat, N: n, History: H, Horizon: F, XCols: nAll, UCols: nCtrl, YCols: nTgt})
	for _, w := range []struct {
		name string
		b    []byte
	}{{"request.json", append(req, '\n')}, {"x.f32", f32Bytes(x)}, {"u.f32", f32Bytes(u)}} {
		if err := os.WriteFile(filepath.Join(predDir, w.name), w.b, 0o600); err != nil {
			return nil, core.Wrap(core.CodeInternal, err, "prediction request")
		}
	}
	if err := os.Mkdir(filepath.Join(predDir, "tmp"), 0o700); err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "prediction directory")
	}
	lg, err := openRotLog(filepath.Join(predDir, "logs"), "predict.log", predictLogMax, LogKeep)
	if err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "predictor log")
	}
	// Under Landlock the predictor (a program the trainer wrote) reads only
	// its artifact directory, PRED_DIR, its interpreter and the system's
	// libraries.
	readable, _ := readablePaths(argv, env, []string{artifactDir}, nil)
	l := &launch{argv: argv, dir: artifactDir, env: env, writable: []string{predDir}, sandbox: opt.Sandbox, wall: timeout, log: lg,
		readable: readable, restrictReads: true}
	res, err := l.execute(ctx)
	_ = lg.Close() // the log only feeds the messages' tail; predDir goes on return
	defer lg.release()
	tail := func() string {
		t := strings.TrimSpace(lg.tail(2048))
		if t == "" {
			return ""
		}
		return "; output ends with: " + t
	}
	if err != nil {
		return nil, predictInvalid("cannot start the predictor %s: %v", argv[0], err)
	}
	switch res.Reason {
	case ReasonCancelled:
		return nil, fmt.Errorf("executable predictor: %w", ctx.Err())
	case ReasonTimeout:
		return nil, predictInvalid("the predictor did not finish within %s%s", timeout, tail())
	case ReasonKilled:
		return nil, predictInvalid("the predictor was killed by %s%s", orUnknown(res.Signal), tail())
	}
	if res.ExitCode != 0 {
		return nil, predictInvalid("the predictor exited with code %d%s", res.ExitCode, tail())
	}
	yPath := filepath.Join(predDir, "yhat.f32")
	st, err := os.Lstat(yPath)
	if err != nil {
		return nil, predictInvalid("the predictor exited 0 but wrote no yhat.f32%s", tail())
	}
	if !st.Mode().IsRegular() {
		return nil, predictInvalid("yhat.f32 is not a regular file")
	}
	if want := int64(ny) * 4; st.Size() != want {
		return nil, predictInvalid("yhat.f32 has %d bytes, need %d (n·F·nTgt = %d·%d·%d float32)", st.Size(), want, n, F, nTgt)
	}
	b, err := safefile.ReadFileNoFollow(yPath, int64(ny)*4)
	if err != nil {
		return nil, predictInvalid("reading yhat.f32: %v", err)
	}
	if len(b) != ny*4 {
		return nil, predictInvalid("yhat.f32 changed size while being read")
	}
	out := make([]float32, ny)
	for i := range out {
		v := math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			w, rest := i/(F*nTgt), i%(F*nTgt)
			return nil, predictInvalid("yhat.f32 value %d (window %d, step %d, target %d) is %v", i, w, rest/nTgt, rest%nTgt, v)
		}
		out[i] = v
	}
	return out, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "an unknown signal"
	}
	return s
}

func predictInvalid(format string, args ...any) *core.Error {
	e := core.Errorf(CodePredictInvalid, format, args...)
	e.Field = "predictor"
	return e
}

func f32Bytes(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

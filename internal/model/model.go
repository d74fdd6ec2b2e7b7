// Package model reads model artifacts and turns them into predictors.
//
// A model artifact is a directory holding model.json; its "format" field
// selects how the rest is read:
//
//   - aml.linear-window/1 — a linear map from one window's normalised
//     history and future controls to its future targets, written by
//     external trainers (examples/trainers/ridge_arx.py). Evaluated here,
//     in Go, so no trainer code runs to predict.
//   - aml.mean/1 — predicts the per-target train mean at every step; a
//     trivial baseline for tests.
//   - aml.exec-predictor/1 — prediction is delegated to an executable in
//     the artifact directory; the caller supplies the function that runs it
//     ([LoadOptions.ExecPredict]).
//
// Every other format (the native trainers' aml.arx/1, aml.hybrid/1, …) is
// read by a loader the caller passes in [LoadOptions.Formats]: the table
// is trainers.Formats(), handed down by the composition root, never
// registered behind the caller's back.
//
// [Load] checks an artifact against the dataset it is evaluated on and
// fails with AML_MODEL_INVALID (HTTP 422) naming every mismatch.
// [ArtifactHash] is a model's content identity.
//
// Array conventions follow the dataset format: a batch of n windows is
// x [n, H, xCols], u [n, F, uCols] (nil for static datasets) and the
// prediction [n, F, nTgt], all row-major float32. For static datasets
// (one row per cycle) H = F = 1, x [n, nIn] and the prediction [n, nTgt].
package model

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/safefile"
)

// CodeModelInvalid: a model artifact is missing, unreadable, of an unknown
// format or does not fit the dataset it is used with. HTTP 422.
const CodeModelInvalid = core.CodeModelInvalid

// Artifact formats.
const (
	FormatLinearWindow  = "aml.linear-window/1"
	FormatMean          = "aml.mean/1"
	FormatExecPredictor = "aml.exec-predictor/1"
)

// FileName is the descriptor every artifact directory holds.
const FileName = "model.json"

// maxModelJSON bounds model.json (a linear model over a long window can be
// tens of MiB of JSON numbers).
const maxModelJSON = 512 << 20

// Predictor predicts future targets for batches of windows.
type Predictor interface {
	// Format is the artifact format, e.g. "aml.linear-window/1".
	Format() string
	// Horizon is F, the number of future steps per window (1 for static
	// datasets).
	Horizon() int
	// PredictBatch predicts n windows: x [n,H,xCols], u [n,F,uCols] (nil
	// for static datasets) → [n,F,nTgt] in model units.
	PredictBatch(ctx context.Context, x, u []float32, n int) ([]float32, error)
}

// ExecPredictFunc runs an executable predictor over one batch. command is
// model.json's command, artifactDir the artifact directory (the working
// directory of the command). x and u are as in [Predictor.PredictBatch];
// H, F and nAll are the batch's history, horizon and x width, nCtrl the u
// width (max(1, controls) for dynamic datasets — the u array's last
// dimension — and 0 for static ones, where u is nil), nTgt the number of
// targets. It returns [n,F,nTgt] values.
type ExecPredictFunc func(ctx context.Context, command []string, artifactDir string, x, u []float32, n, H, F, nAll, nCtrl, nTgt int, timeout time.Duration) ([]float32, error)

// LoadOptions configure [Load].
type LoadOptions struct {
	// ExecPredict runs aml.exec-predictor/1 artifacts (the jobs layer passes
	// extrun.Predict). Without it such artifacts are refused
	// (AML_MODEL_INVALID).
	ExecPredict ExecPredictFunc
	// ExecTimeout bounds one ExecPredict call; 0 means DefaultExecTimeout.
	ExecTimeout time.Duration
	// Formats are the formats beyond the built-in ones, by name: the
	// native trainers' (trainers.Formats()), passed explicitly by whoever
	// loads their models. A built-in name here is ignored; a format neither
	// built in nor here is refused (AML_MODEL_INVALID).
	Formats map[string]FormatLoader
}

// DefaultExecTimeout bounds one batch of an executable predictor.
const DefaultExecTimeout = 5 * time.Minute

// Invalidf builds an AML_MODEL_INVALID error (HTTP 422) naming field; for
// callers that find a model unusable (e.g. evaluation finding a
// non-finite prediction).
func Invalidf(field, format string, args ...any) *core.Error { return invalid(field, format, args...) }

// invalid builds an AML_MODEL_INVALID error (HTTP 422).
func invalid(field, format string, args ...any) *core.Error {
	return core.FieldErrorf(CodeModelInvalid, field, format, args...)
}

// problems collects every finding of a validation.
type problems []core.Problem

func (p *problems) add(field, format string, args ...any) {
	*p = append(*p, core.Problem{Field: field, Message: sprintf(format, args...)})
}

func (p problems) err(prefix string) error {
	e := core.Invalid(CodeModelInvalid, p)
	if e == nil {
		return nil
	}
	if prefix != "" {
		e.Message = prefix + ": " + e.Message
	}
	return e
}

// IsModelInvalid reports whether err is an AML_MODEL_INVALID error.
func IsModelInvalid(err error) bool { return core.CodeOf(err) == CodeModelInvalid }

// header is the part of model.json every format has.
type header struct {
	Format string `json:"format"`
}

// ReadFormat returns the format named by dir/model.json.
func ReadFormat(dir string) (string, error) {
	b, err := readModelJSON(dir)
	if err != nil {
		return "", err
	}
	var h header
	if err := json.Unmarshal(b, &h); err != nil {
		return "", invalid(FileName, "not a JSON object: %v", err)
	}
	return h.Format, nil
}

func readModelJSON(dir string) ([]byte, error) {
	path := filepath.Join(dir, FileName)
	// The trainer wrote the artifact directory: a link or a FIFO in place
	// of model.json is refused, never followed or waited on.
	f, err := safefile.OpenRegular(path, true)
	if err != nil {
		e := invalid(FileName, "cannot read the model artifact: %v", err)
		e.Err = err
		return nil, e
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxModelJSON+1))
	if err != nil {
		e := invalid(FileName, "cannot read the model artifact: %v", err)
		e.Err = err
		return nil, e
	}
	if len(b) > maxModelJSON {
		return nil, invalid(FileName, "larger than %d bytes", maxModelJSON)
	}
	return b, nil
}

// decode unmarshals model.json into v. Unknown fields are allowed: trainers
// record their own metadata (hyper-parameters, versions) next to the model.
func decode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		return invalid(FileName, "cannot decode: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return invalid(FileName, "trailing data after the JSON object")
	}
	return nil
}

// Load reads the artifact in dir and returns its predictor, after checking
// it against the dataset described by m: history H, horizon F, x width,
// u width and number of targets must all match (see each format's rules).
// Every mismatch is reported in one AML_MODEL_INVALID error.
func Load(dir string, m *dataset.Manifest, opts LoadOptions) (Predictor, error) {
	if m == nil {
		return nil, core.Errorf(core.CodeInternal, "model.Load: no dataset manifest")
	}
	b, err := readModelJSON(dir)
	if err != nil {
		return nil, err
	}
	var h header
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, invalid(FileName, "not a JSON object: %v", err)
	}
	d := m.Dims()
	switch h.Format {
	case FormatLinearWindow:
		return loadLinear(b, d)
	case FormatMean:
		return loadMean(b, d)
	case FormatExecPredictor:
		return loadExec(b, dir, d, opts)
	case "":
		return nil, invalid(FileName+": format", "missing; one of %s", strings.Join(opts.formatNames(), ", "))
	default:
		if l, ok := opts.Formats[h.Format]; ok && l != nil {
			return l(b, dir, m)
		}
		return nil, invalid(FileName+": format", "unknown format %q; one of %s", h.Format, strings.Join(opts.formatNames(), ", "))
	}
}

// FormatLoader loads a format that is not built in (native trainers
// define the formats they write: trainers.Formats()).
type FormatLoader func(modelJSON []byte, dir string, m *dataset.Manifest) (Predictor, error)

// BuiltinFormats lists the formats Load reads without LoadOptions.Formats.
func BuiltinFormats() []string { return []string{FormatLinearWindow, FormatMean, FormatExecPredictor} }

// formatNames lists every format Load accepts with o: the built-in ones,
// then o.Formats sorted.
func (o LoadOptions) formatNames() []string {
	out := BuiltinFormats()
	n := len(out)
	for k, l := range o.Formats {
		if l != nil && !slices.Contains(out[:n], k) {
			out = append(out, k)
		}
	}
	sort.Strings(out[n:])
	return out
}

// Decode unmarshals model.json into v (unknown fields allowed) with the
// package's error conventions; for the loaders of other formats.
func Decode(b []byte, v any) error { return decode(b, v) }

// Invalid builds an AML_MODEL_INVALID error for the loaders of other
// formats.
func Invalid(field, format string, args ...any) error { return invalid(field, format, args...) }

// CheckBatch validates a PredictBatch call's lengths against the dataset.
func CheckBatch(d dataset.Dims, x, u []float32, n int) error { return checkBatch(d, x, u, n) }

// checkBatch validates a batch's lengths against the dataset dimensions.
func checkBatch(d dataset.Dims, x, u []float32, n int) error {
	if n < 0 {
		return core.Errorf(core.CodeInvalidArgument, "negative batch size %d", n)
	}
	if len(x) != n*d.XLen() {
		return core.Errorf(core.CodeInvalidArgument, "x holds %d values, %d windows need %d", len(x), n, n*d.XLen())
	}
	if len(u) != n*d.ULen() {
		return core.Errorf(core.CodeInvalidArgument, "u holds %d values, %d windows need %d", len(u), n, n*d.ULen())
	}
	return nil
}

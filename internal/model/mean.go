package model

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
)

// Mean is the aml.mean/1 model.json: it predicts mean[k] for target k at
// every one of the horizon steps, whatever the inputs.
//
//	{"format":"aml.mean/1","horizon":F,"yCols":nTgt,"mean":[nTgt]}
type Mean struct {
	Format  string    `json:"format"`
	Horizon int       `json:"horizon"`
	YCols   int       `json:"yCols"`
	Mean    []float64 `json:"mean"`
}

type meanPredictor struct {
	d    dataset.Dims
	mean []float32
}

func loadMean(b []byte, d dataset.Dims) (Predictor, error) {
	var mj Mean
	if err := decode(b, &mj); err != nil {
		return nil, err
	}
	var ps problems
	if mj.Horizon != d.F {
		ps.add("horizon", "%d steps, the dataset has %d", mj.Horizon, d.F)
	}
	if mj.YCols != d.YCols {
		ps.add("yCols", "%d targets, the dataset has %d", mj.YCols, d.YCols)
	}
	if len(mj.Mean) != mj.YCols {
		ps.add("mean", "%d values, yCols is %d", len(mj.Mean), mj.YCols)
	}
	p := &meanPredictor{d: d}
	for k, v := range mj.Mean {
		if math.IsNaN(v) || math.IsInf(v, 0) || math.Abs(v) > math.MaxFloat32 {
			ps.add(sprintf("mean[%d]", k), "not a finite float32")
		}
		p.mean = append(p.mean, float32(v))
	}
	if len(ps) > 0 {
		return nil, ps.err(FileName + " (" + FormatMean + ") does not fit the dataset")
	}
	return p, nil
}

func (p *meanPredictor) Format() string { return FormatMean }
func (p *meanPredictor) Horizon() int   { return p.d.F }

func (p *meanPredictor) PredictBatch(ctx context.Context, x, u []float32, n int) ([]float32, error) {
	if err := checkBatch(p.d, x, u, n); err != nil {
		return nil, err
	}
	out := make([]float32, n*p.d.YLen())
	for i := 0; i < n*p.d.F; i++ {
		copy(out[i*p.d.YCols:], p.mean)
	}
	return out, nil
}

// WriteMean writes an aml.mean/1 artifact predicting yMeans (one value per
// target) at each of F steps into dir (created if needed). model.json is
// written to a temporary file and renamed into place.
func WriteMean(dir string, yMeans []float64, F int) error {
	if F < 1 {
		return core.Errorf(core.CodeInvalidArgument, "aml.mean/1: horizon must be ≥ 1, got %d", F)
	}
	if len(yMeans) == 0 {
		return core.Errorf(core.CodeInvalidArgument, "aml.mean/1: no target means")
	}
	for k, v := range yMeans {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return core.Errorf(core.CodeNonFinite, "aml.mean/1: mean[%d] is not finite", k)
		}
	}
	b, err := json.MarshalIndent(Mean{Format: FormatMean, Horizon: F, YCols: len(yMeans), Mean: yMeans}, "", "  ")
	if err != nil {
		return core.Wrap(core.CodeInternal, err, "encode %s", FileName)
	}
	return writeFileAtomic(dir, FileName, append(b, '\n'))
}

// writeFileAtomic writes dir/name through a temporary file and a rename.
func writeFileAtomic(dir, name string, b []byte) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return core.Wrap(core.CodeInternal, err, "create %s", dir)
	}
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return core.Wrap(core.CodeInternal, err, "write %s", name)
	}
	tmp := f.Name()
	// No fsync: like the store (SQLite WAL, synchronous=NORMAL) a power
	// loss may lose the newest artifact, never corrupt silently — the
	// artifact hash recorded at registration is re-checked before
	// promotion and serving.
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		_ = os.Remove(tmp) // best effort: the write error is what matters
		return core.Wrap(core.CodeInternal, err, "write %s", name)
	}
	return nil
}

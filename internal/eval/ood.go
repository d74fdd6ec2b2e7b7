package eval

import (
	"math"
	"slices"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
)

// Feature summaries of an input window, the OOD feature vector.
const (
	// OODFeaturesMeanLast: per column of a dynamic window's history
	// x [H, nAll], the mean over the H steps and the last (most recent)
	// value: 2·nAll features, whatever H is.
	OODFeaturesMeanLast = "window-mean+last/v1"
	// OODFeaturesRow: the input row itself — a static dataset's x [nIn],
	// or a dynamic window with H = 1 (whose mean and last value coincide).
	OODFeaturesRow = "row/v1"
)

// DefaultOODQuantile is the default acceptance quantile of the training
// distances (the 99.5th percentile).
const DefaultOODQuantile = 0.995

// MinOODWindows is the fewest train windows [FitOOD] accepts.
const MinOODWindows = 20

// MaxOODFitWindows bounds the train windows the envelope is fitted on: a
// larger train split is subsampled at an even stride (deterministic).
// Stride-1 windows overlap H+F-fold, so the subsample loses little.
const MaxOODFitWindows = 65536

// OOD is a training envelope: the Mahalanobis distance of an input
// window's feature vector from the train windows' mean, under their
// Ledoit–Wolf-shrunk covariance, and an acceptance threshold taken from
// the distribution of the train windows' own distances.
type OOD struct {
	// Mean is the train mean of the features [p], in model units.
	Mean []float64 `json:"mean"`
	// Prec is the inverse of the shrunk covariance [p][p], in model units:
	// distance² = (z − Mean)ᵀ Prec (z − Mean).
	Prec [][]float64 `json:"prec"`
	// Shrinkage is the Ledoit–Wolf intensity δ ∈ [0, 1] (of the
	// standardised features' covariance towards μ·I).
	Shrinkage float64 `json:"shrinkage"`
	// Threshold is the Quantile-th quantile of the train windows'
	// distances; a window is accepted when its distance ≤ Threshold.
	Threshold float64 `json:"threshold"`
	// Quantile is the acceptance quantile, e.g. 0.995.
	Quantile float64 `json:"quantile"`
	// Features names the feature summary (OODFeaturesMeanLast or
	// OODFeaturesRow).
	Features string `json:"features"`
	// H and Cols are the window shape Distance expects: x [H·Cols].
	H    int `json:"h"`
	Cols int `json:"cols"`
	// Windows is the number of train windows fitted on.
	Windows int `json:"windows"`
}

// features appends the feature vector of window x to dst.
func (o *OOD) features(dst []float64, x []float32) []float64 {
	return oodFeatures(dst, x, o.H, o.Cols, o.Features)
}

func oodFeatures(dst []float64, x []float32, H, cols int, kind string) []float64 {
	if kind == OODFeaturesRow {
		for _, v := range x {
			dst = append(dst, float64(v))
		}
		return dst
	}
	for j := 0; j < cols; j++ {
		s := 0.0
		for h := 0; h < H; h++ {
			s += float64(x[h*cols+j])
		}
		dst = append(dst, s/float64(H))
	}
	for j := 0; j < cols; j++ {
		dst = append(dst, float64(x[(H-1)*cols+j]))
	}
	return dst
}

// FitOOD fits the training envelope on b's TRAIN windows (rows) and sets
// the threshold at the given quantile (0 means [DefaultOODQuantile]) of
// their distances.
//
// Features: a dynamic window's history is summarised per column by its
// mean over the H steps and its last value (2·nAll features; the flattened
// window would have H·nAll, too many for a covariance); a static row, or a
// dynamic window with H = 1, is used as is.
//
// Covariance: each feature is standardised by its train std (a constant
// feature keeps scale 1, i.e. model units), then the sample covariance S
// (divisor n) is shrunk by Ledoit–Wolf (2004):
//
//	μ  = tr(S)/p
//	d² = ‖S − μI‖²_F / p
//	b̄² = Σ_i ‖x_i x_iᵀ − S‖²_F / (n² p)  = (Σ_i ‖x_i‖⁴ − n‖S‖²_F) / (n² p)
//	δ  = min(b̄², d²) / d²                 (0 when d² = 0)
//	Σ  = δ μ I + (1 − δ) S
//
// so Σ is positive definite even when S is singular (a constant column,
// fewer windows than features). Prec is Σ⁻¹ mapped back to model units.
// When every feature is constant (μ = 0), Σ = I and δ = 1.
//
// It fails with AML_INVALID_ARGUMENT when quantile is not in (0, 1) or
// the train split has fewer than [MinOODWindows] windows, and with
// AML_DATASET_TAMPERED on a non-finite train input.
func FitOOD(b *dataset.Bundle, quantile float64) (*OOD, error) {
	if b == nil {
		return nil, core.Errorf(core.CodeInternal, "eval.FitOOD: nil bundle")
	}
	if quantile == 0 {
		quantile = DefaultOODQuantile
	}
	if !(quantile > 0 && quantile < 1) {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "quantile", "must be in (0, 1), got %v", quantile)
	}
	if err := b.Validate(); err != nil {
		return nil, err
	}
	d := b.Dims()
	lo, hi := b.Split(dataset.SplitTrain)
	n := hi - lo
	if n < MinOODWindows {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "split.train", "the train split has %d window(s); the OOD envelope needs at least %d", n, MinOODWindows)
	}
	o := &OOD{Quantile: quantile, H: d.H, Cols: d.XCols, Features: OODFeaturesMeanLast}
	if d.Static || d.H == 1 {
		o.Features = OODFeaturesRow
	}
	// The windows fitted on: all, or an even-stride subsample.
	m := min(n, MaxOODFitWindows)
	o.Windows = m
	rows := make([][]float64, m)
	for i := range rows {
		w := lo + int(int64(i)*int64(n)/int64(m))
		x, _, _ := b.Window(w)
		rows[i] = o.features(nil, x)
		for j, v := range rows[i] {
			if !finite(v) {
				return nil, core.Errorf(core.CodeDatasetTampered, "train window %d: feature %d of its input is not finite", w, j)
			}
		}
	}
	p := len(rows[0])
	// Standardise.
	mean, scale := make([]float64, p), make([]float64, p)
	for _, r := range rows {
		for j, v := range r {
			mean[j] += v
		}
	}
	for j := range mean {
		mean[j] /= float64(m)
	}
	for _, r := range rows {
		for j, v := range r {
			e := v - mean[j]
			scale[j] += e * e
		}
	}
	z := make([][]float64, m)
	for j := range scale {
		scale[j] = math.Sqrt(scale[j] / float64(m))
		if !(scale[j] > 0) {
			scale[j] = 1
		}
	}
	for i, r := range rows {
		z[i] = make([]float64, p)
		for j, v := range r {
			z[i][j] = (v - mean[j]) / scale[j]
		}
	}
	sigma, delta := ledoitWolf(z)
	prec, ok := invertSPD(sigma)
	for ridge := 1e-10; !ok && ridge < 1; ridge *= 10 {
		// Only reachable through rounding on a nearly singular Σ.
		for j := range sigma {
			sigma[j][j] += ridge
		}
		prec, ok = invertSPD(sigma)
	}
	if !ok {
		return nil, core.Errorf(core.CodeInternal, "OOD envelope: the shrunk covariance is not positive definite")
	}
	for i := range prec {
		for j := range prec[i] {
			prec[i][j] /= scale[i] * scale[j]
		}
	}
	o.Mean, o.Prec, o.Shrinkage = mean, prec, delta
	dist := make([]float64, m)
	for i, r := range rows {
		dist[i] = o.distance(r)
	}
	slices.Sort(dist)
	o.Threshold = dist[oodRank(m, quantile)-1]
	return o, nil
}

// oodRank is ⌈n·q⌉ (at least 1): the 1-based rank of the empirical
// q-quantile among n sorted values.
func oodRank(n int, q float64) int {
	v := float64(n) * q
	return min(n, max(1, int(math.Ceil(v-1e-12*math.Max(1, v)))))
}

// ledoitWolf returns the Ledoit–Wolf shrunk covariance of the centred rows
// x [n][p] and the shrinkage intensity δ (see [FitOOD]).
func ledoitWolf(x [][]float64) ([][]float64, float64) {
	n, p := len(x), len(x[0])
	S := make([][]float64, p)
	for j := range S {
		S[j] = make([]float64, p)
	}
	sumN4 := 0.0
	for _, r := range x {
		nn := 0.0
		for j, a := range r {
			nn += a * a
			if a == 0 {
				continue
			}
			Sj := S[j]
			for k := j; k < p; k++ {
				Sj[k] += a * r[k]
			}
		}
		sumN4 += nn * nn
	}
	tr := 0.0
	for j := 0; j < p; j++ {
		for k := j; k < p; k++ {
			S[j][k] /= float64(n)
			S[k][j] = S[j][k]
		}
		tr += S[j][j]
	}
	mu := tr / float64(p)
	if !(mu > 0) {
		// Every feature constant: no scale to shrink towards.
		I := make([][]float64, p)
		for j := range I {
			I[j] = make([]float64, p)
			I[j][j] = 1
		}
		return I, 1
	}
	var fro2, d2 float64
	for j := 0; j < p; j++ {
		for k := 0; k < p; k++ {
			s := S[j][k]
			fro2 += s * s
			if j == k {
				s -= mu
			}
			d2 += s * s
		}
	}
	d2 /= float64(p)
	b2 := (sumN4 - float64(n)*fro2) / (float64(n) * float64(n) * float64(p))
	b2 = math.Max(0, math.Min(b2, d2))
	delta := 0.0
	if d2 > 0 {
		delta = b2 / d2
	}
	for j := 0; j < p; j++ {
		for k := 0; k < p; k++ {
			S[j][k] *= 1 - delta
		}
		S[j][j] += delta * mu
	}
	return S, delta
}

// invertSPD inverts a symmetric positive-definite matrix by Cholesky
// decomposition; ok is false when it is not (numerically) positive
// definite.
func invertSPD(a [][]float64) ([][]float64, bool) {
	p := len(a)
	L := make([][]float64, p)
	for i := range L {
		L[i] = make([]float64, p)
	}
	for i := 0; i < p; i++ {
		for j := 0; j <= i; j++ {
			s := a[i][j]
			for k := 0; k < j; k++ {
				s -= L[i][k] * L[j][k]
			}
			if i == j {
				if !(s > 0) || !finite(s) {
					return nil, false
				}
				L[i][i] = math.Sqrt(s)
			} else {
				L[i][j] = s / L[j][j]
			}
		}
	}
	// inv(A) = inv(L)ᵀ inv(L); invert L column by column.
	Li := make([][]float64, p)
	for i := range Li {
		Li[i] = make([]float64, p)
	}
	for c := 0; c < p; c++ {
		for i := c; i < p; i++ {
			s := 0.0
			if i == c {
				s = 1
			}
			for k := c; k < i; k++ {
				s -= L[i][k] * Li[k][c]
			}
			Li[i][c] = s / L[i][i]
		}
	}
	inv := make([][]float64, p)
	for i := range inv {
		inv[i] = make([]float64, p)
	}
	for i := 0; i < p; i++ {
		for j := 0; j <= i; j++ {
			s := 0.0
			for k := i; k < p; k++ {
				s += Li[k][i] * Li[k][j]
			}
			inv[i][j], inv[j][i] = s, s
		}
	}
	return inv, true
}

// distance is the Mahalanobis distance of feature vector z.
func (o *OOD) distance(z []float64) float64 {
	p := len(o.Mean)
	if len(z) != p {
		return math.NaN()
	}
	diff := make([]float64, p)
	for j := range diff {
		diff[j] = z[j] - o.Mean[j]
	}
	q := 0.0
	for i := 0; i < p; i++ {
		row, s := o.Prec[i], 0.0
		for j := 0; j < p; j++ {
			s += row[j] * diff[j]
		}
		q += diff[i] * s
	}
	if math.IsNaN(q) {
		return q
	}
	return math.Sqrt(math.Max(0, q))
}

// Distance is the Mahalanobis distance of input window x (x [H·Cols], the
// layout of the dataset's x array) from the training envelope. It is NaN
// when x has the wrong length or a non-finite value, so such a window is
// never accepted.
func (o *OOD) Distance(x []float32) float64 {
	if o == nil || len(x) != o.H*o.Cols || o.H < 1 {
		return math.NaN()
	}
	z := o.features(make([]float64, 0, len(o.Mean)), x)
	for _, v := range z {
		if !finite(v) {
			return math.NaN()
		}
	}
	return o.distance(z)
}

// Check returns x's distance and whether it is inside the envelope
// (distance ≤ Threshold). An undefined (NaN) distance is not accepted.
func (o *OOD) Check(x []float32) (d float64, accepted bool) {
	d = o.Distance(x)
	return d, d <= o.Threshold
}

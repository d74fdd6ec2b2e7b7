package nss

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/aml-project/aml/internal/ident/linear"
	"github.com/aml-project/aml/internal/ident/lsq"
	"github.com/aml-project/aml/internal/ident/mlp"
	"github.com/aml-project/aml/internal/ident/score"
)

// Config are the structure and the training settings.
type Config struct {
	Order       int   // state dimension n
	NA, NB      int   // past outputs and inputs the encoder reads
	Hidden      []int // hidden layer sizes (tanh) of f, h and the encoder
	Feedthrough bool  // y(t) depends on u(t)
	// LinearInit starts from the subspace model of order Order
	// (internal/ident/linear, refined by prediction error when Refine)
	// with a least-squares linear encoder and zero network outputs: at
	// epoch 0 the model is that linear model.
	LinearInit bool
	Refine     bool
	Epochs     int     // maximum epochs
	SeqLen     int     // steps of every simulated subsequence (0: 50)
	Batch      int     // subsequences per minibatch (0: 16)
	LR         float64 // Adam learning rate (0: 1e-3)
	// LRLinear and LRTransition multiply the Adam step of the linear
	// part (A, B, C, D, the skip connection, and the encoder's linear
	// map E, e0: all that LinearInit sets) and of the transition network
	// f (0: 1, the step of every other parameter; negative: refused).
	// With a subspace start the linear part is already good: a small
	// factor keeps it there while the networks learn.
	LRLinear, LRTransition float64
	Seed                   uint64
	Patience               int           // epochs without a better validation before stopping (0: none)
	ValShare               float64       // tail share of every segment held out (0: 0.2)
	Budget                 time.Duration // training-time budget (0: none)
	// Select is what the epoch kept is chosen on: SelectTail (empty,
	// the default) the free run over the held-out tail of every
	// segment, started from the encoder just before it; SelectRecord the
	// free run over every whole segment (its trained rows and its tail),
	// started once from the encoder at its beginning — the long-horizon
	// simulation error the subsequences do not see.
	Select string
	// Workers bounds the goroutines of a minibatch (0: GOMAXPROCS); the
	// result does not depend on it.
	Workers int
	// Progress, when set, is called after every epoch; an error stops
	// the training with that error.
	Progress func(epoch int, trainLoss, valNRMSE float64) error
}

// Epoch selection criteria (Config.Select).
const (
	SelectTail   = "tail"
	SelectRecord = "record"
)

// Report describes a training.
type Report struct {
	Epochs         int     `json:"epochs"`    // epochs run
	BestEpoch      int     `json:"bestEpoch"` // epoch kept (0: the initialisation)
	InitValNRMSE   float64 `json:"initValNrmse"`
	ValNRMSE       float64 `json:"valNrmse"` // of the epoch kept
	TrainLoss      float64 `json:"trainLoss"`
	TrainSamples   int     `json:"trainSamples"`
	ValSamples     int     `json:"valSamples"`
	Stop           string  `json:"stop"` // epochs, patience or budget
	LinearInit     bool    `json:"linearInit"`
	LinearTrainMSE float64 `json:"linearTrainMse,omitempty"`
}

type block struct{ cut, hi int }

// Fit fits a model to the NaN-free segments ys ([seg][T][NY]) and us
// ([seg][T][NU]).
func Fit(ctx context.Context, ys, us [][][]float64, cfg Config) (*Model, *Report, error) {
	if len(ys) == 0 || len(ys) != len(us) || len(ys[0]) == 0 {
		return nil, nil, errors.New("nss: no training segment")
	}
	if cfg.Order < 1 || cfg.NA < 1 || cfg.NB < 1 {
		return nil, nil, fmt.Errorf("nss: order %d, na %d, nb %d (all ≥ 1)", cfg.Order, cfg.NA, cfg.NB)
	}
	for _, h := range cfg.Hidden {
		if h < 1 {
			return nil, nil, errors.New("nss: a hidden layer needs at least one unit")
		}
	}
	if cfg.SeqLen < 1 {
		cfg.SeqLen = 50
	}
	if cfg.Batch < 1 {
		cfg.Batch = 16
	}
	if !(cfg.LR > 0) {
		cfg.LR = 1e-3
	}
	for _, f := range []struct {
		name string
		v    *float64
	}{{"lrLinear", &cfg.LRLinear}, {"lrTransition", &cfg.LRTransition}} {
		switch {
		case *f.v == 0:
			*f.v = 1
		case !(*f.v > 0) || math.IsInf(*f.v, 0):
			return nil, nil, fmt.Errorf("nss: %s %g (a step factor > 0)", f.name, *f.v)
		}
	}
	if !(cfg.ValShare > 0 && cfg.ValShare < 1) {
		cfg.ValShare = 0.2
	}
	switch cfg.Select {
	case "", SelectTail, SelectRecord:
	default:
		return nil, nil, fmt.Errorf("nss: select %q, want %q or %q", cfg.Select, SelectTail, SelectRecord)
	}
	workers := cfg.Workers
	if workers < 1 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, cfg.Batch)
	m := &Model{N: cfg.Order, NA: cfg.NA, NB: cfg.NB, NY: len(ys[0][0]), NU: len(us[0][0]), Feedthrough: cfg.Feedthrough, Hidden: append([]int{}, cfg.Hidden...)}
	lag := m.Lag()
	start := time.Now()

	blocks := make([]block, len(ys))
	var trainSamples, valSamples int
	for s := range ys {
		T := len(ys[s])
		cut := T - int(math.Round(cfg.ValShare*float64(T)))
		if T-cut < 10 || cut-lag < cfg.SeqLen {
			cut = T
		}
		blocks[s] = block{cut, T}
		if cut-lag >= cfg.SeqLen {
			trainSamples += cut - lag
		}
		if cut < T {
			valSamples += T - cut
		}
	}
	if trainSamples == 0 {
		return nil, nil, fmt.Errorf("nss: no training segment longer than %d + seqLen %d rows", lag, cfg.SeqLen)
	}
	if valSamples == 0 {
		return nil, nil, errors.New("nss: the training segments are too short to hold out a validation tail")
	}
	trY, trU := make([][][]float64, 0, len(ys)), make([][][]float64, 0, len(ys))
	for s, b := range blocks {
		if b.cut-lag >= cfg.SeqLen {
			trY, trU = append(trY, ys[s][:b.cut]), append(trU, us[s][:b.cut])
		}
	}

	l := m.layout()
	m.P = make([]float64, l.total)
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6e7373))
	rep := &Report{TrainSamples: trainSamples, ValSamples: valSamples, Stop: "epochs", LinearInit: cfg.LinearInit}
	if cfg.LinearInit {
		ss, err := linear.FitSubspaceSegments(trY, trU, linear.SubspaceOptions{Order: cfg.Order, Feedthrough: cfg.Feedthrough, Refine: cfg.Refine})
		if err != nil {
			return nil, nil, fmt.Errorf("nss: linear initialisation: %w", err)
		}
		if ss.N != cfg.Order {
			return nil, nil, fmt.Errorf("nss: linear initialisation of order %d, want %d", ss.N, cfg.Order)
		}
		rep.LinearTrainMSE = ss.TrainMSE
		if err := m.initLinear(ss, trY, trU); err != nil {
			return nil, nil, err
		}
		l.f.Glorot(m.P, rng, 0)
		l.h.Glorot(m.P, rng, 0)
		l.enc.Glorot(m.P, rng, 0)
	} else {
		m.UMean, m.UStd = stats(trU, m.NU)
		m.YMean, m.YStd = stats(trY, m.NY)
		m.initRandom(rng)
	}
	mask := make([]bool, l.total)
	for i := range mask {
		mask[i] = cfg.Feedthrough || i < l.oD || i >= l.oE
	}
	uns, yns := make([][][]float64, len(ys)), make([][][]float64, len(ys))
	for s := range ys {
		uns[s], yns[s] = normalise(us[s], ys[s], m.UMean, m.UStd, m.YMean, m.YStd)
	}

	valNRMSE := func() float64 {
		acc := score.NewNRMSE(m.NY)
		for s, b := range blocks {
			if (b.cut >= b.hi && cfg.Select != SelectRecord) || b.hi <= lag {
				continue
			}
			lo, from := b.cut-lag, b.cut
			if cfg.Select == SelectRecord {
				lo, from = 0, lag
			}
			sim := m.Simulate(us[s][lo:b.hi], ys[s][lo:from])
			for t := from; t < b.hi; t++ {
				acc.Add(sim[t-lo], ys[s][t])
			}
		}
		return acc.Mean()
	}
	rep.InitValNRMSE = valNRMSE()
	rep.ValNRMSE = rep.InitValNRMSE
	best := append([]float64(nil), m.P...)

	opt := mlp.NewAdam(l.total, cfg.LR)
	opt.Mask = mask
	if cfg.LRLinear != 1 || cfg.LRTransition != 1 {
		opt.Scale = make([]float64, l.total)
		for i := range opt.Scale {
			opt.Scale[i] = 1
		}
		for i := l.oA; i < l.f.Base; i++ { // A, B, C, D, E, e0
			opt.Scale[i] = cfg.LRLinear
		}
		for i := l.f.Base; i < l.f.Base+l.f.Len(); i++ {
			opt.Scale[i] = cfg.LRTransition
		}
	}
	L, B := cfg.SeqLen, cfg.Batch
	ws := make([]*work, workers)
	for i := range ws {
		ws[i] = l.newWork(L)
	}
	grads := make([][]float64, B)
	for i := range grads {
		grads[i] = make([]float64, l.total)
	}
	g := make([]float64, l.total)
	sses, oks := make([]float64, B), make([]bool, B)
	var starts [][2]int
	since := 0
	for ep := 1; ep <= cfg.Epochs; ep++ {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		starts = starts[:0]
		for s, b := range blocks {
			if b.cut-lag < L {
				continue
			}
			off := rng.IntN(L)
			if b.cut-lag-off < L {
				off = 0
			}
			for t0 := lag + off; t0+L <= b.cut; t0 += L {
				starts = append(starts, [2]int{s, t0})
			}
		}
		rng.Shuffle(len(starts), func(i, j int) { starts[i], starts[j] = starts[j], starts[i] })
		loss, cnt := 0.0, 0
		for lo := 0; lo < len(starts); lo += B {
			batch := starts[lo:min(len(starts), lo+B)]
			norm := 2 / float64(len(batch)*L*m.NY)
			var wg sync.WaitGroup
			for wi := 0; wi < workers; wi++ {
				wg.Add(1)
				go func(wi int) {
					defer wg.Done()
					for i := wi; i < len(batch); i += workers {
						clear(grads[i])
						sq := batch[i]
						sses[i], oks[i] = l.sequence(ws[wi], m.P, m, yns[sq[0]], uns[sq[0]], sq[1], L, norm, grads[i])
					}
				}(wi)
			}
			wg.Wait()
			// fixed reduction order: the sum does not depend on the workers
			clear(g)
			for i := range batch {
				if !oks[i] {
					continue
				}
				loss += sses[i]
				cnt += L * m.NY
				gi := grads[i]
				for k, v := range gi {
					g[k] += v
				}
			}
			opt.Step(m.P, g)
		}
		trainLoss := math.Inf(1)
		if cnt > 0 {
			trainLoss = loss / float64(cnt)
		}
		rep.Epochs = ep
		v := valNRMSE()
		if v < rep.ValNRMSE {
			rep.ValNRMSE, rep.BestEpoch, rep.TrainLoss = v, ep, trainLoss
			copy(best, m.P)
			since = 0
		} else {
			since++
		}
		if cfg.Progress != nil {
			if err := cfg.Progress(ep, trainLoss, v); err != nil {
				return nil, nil, err
			}
		}
		if cfg.Patience > 0 && since >= cfg.Patience {
			rep.Stop = "patience"
			break
		}
		if cfg.Budget > 0 && time.Since(start) >= cfg.Budget {
			rep.Stop = "budget"
			break
		}
	}
	copy(m.P, best)
	return m, rep, nil
}

// initLinear takes the normalisation and A, B, C, D of the subspace model
// ss and fits the linear encoder E, e0 by least squares: the states ss
// simulates over the training segments (each from its estimated initial
// state) regressed on the encoder's inputs.
func (m *Model) initLinear(ss *linear.StateSpace, ys, us [][][]float64) error {
	l := m.layout()
	n, ny, nu := l.n, l.ny, l.nu
	m.UMean, m.UStd = append([]float64{}, ss.UMean...), append([]float64{}, ss.UStd...)
	m.YMean, m.YStd = append([]float64{}, ss.YMean...), append([]float64{}, ss.YStd...)
	for i := 0; i < n; i++ {
		for k := 0; k < n; k++ {
			m.P[l.oA+i*n+k] = ss.A.At(i, k)
		}
		for j := 0; j < nu; j++ {
			m.P[l.oB+i*nu+j] = ss.B.At(i, j)
		}
	}
	for o := 0; o < ny; o++ {
		for i := 0; i < n; i++ {
			m.P[l.oC+o*n+i] = ss.C.At(o, i)
		}
		if m.Feedthrough {
			for j := 0; j < nu; j++ {
				m.P[l.oD+o*nu+j] = ss.D.At(o, j)
			}
		}
	}
	lag, d := m.Lag(), l.dE
	rows := 0
	for _, y := range ys {
		rows += max(0, len(y)-lag)
	}
	X := mat.NewDense(rows+d+1, d+1, nil)
	Y := mat.NewDense(rows+d+1, n, nil)
	phi := make([]float64, d)
	r := 0
	for s := range ys {
		x0 := ss.EstimateX0(ys[s], us[s], min(len(ys[s]), 10*n+20))
		_, xs := ss.SimulateStates(us[s], x0)
		un, yn := normalise(us[s], ys[s], m.UMean, m.UStd, m.YMean, m.YStd)
		for t := lag; t < len(ys[s]); t++ {
			m.regressor(phi, yn, un, t)
			for k, v := range phi {
				X.Set(r, k, v)
			}
			X.Set(r, d, 1)
			for i := 0; i < n; i++ {
				Y.Set(r, i, xs[t][i])
			}
			r++
		}
	}
	ridge := math.Sqrt(1e-8 * float64(max(rows, 1)))
	for k := 0; k <= d; k++ {
		X.Set(rows+k, k, ridge)
	}
	th, err := lsq.Solve(X, Y)
	if err != nil {
		return fmt.Errorf("nss: linear encoder: %w", err)
	}
	for i := 0; i < n; i++ {
		for k := 0; k < d; k++ {
			m.P[l.oE+i*d+k] = th.At(k, i)
		}
		m.P[l.o0+i] = th.At(d, i)
	}
	if !allFinite(m.P) {
		return errors.New("nss: non-finite linear initialisation")
	}
	return nil
}

// initRandom draws a small random start: A = 0.5 I, B, C, D and E
// uniform in ±1/√fan-in, the networks Glorot with small output layers.
func (m *Model) initRandom(rng *rand.Rand) {
	l := m.layout()
	n, nu, ny := l.n, l.nu, l.ny
	for i := 0; i < n; i++ {
		m.P[l.oA+i*n+i] = 0.5
	}
	fill := func(v []float64, fanIn int) {
		a := 1 / math.Sqrt(float64(fanIn))
		for i := range v {
			v[i] = a * (2*rng.Float64() - 1)
		}
	}
	fill(m.P[l.oB:l.oC], nu)
	fill(m.P[l.oC:l.oD], n)
	if m.Feedthrough {
		fill(m.P[l.oD:l.oE], nu)
	}
	_ = ny
	fill(m.P[l.oE:l.o0], l.dE)
	l.f.Glorot(m.P, rng, 0.01)
	l.h.Glorot(m.P, rng, 0.01)
	l.enc.Glorot(m.P, rng, 0.01)
}

// stats are the column means and standard deviations (1 where zero).
func stats(x [][][]float64, nc int) (mean, std []float64) {
	mean, std = make([]float64, nc), make([]float64, nc)
	cnt := 0
	for _, seg := range x {
		for _, r := range seg {
			for j := 0; j < nc; j++ {
				mean[j] += r[j]
			}
			cnt++
		}
	}
	for j := range mean {
		mean[j] /= float64(max(cnt, 1))
	}
	for _, seg := range x {
		for _, r := range seg {
			for j := 0; j < nc; j++ {
				e := r[j] - mean[j]
				std[j] += e * e
			}
		}
	}
	for j := range std {
		std[j] = math.Sqrt(std[j] / float64(max(cnt, 1)))
		if !(std[j] > 1e-12) {
			std[j] = 1
		}
	}
	return mean, std
}

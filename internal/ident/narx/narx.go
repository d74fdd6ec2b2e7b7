// Package narx fits NARX models with a neural network,
//
//	y(t) = θ·φ(t) + c + f(φ(t)),
//	φ(t) = [y(t−1) … y(t−na), u(t−nk) … u(t−nk−nb+1)],
//
// in units normalised by the training statistics: a linear ARX skip term
// (θ, c) fitted first by least squares and an MLP f (tanh hidden layers,
// linear output) that learns the residual. The MLP's output layer starts
// at zero, so the model starts as the ARX model; it is trained one step
// ahead by Adam on minibatches and the epoch kept is the one with the
// lowest free-run NRMSE on a held-out tail block of every training
// segment (epoch 0, the ARX model alone, included): on that block the
// model is never worse than its ARX initialisation.
//
// Training is deterministic for a seed on one machine (one goroutine,
// math/rand/v2 PCG from the seed), unless the time budget stops it.
package narx

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/aml-project/aml/internal/ident/lsq"
	"github.com/aml-project/aml/internal/ident/score"
)

// Config are the structure and the training settings.
type Config struct {
	NA, NB, NK int   // output lags, input lags, input delay
	Hidden     []int // hidden layer sizes (tanh)
	Epochs     int   // maximum epochs
	Batch      int   // minibatch size
	LR         float64
	Seed       uint64
	Patience   int           // epochs without a better validation before stopping (0: none)
	ValShare   float64       // tail share of every segment held out (0: 0.2)
	Budget     time.Duration // training-time budget (0: none)
	Ridge      float64       // ridge of the ARX fit, relative (0: 1e-8)
	// FineTuneEpochs of simulation-error training follow the one-step
	// epochs (0: none): subsequences of SeqLen steps (0: 40), minibatches
	// of SeqBatch (0: 16), learning rate FineTuneLR (0: LR); with a
	// budget the one-step phase then gets half of it.
	FineTuneEpochs int
	SeqLen         int
	SeqBatch       int
	FineTuneLR     float64
	// Progress, when set, is called after every epoch; an error stops
	// the training with that error.
	Progress func(epoch int, trainLoss, valNRMSE float64) error
}

// Layer is one dense layer: W [Out×In] row-major, B [Out].
type Layer struct {
	In, Out int
	W, B    []float64
}

// Model is a fitted NARX model.
type Model struct {
	NA, NB, NK   int
	NY, NU       int
	UMean, UStd  []float64
	YMean, YStd  []float64
	Lin          [][]float64 // [NY][Dim()+1]: θ then the intercept c (normalised units)
	Layers       []Layer     // hidden layers (tanh) then the output layer (linear)
	scratch      [][]float64
	phi, linPart []float64
}

// Report describes a training.
type Report struct {
	Epochs       int     `json:"epochs"`    // epochs run
	BestEpoch    int     `json:"bestEpoch"` // epoch kept (0: ARX alone)
	ARXValNRMSE  float64 `json:"arxValNrmse"`
	ValNRMSE     float64 `json:"valNrmse"` // of the epoch kept
	TrainLoss    float64 `json:"trainLoss"`
	TrainSamples int     `json:"trainSamples"`
	ValSamples   int     `json:"valSamples"`
	Stop         string  `json:"stop"` // epochs, patience or budget
	// FineTuneEpochs are the simulation-error epochs run, FineTuneStop
	// why they stopped and BestPhase the phase of the epoch kept (arx,
	// one_step or fine_tune).
	FineTuneEpochs int    `json:"fineTuneEpochs"`
	FineTuneStop   string `json:"fineTuneStop,omitempty"`
	BestPhase      string `json:"bestPhase"`
}

// Lag is the number of past steps a prediction needs.
func (m *Model) Lag() int { return max(m.NA, m.NK+m.NB-1, 1) }

// Dim is the length of the regressor φ.
func (m *Model) Dim() int { return m.NY*m.NA + m.NU*m.NB }

// Check validates the model's shapes and values.
func (m *Model) Check() error {
	if m.NA < 1 || m.NB < 1 || m.NK < 0 || m.NY < 1 || m.NU < 1 {
		return fmt.Errorf("narx: na %d, nb %d, nk %d, %d outputs, %d inputs", m.NA, m.NB, m.NK, m.NY, m.NU)
	}
	if len(m.UMean) != m.NU || len(m.UStd) != m.NU || len(m.YMean) != m.NY || len(m.YStd) != m.NY || len(m.Lin) != m.NY {
		return errors.New("narx: normalisation or linear term of the wrong size")
	}
	d := m.Dim()
	for _, r := range m.Lin {
		if len(r) != d+1 {
			return fmt.Errorf("narx: linear row of %d values, want %d", len(r), d+1)
		}
	}
	if len(m.Layers) == 0 {
		return errors.New("narx: no layer")
	}
	in := d
	for i, l := range m.Layers {
		if l.In != in || l.Out < 1 || len(l.W) != l.In*l.Out || len(l.B) != l.Out {
			return fmt.Errorf("narx: layer %d of the wrong shape", i)
		}
		in = l.Out
	}
	if in != m.NY {
		return fmt.Errorf("narx: output layer of %d values, %d outputs", in, m.NY)
	}
	for _, v := range [][]float64{m.UMean, m.UStd, m.YMean, m.YStd} {
		if !allFinite(v) {
			return errors.New("narx: non-finite normalisation")
		}
	}
	for _, s := range append(append([]float64{}, m.UStd...), m.YStd...) {
		if !(s > 0) {
			return errors.New("narx: non-positive scale")
		}
	}
	for _, r := range m.Lin {
		if !allFinite(r) {
			return errors.New("narx: non-finite linear term")
		}
	}
	for _, l := range m.Layers {
		if !allFinite(l.W) || !allFinite(l.B) {
			return errors.New("narx: non-finite weight")
		}
	}
	return nil
}

func allFinite(v []float64) bool {
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// regressor fills phi with φ(t) from normalised outputs yn and inputs un.
func (m *Model) regressor(phi []float64, yn, un [][]float64, t int) {
	k := 0
	for o := 0; o < m.NY; o++ {
		for i := 1; i <= m.NA; i++ {
			phi[k] = yn[t-i][o]
			k++
		}
	}
	for j := 0; j < m.NU; j++ {
		for i := 0; i < m.NB; i++ {
			phi[k] = un[t-m.NK-i][j]
			k++
		}
	}
}

func (m *Model) ensureScratch() {
	if m.scratch != nil {
		return
	}
	m.scratch = make([][]float64, len(m.Layers))
	for i, l := range m.Layers {
		m.scratch[i] = make([]float64, l.Out)
	}
	m.phi = make([]float64, m.Dim())
	m.linPart = make([]float64, m.NY)
}

// step writes the normalised prediction for regressor phi into out.
func (m *Model) step(phi, out []float64) {
	m.ensureScratch()
	m.stepWith(phi, out, m.scratch)
}

// stepWith is step with the caller's layer buffers (scratch[i] of the
// size of layer i's output): the model is only read.
func (m *Model) stepWith(phi, out []float64, scratch [][]float64) {
	d := len(phi)
	for o, r := range m.Lin {
		a := r[d]
		for k, v := range phi {
			a += r[k] * v
		}
		out[o] = a
	}
	x := phi
	last := len(m.Layers) - 1
	for li, l := range m.Layers {
		h := scratch[li]
		for j := 0; j < l.Out; j++ {
			w := l.W[j*l.In : (j+1)*l.In : (j+1)*l.In]
			a := l.B[j]
			for k, v := range x[:l.In] {
				a += w[k] * v
			}
			if li < last {
				a = math.Tanh(a)
			}
			h[j] = a
		}
		x = h
	}
	for o := range out[:m.NY] {
		out[o] += x[o]
	}
}

func (m *Model) normalise(u, y [][]float64) (un, yn [][]float64) {
	un = make([][]float64, len(u))
	for t, r := range u {
		un[t] = make([]float64, m.NU)
		for j := range un[t] {
			un[t][j] = (r[j] - m.UMean[j]) / m.UStd[j]
		}
	}
	yn = make([][]float64, len(y))
	for t, r := range y {
		yn[t] = make([]float64, m.NY)
		for o := range yn[t] {
			yn[t][o] = (r[o] - m.YMean[o]) / m.YStd[o]
		}
	}
	return un, yn
}

// Simulate runs the model in free run over the inputs u (len(u) rows of
// NU) from the measured outputs y0 (the first len(y0) rows, returned as
// given): every later output is predicted from the inputs and the
// model's own past predictions. With fewer than Lag() measured rows (but
// at least one) the first input and output are held before the first
// step.
func (m *Model) Simulate(u, y0 [][]float64) [][]float64 {
	lag := m.Lag()
	pad := 0
	if len(y0) < lag && len(y0) > 0 && len(u) > 0 {
		pad = lag - len(y0)
		up := make([][]float64, 0, pad+len(u))
		yp := make([][]float64, 0, pad+len(y0))
		for i := 0; i < pad; i++ {
			up, yp = append(up, u[0]), append(yp, y0[0])
		}
		u, y0 = append(up, u...), append(yp, y0...)
	}
	un, yn0 := m.normalise(u, y0)
	yn := make([][]float64, len(u))
	copy(yn, yn0)
	m.ensureScratch()
	for t := len(y0); t < len(u); t++ {
		yn[t] = make([]float64, m.NY)
		if t < lag {
			copy(yn[t], yn[max(0, len(y0)-1)])
			continue
		}
		m.regressor(m.phi, yn, un, t)
		m.step(m.phi, yn[t])
		for o, v := range yn[t] {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				yn[t][o] = math.NaN()
			}
		}
	}
	out := make([][]float64, len(u)-pad)
	for t := range out {
		out[t] = make([]float64, m.NY)
		if t+pad < len(y0) {
			copy(out[t], y0[t+pad])
			continue
		}
		for o := range out[t] {
			out[t][o] = yn[t+pad][o]*m.YStd[o] + m.YMean[o]
		}
	}
	return out
}

// Fit fits a model to the NaN-free segments ys ([seg][T][NY]) and us
// ([seg][T][NU]).
func Fit(ctx context.Context, ys, us [][][]float64, cfg Config) (*Model, *Report, error) {
	if len(ys) == 0 || len(ys) != len(us) {
		return nil, nil, errors.New("narx: no training segment")
	}
	if cfg.NA < 1 || cfg.NB < 1 || cfg.NK < 0 {
		return nil, nil, fmt.Errorf("narx: na %d, nb %d, nk %d (na, nb ≥ 1, nk ≥ 0)", cfg.NA, cfg.NB, cfg.NK)
	}
	for _, h := range cfg.Hidden {
		if h < 1 {
			return nil, nil, errors.New("narx: a hidden layer needs at least one unit")
		}
	}
	if cfg.Batch < 1 {
		cfg.Batch = 64
	}
	if !(cfg.LR > 0) {
		cfg.LR = 1e-3
	}
	if !(cfg.ValShare > 0 && cfg.ValShare < 1) {
		cfg.ValShare = 0.2
	}
	if !(cfg.Ridge > 0) {
		cfg.Ridge = 1e-8
	}
	m := &Model{NA: cfg.NA, NB: cfg.NB, NK: cfg.NK, NY: len(ys[0][0]), NU: len(us[0][0])}
	lag := m.Lag()
	start := time.Now()

	// train rows [0, cut) of each segment, validation rows [cut, T) started
	// from the lag rows before cut
	blocks := make([]block, len(ys))
	var trainSamples, valSamples int
	for s := range ys {
		T := len(ys[s])
		cut := T - int(math.Round(cfg.ValShare*float64(T)))
		if T-cut < 10 || cut-lag < 10 {
			cut = T
		}
		blocks[s] = block{cut, T}
		trainSamples += max(0, cut-lag)
		if cut < T {
			valSamples += T - cut
		}
	}
	if trainSamples < 10 {
		return nil, nil, fmt.Errorf("narx: %d training samples", trainSamples)
	}
	if valSamples == 0 {
		return nil, nil, errors.New("narx: the training segments are too short to hold out a validation tail")
	}

	// normalisation from the train rows
	m.UMean, m.UStd = stats(us, func(s int) int { return blocks[s].cut }, m.NU)
	m.YMean, m.YStd = stats(ys, func(s int) int { return blocks[s].cut }, m.NY)
	uns, yns := make([][][]float64, len(ys)), make([][][]float64, len(ys))
	for s := range ys {
		uns[s], yns[s] = m.normalise(us[s], ys[s])
	}

	// regressors and targets
	d := m.Dim()
	X := make([]float64, 0, trainSamples*d)
	Y := make([]float64, 0, trainSamples*m.NY)
	phi := make([]float64, d)
	for s, b := range blocks {
		for t := lag; t < b.cut; t++ {
			m.regressor(phi, yns[s], uns[s], t)
			X = append(X, phi...)
			Y = append(Y, yns[s][t]...)
		}
	}
	n := len(X) / d

	// linear ARX term by ridge least squares (a scaled identity appended)
	A := mat.NewDense(n+d, d+1, nil)
	B := mat.NewDense(n+d, m.NY, nil)
	for i := 0; i < n; i++ {
		for k := 0; k < d; k++ {
			A.Set(i, k, X[i*d+k])
		}
		A.Set(i, d, 1)
		for o := 0; o < m.NY; o++ {
			B.Set(i, o, Y[i*m.NY+o])
		}
	}
	r := math.Sqrt(cfg.Ridge * float64(n))
	for k := 0; k < d; k++ {
		A.Set(n+k, k, r)
	}
	theta, err := lsq.Solve(A, B)
	if err != nil {
		return nil, nil, fmt.Errorf("narx: ARX fit: %w", err)
	}
	m.Lin = make([][]float64, m.NY)
	for o := range m.Lin {
		m.Lin[o] = make([]float64, d+1)
		for k := 0; k <= d; k++ {
			m.Lin[o][k] = theta.At(k, o)
		}
	}
	// residual targets
	R := make([]float64, len(Y))
	for i := 0; i < n; i++ {
		x := X[i*d : (i+1)*d]
		for o, row := range m.Lin {
			a := row[d]
			for k, v := range x {
				a += row[k] * v
			}
			R[i*m.NY+o] = Y[i*m.NY+o] - a
		}
	}

	// the network: Glorot-uniform hidden layers, a zero output layer
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x6e617278))
	sizes := append(append([]int{d}, cfg.Hidden...), m.NY)
	net := newNet(sizes)
	for l := 0; l < len(sizes)-2; l++ {
		a := math.Sqrt(6 / float64(sizes[l]+sizes[l+1]))
		w := net.w(l)
		for i := range w {
			w[i] = a * (2*rng.Float64() - 1)
		}
	}
	net.into(m)

	// validation: free-run NRMSE on the tail blocks
	valNRMSE := func() float64 {
		acc := score.NewNRMSE(m.NY)
		for s, b := range blocks {
			if b.cut >= b.hi {
				continue
			}
			lo := b.cut - lag
			sim := m.Simulate(us[s][lo:b.hi], ys[s][lo:b.cut])
			for t := b.cut; t < b.hi; t++ {
				acc.Add(sim[t-lo], ys[s][t])
			}
		}
		return acc.Mean()
	}
	rep := &Report{TrainSamples: n, ValSamples: valSamples, Stop: "epochs", BestPhase: "arx"}
	rep.ARXValNRMSE = valNRMSE()
	rep.ValNRMSE = rep.ARXValNRMSE
	best := append([]float64(nil), net.p...)
	// keep records epoch ep's validation v; it reports whether training
	// goes on (patience) and the stop reason otherwise
	since := 0
	keep := func(ep int, phase string, loss, v float64, deadline time.Duration) (string, error) {
		if v < rep.ValNRMSE {
			rep.ValNRMSE, rep.BestEpoch, rep.TrainLoss, rep.BestPhase = v, ep, loss, phase
			copy(best, net.p)
			since = 0
		} else {
			since++
		}
		if cfg.Progress != nil {
			if err := cfg.Progress(ep, loss, v); err != nil {
				return "", err
			}
		}
		if cfg.Patience > 0 && since >= cfg.Patience {
			return "patience", nil
		}
		if deadline > 0 && time.Since(start) >= deadline {
			return "budget", nil
		}
		return "", nil
	}
	oneStepBudget := cfg.Budget
	if cfg.FineTuneEpochs > 0 {
		oneStepBudget /= 2
	}
	tr := newAdam(net, cfg.LR, cfg.Batch, n, rng)
	for ep := 1; ep <= cfg.Epochs; ep++ {
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		loss := tr.epoch(X, R)
		rep.Epochs = ep
		stop, err := keep(ep, "one_step", loss, valNRMSE(), oneStepBudget)
		if err != nil {
			return nil, nil, err
		}
		if stop != "" {
			rep.Stop = stop
			break
		}
	}
	if cfg.FineTuneEpochs > 0 {
		copy(net.p, best)
		L := cfg.SeqLen
		if L < 1 {
			L = 40
		}
		sb := cfg.SeqBatch
		if sb < 1 {
			sb = 16
		}
		lr := cfg.FineTuneLR
		if !(lr > 0) {
			lr = cfg.LR
		}
		st := newSimTrainer(newAdam(net, lr, sb, 0, rng), m, L, sb)
		since = 0
		rep.FineTuneStop = "epochs"
		for ep := 1; ep <= cfg.FineTuneEpochs; ep++ {
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
			loss := st.epoch(yns, uns, blocks)
			rep.FineTuneEpochs = ep
			stop, err := keep(rep.Epochs+ep, "fine_tune", loss, valNRMSE(), cfg.Budget)
			if err != nil {
				return nil, nil, err
			}
			if stop != "" {
				rep.FineTuneStop = stop
				break
			}
		}
	}
	copy(net.p, best)
	net.into(m)
	return m, rep, nil
}

// stats are the column means and standard deviations (1 where zero) of
// the first rows(s) rows of every segment.
func stats(x [][][]float64, rows func(s int) int, nc int) (mean, std []float64) {
	mean, std = make([]float64, nc), make([]float64, nc)
	cnt := 0
	for s, seg := range x {
		for _, r := range seg[:rows(s)] {
			for j := 0; j < nc; j++ {
				mean[j] += r[j]
			}
			cnt++
		}
	}
	for j := range mean {
		mean[j] /= float64(max(cnt, 1))
	}
	for s, seg := range x {
		for _, r := range seg[:rows(s)] {
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

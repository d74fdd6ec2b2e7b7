package hybrid

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
)

// ResidualOptions configure [TrainResidual].
type ResidualOptions struct {
	// Members of the ensemble (default 5); member i is seeded Seed+i.
	Members int
	Hidden  int // hidden tanh units (32)
	// Lags and Stride: the network sees the physics quantities and inputs
	// at steps k, k−Stride, …, k−(Lags−1)·Stride (clamped at the first
	// step). Defaults 6 and 1.
	Lags, Stride int
	// Scale bounds the correction: residualScale·tanh(·) in output
	// standard deviations (0.5).
	Scale    float64
	Epochs   int     // maximum epochs (200)
	Batch    int     // minibatch size (64)
	Patience int     // early stopping: epochs without improvement (40)
	LR       float64 // Adam step size (0.002)
	L2       float64 // decoupled weight decay (0)
	Seed     int64
	Workers  int // members trained in parallel (GOMAXPROCS)
}

// DefaultResidualOptions are the defaults.
func DefaultResidualOptions() ResidualOptions {
	return ResidualOptions{Members: 5, Hidden: 32, Lags: 6, Stride: 1, Scale: 0.5, Epochs: 200, Batch: 64, Patience: 40, LR: 0.002}
}

func (o *ResidualOptions) fill() {
	d := DefaultResidualOptions()
	if o.Members <= 0 {
		o.Members = d.Members
	}
	if o.Hidden <= 0 {
		o.Hidden = d.Hidden
	}
	if o.Lags <= 0 {
		o.Lags = d.Lags
	}
	if o.Stride <= 0 {
		o.Stride = d.Stride
	}
	if !(o.Scale > 0) {
		o.Scale = d.Scale
	}
	if o.Epochs <= 0 {
		o.Epochs = d.Epochs
	}
	if o.Batch <= 0 {
		o.Batch = d.Batch
	}
	if o.Patience <= 0 {
		o.Patience = d.Patience
	}
	if !(o.LR > 0) {
		o.LR = d.LR
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
}

// MemberInfo describes how one member was trained.
type MemberInfo struct {
	Seed      int64   `json:"seed"`
	Epochs    int     `json:"epochs"`    // epochs run
	BestEpoch int     `json:"bestEpoch"` // epoch of the kept weights (0: the zero network)
	ValScore  float64 `json:"valScore"`  // validation score of the kept weights
	ValZero   float64 `json:"valZero"`   // validation score of the physics alone
	TrainLoss float64 `json:"trainLoss"` // last epoch's training loss
}

// Ensemble is the residual model: K networks over the same features.
// Features of step k are, for every lag l, the model outputs (obs and
// guards), the states and the controls at step k−l·Stride of the physics
// simulation, standardised with FeatMean and FeatStd (one entry per base
// quantity, shared by the lags). Targets are (y − y_phys)/OutStd.
type Ensemble struct {
	Lags, Stride        int
	Scale               float64
	NOut, NState, NCtrl int
	FeatMean, FeatStd   []float64
	Members             []*Net
	Info                []MemberInfo
}

func (e *Ensemble) base() int { return e.NOut + e.NState + e.NCtrl }

// Dim is the network input size.
func (e *Ensemble) Dim() int { return e.Lags * e.base() }

// Features builds the T×Dim feature rows of a simulated stretch.
func (e *Ensemble) Features(sys *System, t *traj, u [][]float64, T int) []float64 {
	nb, dim := e.base(), e.Dim()
	raw := make([]float64, T*nb)
	for k := 0; k < T; k++ {
		row := raw[k*nb : (k+1)*nb]
		copy(row, t.O[k*sys.nout:(k+1)*sys.nout])
		copy(row[sys.nout:], t.X[k*sys.nx:(k+1)*sys.nx])
		copy(row[sys.nout+sys.nx:], u[k])
		for i := range row {
			row[i] = (row[i] - e.FeatMean[i]) / e.FeatStd[i]
		}
	}
	f := make([]float64, T*dim)
	for k := 0; k < T; k++ {
		for l := 0; l < e.Lags; l++ {
			kk := max(0, k-l*e.Stride)
			copy(f[k*dim+l*nb:k*dim+(l+1)*nb], raw[kk*nb:(kk+1)*nb])
		}
	}
	return f
}

// Predict returns the members' mean correction and their spread (standard
// deviation), T×Out each, in output standard deviations.
func (e *Ensemble) Predict(feat []float64, T int) (mean, spread []float64) {
	if len(e.Members) == 0 {
		return nil, nil
	}
	n0 := e.Members[0]
	dim, ny := n0.In, n0.Out
	mean = make([]float64, T*ny)
	sq := make([]float64, T*ny)
	h := make([]float64, n0.Hidden)
	y := make([]float64, ny)
	for _, n := range e.Members {
		if len(h) < n.Hidden {
			h = make([]float64, n.Hidden)
		}
		for k := 0; k < T; k++ {
			n.Forward(feat[k*dim:(k+1)*dim], h[:n.Hidden], y)
			for o, v := range y {
				mean[k*ny+o] += v
				sq[k*ny+o] += v * v
			}
		}
	}
	K := float64(len(e.Members))
	spread = make([]float64, T*ny)
	for i := range mean {
		mean[i] /= K
		spread[i] = math.Sqrt(math.Max(0, sq[i]/K-mean[i]*mean[i]))
	}
	return mean, spread
}

// ResidualData is the residual network's data: features [N×dim], targets
// [N×ny] (NaN where not measured) and, per sample, its segment and its
// position in the segment as a share in [0, 1).
type ResidualData struct {
	Feat, Target []float64
	Seg          []int
	Pos          []float64
	N            int
}

func (d *ResidualData) add(feat []float64, tgt []float64, seg int, T int) {
	d.Feat = append(d.Feat, feat...)
	d.Target = append(d.Target, tgt...)
	for k := 0; k < T; k++ {
		d.Seg = append(d.Seg, seg)
		d.Pos = append(d.Pos, float64(k)/float64(T))
	}
	d.N += T
}

// simulateSegments simulates every segment as [Model.Simulate] does and
// returns the trajectories.
func (m *Model) simulateSegments(segs []*Segment, nInit int) ([]*traj, error) {
	sim, err := m.NewSim()
	if err != nil {
		return nil, err
	}
	out := make([]*traj, len(segs))
	for b, g := range segs {
		x0 := m.InitialState(sim, g.U, g.D, g.Y, nInit)
		t := m.Sys.newTraj(g.Len())
		m.Sys.simulate(sim, x0, g.U, g.D, g.Len(), t)
		out[b] = t
	}
	return out, nil
}

// residualData turns simulated segments into features and targets.
func (m *Model) residualData(e *Ensemble, segs []*Segment, trajs []*traj) *ResidualData {
	d := &ResidualData{}
	ny := m.Sys.ny
	for b, g := range segs {
		T := g.Len()
		t := trajs[b]
		f := e.Features(m.Sys, t, g.U, T)
		tgt := make([]float64, T*ny)
		for k := 0; k < T; k++ {
			for o := 0; o < ny; o++ {
				y := g.Y[k][o]
				tgt[k*ny+o] = math.NaN()
				if finite(y) && k < t.fail {
					tgt[k*ny+o] = (y - t.Yh[k*ny+o]) / m.OutStd[o]
				}
			}
		}
		d.add(f, tgt, b, T)
	}
	return d
}

// valScore is the mean over outputs of the RMSE (in output standard
// deviations) of physics + net over the samples idx: the validation
// free-run simulation error (the network is static in the simulation).
func valScore(n *Net, d *ResidualData, idx []int) float64 {
	ny := n.Out
	sse := make([]float64, ny)
	cnt := make([]float64, ny)
	h := make([]float64, n.Hidden)
	y := make([]float64, ny)
	for _, s := range idx {
		n.Forward(d.Feat[s*n.In:(s+1)*n.In], h, y)
		for o := 0; o < ny; o++ {
			t := d.Target[s*ny+o]
			if math.IsNaN(t) {
				continue
			}
			e := y[o] - t
			sse[o] += e * e
			cnt[o]++
		}
	}
	sc := 0.0
	for o := range sse {
		sc += math.Sqrt(sse[o] / math.Max(1, cnt[o]))
	}
	return sc / float64(ny)
}

// TrainResidual fits the residual ensemble of m on what the calibrated
// physics misses on the training segments, simulated exactly as at
// prediction time (initial state from the first nInit measured rows, then
// free run). Every member stops early on the validation simulation error:
// on the val segments when there are any, otherwise member i holds out
// the i-th of max(Members, 4) contiguous blocks of every training segment
// (so the members together use all the data). A member keeps the weights
// of its best validation epoch — the zero network, i.e. the physics
// alone, when training never beats it. m.Residual is set.
func TrainResidual(ctx context.Context, m *Model, train, val []*Segment, nInit int, opts ResidualOptions, progress func(done, total int)) (*Ensemble, error) {
	opts.fill()
	sys := m.Sys
	e := &Ensemble{Lags: opts.Lags, Stride: opts.Stride, Scale: opts.Scale, NOut: sys.nout, NState: sys.nx, NCtrl: sys.nu}
	trT, err := m.simulateSegments(train, nInit)
	if err != nil {
		return nil, err
	}
	// feature statistics over the training simulations
	nb := e.base()
	sum, sq := make([]float64, nb), make([]float64, nb)
	cnt := 0.0
	for b, g := range train {
		t := trT[b]
		for k := 0; k < g.Len(); k++ {
			for i := 0; i < nb; i++ {
				var v float64
				switch {
				case i < sys.nout:
					v = t.O[k*sys.nout+i]
				case i < sys.nout+sys.nx:
					v = t.X[k*sys.nx+i-sys.nout]
				default:
					v = g.U[k][i-sys.nout-sys.nx]
				}
				sum[i] += v
				sq[i] += v * v
			}
			cnt++
		}
	}
	e.FeatMean, e.FeatStd = make([]float64, nb), make([]float64, nb)
	for i := range sum {
		mu := sum[i] / math.Max(1, cnt)
		sd := math.Sqrt(math.Max(0, sq[i]/math.Max(1, cnt)-mu*mu))
		if !(sd > 1e-12*(1+math.Abs(mu))) || !finite(sd) {
			sd = 1
		}
		if !finite(mu) {
			mu = 0
		}
		e.FeatMean[i], e.FeatStd[i] = mu, sd
	}
	dt := m.residualData(e, train, trT)
	var dv *ResidualData
	if len(val) > 0 {
		vT, err := m.simulateSegments(val, nInit)
		if err != nil {
			return nil, err
		}
		dv = m.residualData(e, val, vT)
		if dv.N == 0 {
			dv = nil
		}
	}
	if dt.N == 0 {
		return nil, fmt.Errorf("hybrid: no training samples for the residual network")
	}
	K := opts.Members
	e.Members = make([]*Net, K)
	e.Info = make([]MemberInfo, K)
	var mu sync.Mutex
	done := 0
	var firstErr error
	parallelFor(K, min(opts.Workers, K), func(_, i int) {
		seed := opts.Seed + int64(i)
		rng := rand.New(rand.NewPCG(uint64(seed), 0x7265736964756c))
		net := NewNet(e.Dim(), opts.Hidden, sys.ny, opts.Scale, rng)
		var trIdx, vaIdx []int
		vd := dv
		if dv != nil {
			trIdx = make([]int, dt.N)
			for s := range trIdx {
				trIdx[s] = s
			}
			vaIdx = make([]int, dv.N)
			for s := range vaIdx {
				vaIdx[s] = s
			}
		} else {
			vd = dt
			nBlk := max(K, 4)
			for s := 0; s < dt.N; s++ {
				if int(dt.Pos[s]*float64(nBlk)) == i%nBlk {
					vaIdx = append(vaIdx, s)
				} else {
					trIdx = append(trIdx, s)
				}
			}
		}
		tr := newAdamTrainer(net, opts.LR, opts.L2, opts.Batch, rng)
		best := append([]float64(nil), net.P...)
		info := MemberInfo{Seed: seed}
		info.ValZero = valScore(net, vd, vaIdx)
		info.ValScore = info.ValZero
		for ep := 1; ep <= opts.Epochs; ep++ {
			if ctx.Err() != nil {
				break
			}
			info.TrainLoss = tr.epoch(dt.Feat, dt.Target, trIdx)
			info.Epochs = ep
			sc := valScore(net, vd, vaIdx)
			if sc < info.ValScore {
				info.ValScore, info.BestEpoch = sc, ep
				copy(best, net.P)
			} else if ep-info.BestEpoch >= opts.Patience {
				break
			}
		}
		copy(net.P, best)
		mu.Lock()
		defer mu.Unlock()
		if err := ctx.Err(); err != nil && firstErr == nil {
			firstErr = err
		}
		e.Members[i], e.Info[i] = net, info
		done++
		if progress != nil {
			progress(done, K)
		}
	})
	if firstErr != nil {
		return nil, firstErr
	}
	m.Residual = e
	return e, nil
}

package engine

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/twin/contract"
)

// benchCandidates are n distinct feasible candidates of plan p: the seed's
// small-step ones, then uniform random points of the trust region
// (projected like the optimiser's), seeded.
func benchCandidates(o *optimizer, n int) []*candidate {
	p := o.p
	nc := len(p.sceneCtrl)
	var out []*candidate
	base := make([]float64, len(o.slots)*nc)
	for s := range o.slots {
		copy(base[s*nc:], p.baseline)
	}
	out = append(out, &candidate{x: base})
	for c := 0; c < nc; c++ {
		for _, sign := range []float64{-1, 1} {
			x := append([]float64(nil), base...)
			x[c] += sign * p.stepMax[c]
			out = append(out, &candidate{x: o.project(x)})
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for len(out) < n {
		x := append([]float64(nil), base...)
		for i := range x {
			c := i % nc
			x[i] += (2*rng.Float64() - 1) * p.stepMax[c]
		}
		out = append(out, &candidate{x: o.project(x)})
	}
	return out
}

func benchPlan(b *testing.B) (*fixture, *plan) {
	f := getFixture(b)
	s := highSnap(b, f)
	p, err := f.twin.newPlan(contract.DefaultInjectionScene(), s, contract.DefaultInjectionObjective())
	if err != nil {
		b.Fatal(err)
	}
	return f, p
}

// BenchmarkOptimize: one optimisation's work on the simulated injection
// twin — the plan (scene/objective checks, the cached window start, the
// baseline rollout) and 200 candidates × 5 ensemble members × 60 steps,
// each rolled out from the snapshot's start with constraints on the tube,
// OOD along the trajectory and the cost, through the optimiser's own
// evaluation path (parallel on GOMAXPROCS goroutines; run with -cpu 1 for
// one core).
func BenchmarkOptimize(b *testing.B) {
	f, p0 := benchPlan(b)
	s := p0.snap
	b.ResetTimer()
	for b.Loop() {
		optimizeOnce(b, f, s)
	}
}

// optimizeOnce is one iteration of BenchmarkOptimize.
func optimizeOnce(b *testing.B, f *fixture, s *contract.TwinSnapshot) {
	p, err := f.twin.newPlan(contract.DefaultInjectionScene(), s, contract.DefaultInjectionObjective())
	if err != nil {
		b.Fatal(err)
	}
	o := &optimizer{p: p, ctx: context.Background(), seen: map[string]*candidate{}, budget: 200}
	o.slots = p.moveSlots()
	if err := o.run(benchCandidates(o, 200)); err != nil {
		b.Fatal(err)
	}
	if len(o.all) != 200 {
		b.Fatalf("%d candidates", len(o.all))
	}
}

// BenchmarkRollout: one candidate (rollout, constraints, OOD, cost).
func BenchmarkRollout(b *testing.B) {
	_, p := benchPlan(b)
	o := &optimizer{p: p, ctx: context.Background(), seen: map[string]*candidate{}, budget: 200}
	o.slots = p.moveSlots()
	c := benchCandidates(o, 8)[7]
	sc := p.newScratch()
	traj := o.expand(c.x)
	b.ResetTimer()
	for b.Loop() {
		p.evaluate(sc, traj, false)
	}
}

// BenchmarkOptimizeNaive is the path without a shared start: every one of
// the 200 candidates is predicted as PredictBatch predicts a window —
// hybrid.Model.Simulate over the H history rows and the 60 horizon steps,
// the initial state re-estimated from the window each time — with no
// constraint, OOD or cost evaluation at all.
func BenchmarkOptimizeNaive(b *testing.B) {
	f, p := benchPlan(b)
	naive := newNaive(b, f, p)
	b.ResetTimer()
	for b.Loop() {
		naive()
	}
}

// newNaive returns one iteration of BenchmarkOptimizeNaive.
func newNaive(b *testing.B, f *fixture, p *plan) func() {
	m := f.twin.dyn.(hybridDyn).m
	o := &optimizer{p: p, ctx: context.Background(), seen: map[string]*candidate{}, budget: 200}
	o.slots = p.moveSlots()
	cands := benchCandidates(o, 200)
	H, T := f.twin.H, p.T
	sim, _ := m.NewSim()
	// the window's inputs and outputs as StartFrom saw them
	w := p.s
	U := make([][]float64, H+T)
	D := make([][]float64, H+T)
	Y := make([][]float64, H)
	for k := 0; k < H; k++ {
		U[k] = make([]float64, len(f.twin.ctrl))
		for q, c := range f.twin.ctrl {
			U[k][q] = w.rows[k][c.col]
		}
		D[k] = make([]float64, len(f.twin.dist))
		for q, c := range f.twin.dist {
			D[k][q] = w.rows[k][c.col]
		}
		Y[k] = []float64{w.rows[k][f.twin.outs[0].col]}
	}
	for k := H; k < H+T; k++ {
		U[k] = make([]float64, len(f.twin.ctrl))
		D[k] = w.distLast
	}
	return func() {
		for _, c := range cands {
			traj := o.expand(c.x)
			for k := 0; k < T; k++ {
				copy(U[H+k], p.ctrlU)
				for ci, q := range p.ctrlModel {
					U[H+k][q] = traj[k][ci]
				}
			}
			if _, err := m.Simulate(sim, U, D, Y, H); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkOptimizeVsNaive runs BenchmarkOptimize's and
// BenchmarkOptimizeNaive's iterations alternately in one loop and reports
// both times and their ratio (x-naive: how many times faster the
// optimiser's path is). Both see the same machine and the same load, so a
// slower optimiser shows as a smaller ratio whatever the machine's speed
// (bench/RESULTS.md records ≥ 5×). cpu-ms are the process's CPU times
// (user + system) per path, which other processes' load hardly moves.
func BenchmarkOptimizeVsNaive(b *testing.B) {
	f, p := benchPlan(b)
	s := p.snap
	naive := newNaive(b, f, p)
	var tOpt, tNaive, cOpt, cNaive time.Duration
	b.ResetTimer()
	for b.Loop() {
		t0, c0 := time.Now(), cpuTime()
		optimizeOnce(b, f, s)
		t1, c1 := time.Now(), cpuTime()
		naive()
		tOpt += t1.Sub(t0)
		tNaive += time.Since(t1)
		cOpt += c1 - c0
		cNaive += cpuTime() - c1
	}
	n := float64(b.N)
	b.ReportMetric(tOpt.Seconds()*1e3/n, "opt-ms")
	b.ReportMetric(tNaive.Seconds()*1e3/n, "naive-ms")
	b.ReportMetric(tNaive.Seconds()/tOpt.Seconds(), "x-naive")
	if cOpt > 0 {
		b.ReportMetric(cOpt.Seconds()*1e3/n, "opt-cpu-ms")
		b.ReportMetric(cNaive.Seconds()*1e3/n, "naive-cpu-ms")
		b.ReportMetric(cNaive.Seconds()/cOpt.Seconds(), "x-naive-cpu")
	}
	b.ReportMetric(0, "ns/op") // one op is both paths: the metrics above say it
}

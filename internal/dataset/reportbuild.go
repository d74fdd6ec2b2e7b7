package dataset

import "github.com/aml-project/aml/internal/core"

// maxLagBeats bounds the lag search of the report's cross-correlation.
func maxLagBeats(spec *Spec) int {
	return min(max(spec.HistorySteps, 10), 60)
}

// buildReport assembles report.json from the aligned runs.
func buildReport(spec *Spec, nodes []node, grids []*runGrid, dropped []RunReason, p *planned, l Lineage) *Report {
	nAll := len(nodes)
	r := &Report{Kind: KindDynamic, Dropped: append([]RunReason{}, dropped...), LineageVerified: l.LineageVerified}
	if p.static {
		r.Kind = KindStatic
	}
	r.Windows.Train, r.Windows.Val, r.Windows.Test = p.train.Count, p.val.Count, p.test.Count
	trainRuns := map[string]bool{}
	for _, id := range p.train.RunIDs {
		trainRuns[id] = true
	}
	var trainGrids []*runGrid
	for _, g := range grids {
		if trainRuns[g.run.ID] {
			trainGrids = append(trainGrids, g)
		}
	}
	col := func(g *runGrid, j int) []float64 {
		out := make([]float64, g.steps)
		for i := range out {
			out[i] = float64(g.vals[i*nAll+j])
		}
		return out
	}
	for j, n := range nodes {
		var vals []float64
		for _, g := range trainGrids {
			vals = append(vals, col(g, j)...)
		}
		nr := NodeReport{NodeID: n.NodeID, Role: n.Role, ModelUnit: n.modelUnit, Summary: summarize(vals)}
		for _, g := range grids {
			nr.Cleaning.Add(g.clean[n.NodeID])
			nr.Align.Add(g.align[n.NodeID])
		}
		nr.CleanedRatio = ratio(nr.Cleaning.State+nr.Cleaning.Range+nr.Cleaning.Hampel, nr.Cleaning.Raw)
		nr.InterpolatedRatio = ratio(nr.Align.Interpolated, nr.Align.Buckets)
		nr.MissingRatio = ratio(nr.Align.Missing, nr.Align.Buckets)
		r.Nodes = append(r.Nodes, nr)
	}
	for _, g := range grids {
		rr := RunReport{RunID: g.run.ID, Split: g.split, Steps: g.steps, MissingRatio: g.missing, Cleaning: g.clean, Align: g.align}
		if rr.Split == "" {
			rr.Split = splitOfRun(p, g.run.ID)
		}
		ts := make([]int64, g.steps)
		for i := range ts {
			ts[i] = core.UsToMs(g.startUs + int64(i)*spec.BeatUs())
		}
		for _, j := range p.tgt {
			v := col(g, j)
			pt, pv := profile(ts, v)
			rr.Targets = append(rr.Targets, TargetProfile{NodeID: nodes[j].NodeID, Summary: summarize(v), ProfileMs: pt, Profile: pv})
		}
		r.Runs = append(r.Runs, rr)
	}
	if !p.static && len(trainGrids) > 0 {
		L := maxLagBeats(spec)
		// Only the train runs' sums are pooled, so only theirs are formed;
		// per run, as the plain per-run loop would (lag_test.go).
		pairs := lagPairs(nodes)
		sums := make([][]lagSums, len(pairs))
		for _, g := range trainGrids {
			lc := newLagCols(g, nAll, L)
			for pi, pair := range pairs {
				sums[pi] = append(sums[pi], lc.sums(pair[0], pair[1]))
			}
		}
		for pi, pair := range pairs {
			c, best, bc := lagCorr(sums[pi], L)
			r.Lags = append(r.Lags, LagReport{Input: nodes[pair[0]].NodeID, Target: nodes[pair[1]].NodeID, MaxLag: L, BestLag: best, BestCorr: bc, Corr: c})
		}
	}
	if r.Lags == nil {
		r.Lags = []LagReport{}
	}
	return r
}

// splitOfRun names the split a run's data went to ("mixed" when its time
// blocks went to several).
func splitOfRun(p *planned, id string) string {
	var got string
	for _, s := range []struct {
		name string
		part SplitPart
	}{{SplitTrain, p.train}, {SplitVal, p.val}, {SplitTest, p.test}} {
		for _, r := range s.part.RunIDs {
			if r == id {
				if got != "" {
					return "mixed"
				}
				got = s.name
			}
		}
	}
	return got
}

package web

// Golden-run band: on a trend aligned at run start, the mean ± k·σ of
// each chosen signal over runs the user picked as good ("golden"), so a
// run that leaves the band stands out. The runs are read through the
// application (run.show, ts.query: the caller's scope) on one common grid
// — one bucket width for every golden run, the longest run's duration
// over maxTrendBuckets — and each bucket mean is placed at its offset
// from its run's start. At each offset with at least two runs, the band
// is the mean of the runs' bucket means ± k times their sample standard
// deviation (n−1); offsets with fewer runs are left out.

import (
	"math"
	"net/http"
	"net/url"
	"strconv"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
)

// Golden band bounds.
const (
	maxGoldenRuns  = 20
	defaultGoldenK = 2.0
	maxGoldenK     = 10.0
)

// trendBand is one signal's golden band.
type trendBand struct {
	Node  string    `json:"node"`
	K     float64   `json:"k"`
	Runs  []string  `json:"runs"`
	Label string    `json:"label"`
	X     []float64 `json:"x"` // minutes since run start
	Mean  []float64 `json:"mean"`
	Lo    []float64 `json:"lo"`
	Hi    []float64 `json:"hi"`
	N     []int     `json:"n"` // runs at each offset
}

// goldenParams reads ?golden=R…&k=K (none: no band).
func goldenParams(q url.Values) (runs []string, k float64, err error) {
	runs = compactVals(q["golden"])
	if len(runs) == 0 {
		return nil, 0, nil
	}
	if len(runs) < 2 || len(runs) > maxGoldenRuns {
		return nil, 0, core.FieldErrorf(core.CodeInvalidArgument, "golden", "a golden band needs 2 to %d runs, got %d", maxGoldenRuns, len(runs))
	}
	k = defaultGoldenK
	if v := q.Get("k"); v != "" {
		k, err = strconv.ParseFloat(v, 64)
		if err != nil || !(k > 0 && k <= maxGoldenK) {
			return nil, 0, core.FieldErrorf(core.CodeInvalidArgument, "k", "k must be a number in (0, %g], got %q", maxGoldenK, v)
		}
	}
	return runs, k, nil
}

// goldenQuery is the band's part of a data address ("" without one).
func goldenQuery(runs []string, k float64) string {
	if len(runs) == 0 {
		return ""
	}
	return "&" + url.Values{"golden": runs, "k": {strconv.FormatFloat(k, 'g', -1, 64)}}.Encode()
}

// goldenBands adds the band of each node over the golden runs to doc.
func (s *server) goldenBands(r *http.Request, p auth.Principal, doc *trendDoc, nodes, runs []string, k float64) error {
	if doc.Align != "start" {
		return core.FieldErrorf(core.CodeInvalidArgument, "align", "a golden band is drawn on runs aligned at their start (align=start)")
	}
	ctx := r.Context()
	type span struct {
		run      string
		from, to int64
		samples  map[string]int64
	}
	spans := make([]span, 0, len(runs))
	longest := int64(1000)
	for _, id := range runs {
		rs, err := s.app.RunShow(ctx, p, app.RunShowRequest{ID: id})
		if err != nil {
			return err
		}
		to := s.o.Now().UnixMilli()
		if rs.EndedMs != nil {
			to = *rs.EndedMs
		}
		to = max(to, rs.StartedMs+1000)
		longest = max(longest, to-rs.StartedMs)
		spans = append(spans, span{id, rs.StartedMs, to, rs.Samples})
	}
	width := max(int64(1000), longest/maxTrendBuckets)
	width = (width + 999) / 1000 * 1000
	for _, node := range nodes {
		perRun := make([][]float64, 0, len(spans))
		for _, sp := range spans {
			if sp.samples[node] == 0 {
				continue
			}
			fi, ti := app.Instant(sp.from), app.Instant(sp.to)
			ts, err := s.app.TSQuery(ctx, p, app.TSQueryRequest{Node: node, Run: sp.run, From: &fi, To: &ti, Bucket: app.Duration(width * 1e6)})
			if err != nil {
				return err
			}
			grid := make([]float64, (sp.to-sp.from)/width+1)
			for i := range grid {
				grid[i] = math.NaN()
			}
			if ts.TSBuckets != nil {
				for _, b := range ts.TSBuckets.Buckets {
					if b.Count == 0 || !finite(b.Avg) {
						continue
					}
					if i := (max(b.StartMs, sp.from) - sp.from) / width; i < int64(len(grid)) {
						grid[i] = b.Avg
					}
				}
			}
			perRun = append(perRun, grid)
		}
		band := goldenBand(perRun, k, float64(width)/60000)
		band.Node, band.Runs = node, runs
		band.Label = "golden mean ± " + strconv.FormatFloat(k, 'g', -1, 64) + "σ · " + node + " (" + strconv.Itoa(len(perRun)) + " runs)"
		doc.Bands = append(doc.Bands, band)
	}
	return nil
}

// goldenBand is the band over runs' values on a common grid (NaN: no
// value), x in steps of dx: at each offset with at least two values, the
// mean ± k times the sample standard deviation.
func goldenBand(runs [][]float64, k, dx float64) trendBand {
	b := trendBand{K: k, X: []float64{}, Mean: []float64{}, Lo: []float64{}, Hi: []float64{}, N: []int{}}
	n := 0
	for _, r := range runs {
		n = max(n, len(r))
	}
	for i := 0; i < n; i++ {
		var sum, sq float64
		c := 0
		for _, r := range runs {
			if i < len(r) && finite(r[i]) {
				sum += r[i]
				c++
			}
		}
		if c < 2 {
			continue
		}
		mean := sum / float64(c)
		for _, r := range runs {
			if i < len(r) && finite(r[i]) {
				sq += (r[i] - mean) * (r[i] - mean)
			}
		}
		sd := math.Sqrt(sq / float64(c-1))
		b.X = append(b.X, float64(i)*dx)
		b.Mean, b.Lo, b.Hi, b.N = append(b.Mean, mean), append(b.Lo, mean-k*sd), append(b.Hi, mean+k*sd), append(b.N, c)
	}
	return b
}

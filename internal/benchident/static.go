package benchident

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/ident/static"
)

// StaticCV configures a static (one row per cycle) benchmark: k-fold cross-
// validation on the raw table, per group (e.g. per part), with fold =
// row-within-group index mod K ("mod") — the protocol the data sets'
// SOURCE.md use for their reference figures. The fitting code is the one
// the trainers run: static_response@1's (internal/ident/static, inner CV
// for degree, penalty and the GP alternative on each outer fold's training
// rows only) or static_forest@1's (internal/ident/forest, seeded by the
// config's seed).
type StaticCV struct {
	GroupBy string `json:"groupBy,omitempty"` // column that splits the table into groups (string values allowed)
	Folds   int    `json:"folds"`             // K
	// Metric "r2" (default) or "accuracy": the output is a class label,
	// predictions are rounded to the nearest class.
	Metric string `json:"metric,omitempty"`
}

// staticParams are the static_response@1 params the harness honours.
type staticParams struct {
	Degrees []int `json:"degrees"`
	GP      *bool `json:"gp"`
}

func runStatic(ctx context.Context, c *Config, progress func(string)) (*Report, error) {
	if c.StaticCV == nil || c.StaticCV.Folds < 2 {
		return nil, core.FieldErrorf(core.CodeSpecInvalid, "staticCV.folds", "a static benchmark needs staticCV with folds ≥ 2")
	}
	if len(c.Outputs) != 1 {
		return nil, core.FieldErrorf(core.CodeSpecInvalid, "outputs", "a static benchmark has one output")
	}
	groups, err := readGroups(c)
	if err != nil {
		return nil, err
	}
	rep := &Report{Name: c.Name, Published: c.Published}
	if rep.Published == nil {
		rep.Published = []Published{}
	}
	names := make([]string, 0, len(groups))
	for g := range groups {
		names = append(names, g)
	}
	sort.Strings(names)
	for _, tc := range c.Trainers {
		if tc.Ref == "static_forest@1" {
			if err := runForestCV(c, tc, names, groups, rep, progress); err != nil {
				return nil, err
			}
			continue
		}
		if tc.Ref != "static_response@1" {
			rep.Results = append(rep.Results, Result{Trainer: tc.Ref, Output: c.Outputs[0], Error: "static benchmarks run static_response@1 and static_forest@1 only"})
			continue
		}
		opt := static.DefaultOptions()
		var p staticParams
		if len(tc.Params) > 0 {
			if err := json.Unmarshal(tc.Params, &p); err != nil {
				return nil, core.FieldErrorf(core.CodeSpecInvalid, "trainers.params", "trainer %s: %v", tc.Ref, err)
			}
		}
		if len(p.Degrees) > 0 {
			opt.Degrees = p.Degrees
		}
		if p.GP != nil {
			opt.GP = *p.GP
		}
		var sum float64
		for _, g := range names {
			progress(fmt.Sprintf("%s: %s, %d-fold CV", tc.Ref, g, c.StaticCV.Folds))
			t0 := time.Now()
			X, Y := groups[g][0], groups[g][1]
			cv, err := static.CrossValidate(X, Y, static.ModFolds(len(X), c.StaticCV.Folds), opt)
			if err != nil {
				return nil, err
			}
			res := Result{Trainer: tc.Ref, Output: c.Outputs[0] + "@" + g, Seconds: time.Since(t0).Seconds()}
			var v float64
			if c.StaticCV.Metric == "accuracy" {
				ok := 0
				for i := range Y {
					if math.Round(cv.OOF[i][0]) == Y[i][0] {
						ok++
					}
				}
				v = float64(ok) / float64(len(Y))
				res.Accuracy = &v
			} else {
				v = cv.PooledR2[0]
				res.R2, res.FreeRunNRMSE = &v, ptr(cv.PooledNRMSE[0])
			}
			sum += v
			rep.Results = append(rep.Results, res)
		}
		mean := sum / float64(len(names))
		res := Result{Trainer: tc.Ref, Output: c.Outputs[0] + "@mean"}
		if c.StaticCV.Metric == "accuracy" {
			res.Accuracy = &mean
		} else {
			res.R2 = &mean
		}
		rep.Results = append(rep.Results, res)
	}
	return rep, nil
}

// readGroups reads the config's train files into per-group X, Y tables.
func readGroups(c *Config) (map[string][2][][]float64, error) {
	out := map[string][2][][]float64{}
	for _, f := range c.Train {
		fh, err := os.Open(f.Path)
		if err != nil {
			return nil, core.Wrap(core.CodeInvalidArgument, err, "open %s", f.Path)
		}
		recs, err := csv.NewReader(fh).ReadAll()
		fh.Close()
		if err != nil {
			return nil, core.Wrap(core.CodeIngestInvalid, err, "read %s", f.Path)
		}
		if len(recs) < 2 {
			return nil, core.Errorf(core.CodeIngestInvalid, "%s: no data rows", f.Path)
		}
		col := map[string]int{}
		for i, h := range recs[0] {
			col[h] = i
		}
		need := append(append([]string{}, c.Inputs...), c.Outputs...)
		if c.StaticCV.GroupBy != "" {
			need = append(need, c.StaticCV.GroupBy)
		}
		for _, n := range need {
			if _, ok := col[n]; !ok {
				return nil, core.FieldErrorf(core.CodeSpecInvalid, "inputs", "%s has no column %q", f.Path, n)
			}
		}
		for li, r := range recs[1:] {
			g := "all"
			if c.StaticCV.GroupBy != "" {
				g = r[col[c.StaticCV.GroupBy]]
			}
			var x, y []float64
			for _, n := range c.Inputs {
				v, err := strconv.ParseFloat(r[col[n]], 64)
				if err != nil {
					return nil, core.FieldErrorf(core.CodeIngestInvalid, fmt.Sprintf("%s:%d", f.Path, li+2), "column %s: %v", n, err)
				}
				x = append(x, v)
			}
			v, err := strconv.ParseFloat(r[col[c.Outputs[0]]], 64)
			if err != nil {
				return nil, core.FieldErrorf(core.CodeIngestInvalid, fmt.Sprintf("%s:%d", f.Path, li+2), "column %s: %v", c.Outputs[0], err)
			}
			y = append(y, v)
			t := out[g]
			t[0], t[1] = append(t[0], x), append(t[1], y)
			out[g] = t
		}
	}
	return out, nil
}

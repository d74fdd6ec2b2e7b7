package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/registry"
	extrun "github.com/aml-project/aml/internal/trainer/exec"
	"github.com/spf13/cobra"
)

// prediction is one predicted step.
type prediction struct {
	TsMs     int64      `json:"ts"`
	Time     string     `json:"time"`
	Pred     []float64  `json:"prediction"`
	Lo       []float64  `json:"lo,omitempty"`
	Hi       []float64  `json:"hi,omitempty"`
	Measured []*float64 `json:"measured"`
}

func newPredictCmd(a *app) *cobra.Command {
	var run, from string
	var steps int
	cmd := &cobra.Command{
		Use:   "predict ID --run R --from T [--steps K]",
		Short: "Predict K steps of a run from time T with a model (same cleaning and alignment as training)",
		Long: `Rebuild the model's input window at time T of run R with the exact code that
built its training data (the dataset's spec: unit contracts, state, range and
Hampel filters, grid alignment, interpolation), check the model artifact's
hash, and predict the next K steps (K ≤ the dataset's horizon) with the run's
actual future controls. Conformal intervals are shown when the model was
calibrated at evaluation; measured values are shown where the run has them.`,
		Args: argsExact(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if run == "" || from == "" {
				return usagef("--run and --from are required")
			}
			at, err := parseTime("from", from)
			if err != nil {
				return err
			}
			s, err := a.openStore()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			m, err := s.GetModel(ctx, args[0])
			if err != nil {
				return err
			}
			reg := registry.New(s, a.dataDir, nil)
			if err := reg.VerifyArtifact(cmd.Context(), m); err != nil {
				return err
			}
			d, err := s.GetDataset(ctx, m.DatasetID)
			if err != nil {
				return err
			}
			man, err := dataset.FetchManifest(cmd.Context(), s, a.dataDir, d)
			if err != nil {
				return err
			}
			if steps <= 0 || steps > man.HorizonSteps {
				return usagef("--steps must be 1..%d (the model's horizon)", man.HorizonSteps)
			}
			p, err := model.Load(reg.ArtifactDir(m), man, model.LoadOptions{ExecPredict: extrun.Predict, Formats: trainers().Formats()})
			if err != nil {
				return err
			}
			w, err := dataset.BuildServeWindow(ctx, s, d, run, *at)
			if err != nil {
				return err
			}
			if w.Missing > 0 {
				return core.Errorf(core.CodeDatasetEmpty, "the history window before %s has %d missing value(s) after cleaning; pick another time", fmtMs(w.AtMs), w.Missing)
			}
			yhat, err := p.PredictBatch(context.WithoutCancel(ctx), w.X, w.U, 1)
			if err != nil {
				return err
			}
			widths := conformalWidths(m.Metrics)
			nT := len(man.Targets)
			H := man.HistorySteps
			var out []prediction
			for f := 0; f < steps; f++ {
				pr := prediction{TsMs: w.TS[H+f], Time: fmtMs(w.TS[H+f])}
				for k := 0; k < nT; k++ {
					v := float64(yhat[f*nT+k])
					pr.Pred = append(pr.Pred, v)
					if widths != nil && f < len(widths) && k < len(widths[f]) {
						pr.Lo, pr.Hi = append(pr.Lo, v-widths[f][k]), append(pr.Hi, v+widths[f][k])
					}
					if y := float64(w.Y[f*nT+k]); !math.IsNaN(y) {
						pr.Measured = append(pr.Measured, &y)
					} else {
						pr.Measured = append(pr.Measured, nil)
					}
				}
				out = append(out, pr)
			}
			res := predictOutput{Model: m.ID, Run: run, From: w.AtMs, Targets: man.Targets, Steps: out, Intervals: widths != nil}
			return a.emit(res, func(wr io.Writer) { printPrediction(wr, res, man.BeatMs) })
		},
	}
	cmd.Flags().StringVar(&run, "run", "", "run id (required)")
	cmd.Flags().StringVar(&from, "from", "", "time of the first predicted step (epoch ms or RFC 3339; required)")
	cmd.Flags().IntVar(&steps, "steps", 1, "steps to predict (≤ the dataset's horizon)")
	return cmd
}

// conformalWidths reads the calibrated half-widths [F][nTgt] stored in the
// model's metrics, if evaluation calibrated it.
func conformalWidths(metrics json.RawMessage) [][]float64 {
	var m struct {
		Conformal *struct {
			Widths [][]float64 `json:"widths"`
		} `json:"conformal"`
	}
	if json.Unmarshal(metrics, &m) != nil || m.Conformal == nil {
		return nil
	}
	return m.Conformal.Widths
}

var _ = filepath.Join

// predictOutput is what "aml model predict" prints.
type predictOutput struct {
	Model     string       `json:"model"`
	Run       string       `json:"run"`
	From      int64        `json:"from"`
	Targets   []string     `json:"targets"`
	Steps     []prediction `json:"steps"`
	Intervals bool         `json:"intervals"`
}

func printPrediction(wr io.Writer, res predictOutput, beatMs int64) {
	fmt.Fprintf(wr, "model %s on run %s from %s (%s)\n", res.Model, res.Run, fmtMs(res.From), time.Duration(beatMs)*time.Millisecond)
	tw := tabwriter.NewWriter(wr, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "time\t")
	for _, t := range res.Targets {
		fmt.Fprintf(tw, "%s\tinterval\tmeasured\t", t)
	}
	fmt.Fprintln(tw)
	for _, pr := range res.Steps {
		fmt.Fprintf(tw, "%s\t", pr.Time)
		for k := range res.Targets {
			iv := "-"
			if len(pr.Lo) > k {
				iv = fmt.Sprintf("[%.4g, %.4g]", pr.Lo[k], pr.Hi[k])
			}
			ms := "-"
			if pr.Measured[k] != nil {
				ms = fmt.Sprintf("%.5g", *pr.Measured[k])
			}
			fmt.Fprintf(tw, "%.5g\t%s\t%s\t", pr.Pred[k], iv, ms)
		}
		fmt.Fprintln(tw)
	}
	tw.Flush()
}

package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aml-project/aml/internal/model"
)

// TestMeanTrainer ("test_mean@1") predicts each target's train mean. It
// exists for tests and benchmarks of the job system (enabled with
// AML_TEST_TRAINERS=1 in the CLI) and is not a product feature. Params:
//
//	steps, stepMs   report progress `steps` times, sleeping stepMs between
//	silentAfter     stop reporting progress after this step (stall tests)
//	fail            return an error at the end
type TestMeanTrainer struct{}

func (TestMeanTrainer) Ref() string           { return "test_mean@1" }
func (TestMeanTrainer) HasTrainingStep() bool { return true }

func (TestMeanTrainer) Train(ctx context.Context, tc *TrainContext) error {
	var p struct {
		Steps       int  `json:"steps"`
		StepMs      int  `json:"stepMs"`
		SilentAfter int  `json:"silentAfter"`
		Fail        bool `json:"fail"`
	}
	if len(tc.Params) > 0 {
		if err := json.Unmarshal(tc.Params, &p); err != nil {
			return fmt.Errorf("params: %w", err)
		}
	}
	for i := 1; i <= p.Steps; i++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(p.StepMs) * time.Millisecond):
		}
		if p.SilentAfter == 0 || i <= p.SilentAfter {
			tc.Progress(float64(i)/float64(p.Steps+1), "")
		}
	}
	if p.Fail {
		return errors.New("test trainer asked to fail")
	}
	b := tc.Dataset
	lo, hi := b.Split("train")
	m := b.Manifest
	nT := len(m.Targets)
	F := m.HorizonSteps
	if F == 0 {
		F = 1
	}
	sums := make([]float64, nT)
	n := 0
	for w := lo; w < hi; w++ {
		for f := 0; f < F; f++ {
			for k := 0; k < nT; k++ {
				sums[k] += float64(b.Y[(w*F+f)*nT+k])
			}
			n++
		}
	}
	if n == 0 {
		return errors.New("no train windows")
	}
	for k := range sums {
		sums[k] /= float64(n)
	}
	return model.WriteMean(tc.ArtifactsDir, sums, F)
}

package main

import (
	"context"
	"time"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/core"
	"github.com/spf13/cobra"
)

// stepTestPoll is how often "steptest execute --server" asks the server
// how its test is getting on.
const stepTestPoll = 2 * time.Second

// followStepTest follows a step test the server started in the
// background (r, status running) with steptest.show until it ends,
// showing its moves written on a progress bar, and returns what the
// blocking call returns: the result, and the error the test ended with.
func (a *app) followStepTest(cmd *cobra.Command, r amlapp.StepTestExecuteResponse) (amlapp.StepTestExecuteResponse, error) {
	id := r.Test.Test.TestID
	return followStepTest(r, func() (*amlapp.StepTestResponse, error) {
		resp, err := a.call(cmd, "steptest.show", "", &amlapp.StepTestRequest{ID: id})
		rec, _ := resp.(*amlapp.StepTestResponse)
		return rec, err
	}, func(d time.Duration) { sleepCtx(cmd.Context(), d) }, a.newProgress(int64(len(r.Test.Test.Moves)), "step test "+id+": moving", false))
}

// sleepCtx waits d on the wall clock, or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// followStepTest polls show (sleeping between polls) until the test's
// latest execution is no longer running. The client going away
// (interrupted) does not stop the test: it keeps running on the server.
func followStepTest(r amlapp.StepTestExecuteResponse, show func() (*amlapp.StepTestResponse, error), sleep func(time.Duration), bar *progress) (amlapp.StepTestExecuteResponse, error) {
	defer bar.finish()
	start := r.Test.Progress.StartSeq
	for {
		sleep(stepTestPoll)
		rec, err := show()
		if err != nil {
			return r, err
		}
		pr := rec.Progress
		if pr == nil || pr.StartSeq != start {
			return r, core.Errorf(core.CodeConflict, "step test %s: its execution (audit entry %d) is no longer the latest", r.Test.Test.TestID, start)
		}
		r.Test = rec
		bar.set(int64(pr.Written))
		bar.describe("step test " + rec.Test.TestID + ": " + pr.Stage)
		if pr.Status == amlapp.StepTestRunning {
			continue
		}
		r.Status = pr.Status
		if pr.Result != nil {
			r.Result = *pr.Result
		}
		if pr.Error != nil {
			return r, core.FieldErrorf(pr.Error.Code, pr.Error.Field, "%s", pr.Error.Message)
		}
		return r, nil
	}
}

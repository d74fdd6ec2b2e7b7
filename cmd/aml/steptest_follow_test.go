package main

import (
	"errors"
	"testing"
	"time"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/steptest"
)

// TestFollowStepTest: "steptest execute --server" follows the test the
// server started with steptest.show until it ends: it polls while the
// test runs, then answers with the result the blocking call returns and
// the error the test ended with (its code); a show that fails, or a
// newer execution in the trail, ends the following with that error.
func TestFollowStepTest(t *testing.T) {
	rec := func(seq int64, status, stage string, written int, res *steptest.Result, e *auth.ErrorBody) *amlapp.StepTestResponse {
		return &amlapp.StepTestResponse{Test: &contract.StepTestCertificate{TestID: "st-1", Moves: make([]contract.StepTestMove, 8)},
			Progress: &steptest.Progress{StartSeq: seq, Status: status, Stage: stage, Planned: 8, Written: written, Result: res, Error: e}}
	}
	started := amlapp.StepTestExecuteResponse{Status: steptest.StatusRunning, Test: rec(7, steptest.StatusRunning, steptest.StageMoving, 0, nil, nil)}
	res := &steptest.Result{RunID: "steptest-st-1", Execution: &steptest.Execution{TestID: "st-1", Completed: true}}
	for _, c := range []struct {
		name   string
		shows  []*amlapp.StepTestResponse
		showEr error
		status string
		code   string
	}{
		{"done", []*amlapp.StepTestResponse{rec(7, "running", "moving", 3, nil, nil), rec(7, "running", "fitting", 8, nil, nil), rec(7, "done", "stored", 8, res, nil)}, nil, "done", ""},
		{"failed", []*amlapp.StepTestResponse{rec(7, "running", "moving", 1, nil, nil), rec(7, "failed", "stored", 1, res, &auth.ErrorBody{Code: core.CodeWriteDenied, Message: "stopped"})}, nil, "failed", core.CodeWriteDenied},
		{"interrupted", []*amlapp.StepTestResponse{rec(7, "interrupted", "moving", 2, nil, &auth.ErrorBody{Code: core.CodeWorkerLost, Message: "gone"})}, nil, "interrupted", core.CodeWorkerLost},
		{"another execution", []*amlapp.StepTestResponse{rec(9, "running", "moving", 0, nil, nil)}, nil, "running", core.CodeConflict},
		{"show fails", nil, core.Errorf(core.CodeStoreUnavailable, "down"), "running", core.CodeStoreUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			polls, slept := 0, time.Duration(0)
			out, err := followStepTest(started, func() (*amlapp.StepTestResponse, error) {
				if c.showEr != nil {
					return nil, c.showEr
				}
				polls++
				return c.shows[polls-1], nil
			}, func(d time.Duration) { slept += d }, &progress{})
			if core.CodeOf(err) != c.code || (c.code == "" && err != nil) || out.Status != c.status {
				t.Fatalf("status %q, err %v", out.Status, err)
			}
			if c.showEr == nil && (polls != len(c.shows) || slept != time.Duration(polls)*stepTestPoll) {
				t.Fatalf("%d polls, slept %v", polls, slept)
			}
			if c.status == "done" && (out.RunID != res.RunID || out.Execution == nil || out.Test.Progress.Written != 8) {
				t.Fatalf("result %+v", out)
			}
			if errors.Is(err, c.showEr) && c.showEr != nil && err != c.showEr {
				t.Fatalf("show error not returned as is: %v", err)
			}
		})
	}
}

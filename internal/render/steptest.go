package render

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/twin/steptest"
)

func printStepTest(w io.Writer, r *steptest.Record) {
	if r == nil || r.Test == nil {
		return
	}
	c := r.Test
	status := string(c.Status)
	if r.Expired && c.Status != "REVOKED" {
		status += " (expired)"
	}
	fmt.Fprintf(w, "step test %s  status %s  line %s\n", c.TestID, status, c.LineID)
	fmt.Fprintf(w, "scene %s@%s  signal %s  hold %gs  proposed by %s at %s; expires %s\n", c.SceneID, c.SceneVersion, dash(c.Signal), c.HoldSec, c.CreatedBy, certTime(c.CreatedAt), certTime(c.ExpiresAt))
	if c.ApprovedBy != "" {
		fmt.Fprintf(w, "approved by %s at %s\n", c.ApprovedBy, certTime(c.ApprovedAt))
	}
	if c.RevokedBy != "" {
		fmt.Fprintf(w, "revoked by %s at %s: %s\n", c.RevokedBy, certTime(c.RevokedAt), c.RevokeReason)
	}
	vars := make([]string, 0, len(c.Bounds))
	for v := range c.Bounds {
		vars = append(vars, v)
	}
	sort.Strings(vars)
	for _, v := range vars {
		fmt.Fprintf(w, "  %s around %g within [%g, %g]\n", v, c.Base[v], c.Bounds[v].Min, c.Bounds[v].Max)
	}
	fmt.Fprintf(w, "%d moves; %d written, %d refused", len(c.Moves), r.Moves, r.Refused)
	if r.Executed > 0 {
		fmt.Fprintf(w, "; executed (audit entry %d)", r.Executed)
	}
	fmt.Fprintln(w)
	printStepTestProgress(w, r.Progress)
}

// printStepTestProgress prints the latest execution: its status and
// stage, the moves written so far, and once stored its result or error.
func printStepTestProgress(w io.Writer, pr *steptest.Progress) {
	if pr == nil {
		return
	}
	fmt.Fprintf(w, "execution started by %s at %s: %s (%s), %d of %d moves written", pr.StartedBy, certTime(pr.StartedAt), pr.Status, pr.Stage, pr.Written, pr.Planned)
	if pr.Refused > 0 {
		fmt.Fprintf(w, ", %d refused", pr.Refused)
	}
	fmt.Fprintln(w)
	if pr.Stopped != "" {
		fmt.Fprintf(w, "stopped: %s\n", pr.Stopped)
	}
	if pr.Status == steptest.StatusRunning && pr.Heartbeat != nil {
		fmt.Fprintf(w, "lease last renewed at %s\n", certTime(*pr.Heartbeat))
	}
	if m := pr.LastWritten; m != nil && pr.Status != steptest.StatusDone {
		vars := make([]string, 0, len(m.Set))
		for v := range m.Set {
			vars = append(vars, v)
		}
		sort.Strings(vars)
		parts := make([]string, len(vars))
		for i, v := range vars {
			parts[i] = fmt.Sprintf("%s %g", v, m.Set[v])
		}
		fmt.Fprintf(w, "last written: move %d (%s) at %s\n", m.Index, strings.Join(parts, ", "), certTime(m.At))
	}
	if pr.Error != nil {
		fmt.Fprintf(w, "error: %s: %s\n", pr.Error.Code, pr.Error.Message)
	}
	if pr.Result != nil {
		printStepTestResult(w, *pr.Result)
	}
}

func printStepTests(w io.Writer, items []*steptest.Record) {
	table(w, "STEP TEST\tLINE\tSCENE\tSTATUS\tMOVES\tWRITTEN\tEXPIRES\tPROPOSED BY\tAPPROVED BY", len(items), "step test(s)", func(row func(...any)) {
		for _, r := range items {
			c := r.Test
			st := string(c.Status)
			if r.Expired && c.Status != "REVOKED" {
				st += "(expired)"
			}
			row(c.TestID, c.LineID, c.SceneID+"@"+c.SceneVersion, st, len(c.Moves), r.Moves, certTime(c.ExpiresAt), c.CreatedBy, dash(c.ApprovedBy))
		}
	})
}

func printStepTestExecution(w io.Writer, r app.StepTestExecuteResponse) {
	if r.Status == steptest.StatusRunning && r.Test != nil && r.Test.Test != nil {
		fmt.Fprintf(w, "step test %s started: it runs on the server (aml twin steptest show %s follows it)\n", r.Test.Test.TestID, r.Test.Test.TestID)
		printStepTestProgress(w, r.Test.Progress)
		return
	}
	printStepTestResult(w, r.Result)
}

func printStepTestResult(w io.Writer, r steptest.Result) {
	ex := r.Execution
	if ex == nil {
		return
	}
	st := "completed"
	if !ex.Completed {
		st = "stopped: " + ex.Stopped
	}
	samples := ""
	if ex.Samples != nil {
		samples = fmt.Sprintf(", %d samples", len(ex.Samples))
	}
	fmt.Fprintf(w, "step test %s on line %s (run %s): %d moves%s, %s\n", ex.TestID, ex.LineID, ex.RunID, len(ex.Moves), samples, st)
	for _, m := range ex.Moves {
		fmt.Fprintf(w, "  move %d at %gs %v: %s %s\n", m.Index, m.AtSec, m.Set, dash(m.Status), dash(m.Reason))
	}
	if r.Fit != nil {
		fmt.Fprintf(w, "process_model@1 of %s (RMSE %.4g):\n", r.Fit.Output, r.Fit.RMSE)
		for _, p := range r.Fit.Pairs {
			fmt.Fprintf(w, "  %s: K %.4g  tau %.1fs  theta %.1fs", p.Input, p.K, p.TauSec, p.ThetaSec)
			if p.PrevK != 0 {
				fmt.Fprintf(w, "  (previous K %.4g tau %.1fs theta %.1fs)", p.PrevK, p.PrevTau, p.PrevTheta)
			}
			fmt.Fprintln(w)
		}
	}
	if f := r.Fit; f != nil && f.Previous != "" {
		if f.PreviousError != "" {
			fmt.Fprintf(w, "previous model %s not compared: %s\n", f.Previous, f.PreviousError)
		} else {
			fmt.Fprintf(w, "previous model %s:", f.Previous)
			for _, p := range f.Pairs {
				fmt.Fprintf(w, "  %s K %.4g", p.Input, p.PrevK)
			}
			fmt.Fprintln(w)
		}
	}
	if f := r.Fit; f != nil && f.StateSpace != nil {
		fmt.Fprintf(w, "linear_state_space@1 of %s (order %d, free-run RMSE %.4g):\n", f.Output, f.StateSpace.Order, f.StateSpace.RMSE)
		for _, p := range f.Pairs {
			fmt.Fprintf(w, "  %s: K %.4g  dead time %.1fs\n", p.Input, p.SSK, p.SSDeadTimeSec)
		}
	}
	if r.Fit != nil && r.Fit.StateSpaceError != "" {
		fmt.Fprintf(w, "state-space fit: %s\n", r.Fit.StateSpaceError)
	}
	if r.FitError != "" {
		fmt.Fprintf(w, "fit: %s\n", r.FitError)
	}
}

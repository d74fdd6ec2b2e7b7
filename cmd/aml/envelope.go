package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/spf13/cobra"
)

// newTwinEnvelopeCmd is "aml twin envelope": operating envelopes under
// bounded_auto (long help in help/twin-envelope*.txt).
func newTwinEnvelopeCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "envelope", Short: "Operating envelopes: one approval for a supervised receding horizon (bounded_auto)"}
	sub := func(use, short, op, actor string, req any, build func([]string) error) *cobra.Command {
		n := 0
		if f := strings.Fields(use); len(f) > 1 && f[1] == "ID" {
			n = 1
		}
		c := opCommand(a, &cobra.Command{Use: use, Short: short, Args: argsExact(n)}, op, actor, req, build)
		if actor != "" {
			c.Flags().String("as", "", "who does this (recorded in the audit log)")
		}
		return c
	}
	var (
		ir     = amlapp.EnvelopeIssueRequest{Bounds: map[string]amlapp.EnvelopeBound{}}
		scene  string
		bounds map[string]string
		lr     amlapp.EnvelopeListRequest
		sr, ar amlapp.EnvelopeRequest
		rr     amlapp.EnvelopeRevokeRequest
		cr     amlapp.EnvelopeCycleRequest
	)
	var issue, approve, revoke, cycle *cobra.Command
	issue = sub("issue --scene ID[@V] --model M --bound VAR=MIN:MAX... --max-moves-per-hour N --as PERSON", "Propose a signed envelope for a person to approve", "envelope.issue", "as", &ir, func([]string) error {
		ir.Scene, ir.SceneVersion, _ = strings.Cut(scene, "@")
		for v, s := range bounds {
			var b amlapp.EnvelopeBound
			if _, err := fmt.Sscanf(s, "%g:%g", &b.Min, &b.Max); err != nil {
				return usagef("--bound %s=%s: want VAR=MIN:MAX", v, s)
			}
			ir.Bounds[v] = b
		}
		return a.requireActor(issue)
	})
	f := issue.Flags()
	f.StringVar(&scene, "scene", "", "frozen scene ID[@VERSION]")
	f.StringVar(&ir.Model, "model", "", "model the supervisor re-optimises with")
	f.StringVar(&ir.Objective, "objective", "", "objective (default: the scene's first)")
	f.StringToStringVar(&bounds, "bound", nil, "a control's range, VAR=MIN:MAX (repeat)")
	f.IntVar(&ir.MaxMovesPerHour, "max-moves-per-hour", 0, "node writes allowed in any rolling hour")
	f.Var(&ir.TTL, "ttl", "lifetime (default 4h, at most 12h)")
	list := sub("list [--line L]", "List envelopes, newest first, each verified", "envelope.list", "", &lr, nil)
	list.Flags().StringVar(&lr.Line, "line", "", "only this line")
	show := sub("show ID", "Show an envelope as its signed audit trail has it", "envelope.show", "", &sr, func(x []string) error { sr.ID = x[0]; return nil })
	approve = sub("approve ID --as PERSON", "Approve an ISSUED envelope (never by its proposer)", "envelope.approve", "as", &ar, func(x []string) error { ar.ID = x[0]; return a.requireActor(approve) })
	revoke = sub("revoke ID --as PERSON --reason R", "Revoke an envelope: the supervisor stops writing", "envelope.revoke", "as", &rr, func(x []string) error { rr.ID = x[0]; return a.requireActor(revoke) })
	revoke.Flags().StringVar(&rr.Reason, "reason", "", "why")
	cycle = reportCommand(a, &cobra.Command{Use: "cycle ID --as PERSON", Short: "Run one supervised cycle (fresh snapshot, re-optimise, guarded write)", Args: argsExact(1)},
		"envelope.cycle", "as", &cr, func(x []string) error { cr.ID = x[0]; return a.requireActor(cycle) }, func(r any) bool { return r.(amlapp.EnvelopeCycleResult).Status != "" })
	cycle.Flags().String("as", "", "who runs the supervisor (recorded in the audit log)")
	cmd.AddCommand(issue, list, show, approve, revoke, cycle)
	return cmd
}

// newTwinStepTestCmd is "aml twin steptest": design, issue, approve
// and show step tests (long help in help/twin-steptest*.txt).
func newTwinStepTestCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{Use: "steptest", Short: "Plant step tests for identification: design, issue as a certificate, approve, execute"}
	planCmd := func(use, short, op, actor string, req *amlapp.StepTestPlanRequest, wrapped any, then func() error) *cobra.Command {
		var (
			scene      string
			amp, bases map[string]string
		)
		floats := func(flag string, in map[string]string) (map[string]float64, error) {
			var out map[string]float64
			for k, v := range in {
				x, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return nil, usagef("--%s %s=%s: want VAR=NUMBER", flag, k, v)
				}
				if out == nil {
					out = map[string]float64{}
				}
				out[k] = x
			}
			return out, nil
		}
		c := opCommand(a, &cobra.Command{Use: use, Short: short, Args: argsExact(0)}, op, actor, wrapped, func([]string) error {
			req.Scene, req.SceneVersion, _ = strings.Cut(scene, "@")
			var err error
			if req.Amplitude, err = floats("amplitude", amp); err != nil {
				return err
			}
			if req.Base, err = floats("base", bases); err != nil {
				return err
			}
			return then()
		})
		f := c.Flags()
		f.StringVar(&scene, "scene", "", "frozen scene ID[@VERSION]")
		f.StringVar(&req.Signal, "signal", "", "steps (default) or prbs")
		f.StringSliceVar(&req.Variables, "var", nil, "a control to excite (repeat; default every movable control)")
		f.StringToStringVar(&amp, "amplitude", nil, "a control's step size, VAR=A (default the largest allowed)")
		f.StringToStringVar(&bases, "base", nil, "a control's operating point, VAR=X (default the snapshot's)")
		f.StringVar(&req.Snapshot, "snapshot", "", "snapshot giving the operating point (default the line's newest)")
		f.Var(&req.Hold, "hold", "time between moves (default the write policy's interval)")
		f.IntVar(&req.Switches, "switches", 0, "PRBS moves per control (default 8)")
		f.BoolVar(&req.OneAtATime, "one-at-a-time", false, "move one control per action")
		f.Uint64Var(&req.Seed, "seed", 0, "PRBS seed (default 1)")
		return c
	}
	var (
		pr     amlapp.StepTestPlanRequest
		ir     amlapp.StepTestIssueRequest
		sr, ar amlapp.StepTestRequest
		er     amlapp.StepTestExecuteRequest
		lr     amlapp.StepTestListRequest
		rr     amlapp.StepTestRevokeRequest
	)
	plan := planCmd("plan --scene ID[@V] [--signal steps|prbs] [--var V]... [--one-at-a-time]", "Design a step test within the write policy and the controls' ranges (nothing is written)",
		"steptest.plan", "", &pr, &pr, func() error { return nil })
	var issue, approve, execute, revoke *cobra.Command
	issue = planCmd("issue --scene ID[@V] [plan flags] --as PERSON", "Design a step test and issue it as a signed certificate for a person to approve",
		"steptest.issue", "as", &ir.StepTestPlanRequest, &ir, func() error { return a.requireActor(issue) })
	issue.Flags().Var(&ir.TTL, "ttl", "how long the approved test may run (default 8h, at most 24h)")
	issue.Flags().String("as", "", "who proposes it (recorded in the audit log)")
	show := opCommand(a, &cobra.Command{Use: "show ID", Short: "Show a step test as its signed audit trail has it", Args: argsExact(1)},
		"steptest.show", "", &sr, func(x []string) error { sr.ID = x[0]; return nil })
	approve = opCommand(a, &cobra.Command{Use: "approve ID --as PERSON", Short: "Approve an ISSUED step test (a person, never its proposer)", Args: argsExact(1)},
		"steptest.approve", "as", &ar, func(x []string) error { ar.ID = x[0]; return a.requireActor(approve) })
	approve.Flags().String("as", "", "who approves (recorded in the audit log)")
	// The line is reached from this process over OPC UA (as cert execute
	// does), sampled every --sample on the wall clock.
	var (
		so     certOPCUA
		sample time.Duration
	)
	var noWait bool
	execute = routed(&cobra.Command{Use: "execute ID --as PERSON --opcua-endpoint URL --map FILE [--sample 1s] | --server URL [--no-wait]", Short: "Execute an approved step test through the write guard on the line over OPC UA (here, or on the server's configured line)", Args: argsExact(1),
		PreRunE: func(*cobra.Command, []string) error {
			if a.remote.server != "" && so.set() {
				return usagef("--opcua-endpoint/--map write from this process: they cannot be combined with --server")
			}
			if a.remote.server == "" && noWait {
				return usagef("--no-wait needs --server: a test run from this process ends with it")
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			er.ID = args[0]
			if err := a.requireActor(execute); err != nil {
				return err
			}
			// Run here, the call waits (the test ends with this
			// process); with --server the server runs it in the
			// background and this command follows it.
			er.Wait = a.remote.server == ""
			if so.set() {
				if sample < 10*time.Millisecond {
					return usagef("--sample must be at least 10ms")
				}
				if err := so.attach(a, sample); err != nil {
					return err
				}
			}
			resp, err := a.call(c, "steptest.execute", "as", &er)
			r, _ := resp.(amlapp.StepTestExecuteResponse)
			if err == nil && r.Status == amlapp.StepTestRunning && !noWait {
				r, err = a.followStepTest(c, r)
			}
			if r.Status == "" && r.Execution == nil {
				return err
			}
			if perr := a.show("steptest.execute", &er, r); perr != nil {
				return perr
			}
			return err
		}}, "steptest.execute")
	closeLines(a, execute)
	execute.Flags().String("as", "", "who runs it (recorded in the audit log)")
	so.flags(execute, "(without it the op is refused: no line is attached)")
	execute.Flags().DurationVar(&sample, "sample", time.Second, "sampling period of the line during the test")
	execute.Flags().StringVar(&er.Output, "output", "", "measured variable to fit (default the scene's first observation)")
	execute.Flags().StringVar(&er.Previous, "previous", "", "registry model to compare the fitted models with (step responses, gains)")
	execute.Flags().BoolVar(&noWait, "no-wait", false, "with --server: answer once the server started the test (follow it with steptest show)")
	list := opCommand(a, &cobra.Command{Use: "list [--line L]", Short: "List step tests, newest first, each verified", Args: argsExact(0)}, "steptest.list", "", &lr, nil)
	list.Flags().StringVar(&lr.Line, "line", "", "only this line")
	revoke = opCommand(a, &cobra.Command{Use: "revoke ID --as PERSON --reason R", Short: "Revoke a step test (its proposer or an approver): it can no longer execute", Args: argsExact(1)},
		"steptest.revoke", "as", &rr, func(x []string) error { rr.ID = x[0]; return a.requireActor(revoke) })
	revoke.Flags().String("as", "", "who revokes (recorded in the audit log)")
	revoke.Flags().StringVar(&rr.Reason, "reason", "", "why")
	cmd.AddCommand(plan, issue, list, show, approve, revoke, execute)
	return cmd
}

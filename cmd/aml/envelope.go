package main

import (
	"fmt"
	"strings"

	amlapp "github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/twin/envelope"
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
		"envelope.cycle", "as", &cr, func(x []string) error { cr.ID = x[0]; return a.requireActor(cycle) }, func(r any) bool { return r.(envelope.CycleResult).Status != "" })
	cycle.Flags().String("as", "", "who runs the supervisor (recorded in the audit log)")
	cmd.AddCommand(issue, list, show, approve, revoke, cycle)
	return cmd
}

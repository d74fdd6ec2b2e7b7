package render

import (
	"fmt"
	"io"
	"sort"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/twin/envelope"
)

// printEnvelope renders an operating envelope as its signed trail has it.
func printEnvelope(w io.Writer, r *envelope.Record) {
	if r == nil || r.Envelope == nil {
		return
	}
	e := r.Envelope
	status := string(e.Status)
	if r.Expired && e.Status != "REVOKED" {
		status += " (expired)"
	}
	fmt.Fprintf(w, "envelope %s  status %s  line %s\n", e.EnvelopeID, status, e.LineID)
	fmt.Fprintf(w, "scene %s@%s  model %s  proposed by %s at %s; expires %s\n", e.SceneID, e.SceneVersion, e.ModelID, e.CreatedBy, certTime(e.CreatedAt), certTime(e.ExpiresAt))
	if e.ApprovedBy != "" {
		fmt.Fprintf(w, "approved by %s at %s\n", e.ApprovedBy, certTime(e.ApprovedAt))
	}
	if e.RevokedBy != "" {
		what := "revoked"
		if r.Stop != "" {
			what = "stopped"
		}
		fmt.Fprintf(w, "%s by %s at %s: %s\n", what, e.RevokedBy, certTime(e.RevokedAt), e.RevokeReason)
	}
	fmt.Fprintf(w, "at most %d moves per hour\n", e.MaxMovesPerHour)
	vars := make([]string, 0, len(e.Bounds))
	for v := range e.Bounds {
		vars = append(vars, v)
	}
	sort.Strings(vars)
	table(w, "CONTROL\tMIN\tMAX", len(vars), "control(s) in the envelope", func(row func(...any)) {
		for _, v := range vars {
			row(v, e.Bounds[v].Min, e.Bounds[v].Max)
		}
	})
}

func printEnvelopes(w io.Writer, items []*envelope.Record) {
	table(w, "ENVELOPE\tLINE\tSTATUS\tMOVES/H\tEXPIRES\tAPPROVED BY", len(items), "envelope(s)", func(row func(...any)) {
		for _, r := range items {
			e := r.Envelope
			st := string(e.Status)
			if r.Expired && e.Status != "REVOKED" {
				st += "(expired)"
			}
			if r.Stop != "" {
				st = "STOPPED"
			}
			row(e.EnvelopeID, e.LineID, st, e.MaxMovesPerHour, certTime(e.ExpiresAt), dash(e.ApprovedBy))
		}
	})
}

func printCycle(w io.Writer, r envelope.CycleResult) {
	fmt.Fprintf(w, "cycle %s under envelope %s: %s", r.ActionID, r.EnvelopeID, r.Status)
	if r.Reason != "" {
		fmt.Fprintf(w, " (%s)", r.Reason)
	}
	fmt.Fprintf(w, "\n%s\n", r.Detail)
	if r.Status == envelope.StatusStopped {
		fmt.Fprintln(w, "the envelope is stopped: a person must review the line and approve a new envelope")
	}
	if len(r.Writes) > 0 {
		table(w, "VARIABLE\tNODE\tFROM\tTO\tREADBACK\tVERIFIED", len(r.Writes), "move(s) written", func(row func(...any)) {
			for _, m := range r.Writes {
				row(m.VariableID, m.NodeID, m.From, m.To, m.Readback, m.Verified)
			}
		})
	}
}

func printStepTestPlan(w io.Writer, r app.StepTestPlanResponse) {
	p := r.Plan
	if p == nil {
		return
	}
	fmt.Fprintf(w, "step test (%s) on scene %s@%s, line %s: %d actions over %gs, a move every %gs%s\n", p.Signal, p.SceneID, p.SceneVersion, p.LineID,
		p.Actions, p.DurationSec, p.HoldSec, map[bool]string{true: ", one control at a time"}[p.OneAtATime])
	fmt.Fprintf(w, "operating point from the %s %s\n", r.BaseFrom, r.SnapshotID)
	table(w, "CONTROL\tBASE\tAMPLITUDE", len(p.Variables), "control(s) excited", func(row func(...any)) {
		for _, v := range p.Variables {
			row(v, p.Base[v], p.Amplitude[v])
		}
	})
	table(w, "AT\tSET", len(p.Moves), "move(s)", func(row func(...any)) {
		for _, m := range p.Moves {
			row(fmt.Sprintf("%gs", m.AtSec), fmtControls(m.Set))
		}
	})
	for _, n := range p.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	for _, pr := range p.Problems {
		fmt.Fprintf(w, "problem: %s\n", pr)
	}
}

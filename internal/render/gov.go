package render

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/retention"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/govern"
)

// auditEllipsis shortens s to at most n runes.
func auditEllipsis(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func printAudit(w io.Writer, res app.AuditListResponse) {
	es := res.Items
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tAT\tACTOR\tACTION\tSUBJECT\tLINE\tHASH\tPAYLOAD")
	for _, e := range es {
		line := e.LineID
		if line == "" {
			line = "-"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%.12s…\t%s\n", e.Seq, e.At.Format("2006-01-02T15:04:05.000Z"), e.Actor, e.Action, e.Subject, line, e.Hash, auditEllipsis(string(e.Payload), 60))
	}
	tw.Flush()
	fmt.Fprintf(w, "%d entr%s", len(es), auditPlural(int64(len(es)), "y", "ies"))
	if res.NextAfter > 0 {
		fmt.Fprintf(w, "; more may exist: continue with --after %d", res.NextAfter)
	}
	fmt.Fprintln(w)
}

func auditPlural(n int64, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func printCerts(w io.Writer, items []contract.CertListItem) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tLINE\tTRIAL\tREQUESTED BY\tAPPROVED BY\tEXPIRES\tIMPROVEMENT\tVERIFIED")
	for _, it := range items {
		c := it.Cert
		v := "yes"
		if !it.Verified {
			v = "NO: " + it.Problem
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.4g\t%s\n", c.RecommendationID, c.Status, it.LineID, dash(c.TrialID), c.CreatedBy, dash(c.ApprovedBy),
			certTime(c.ExpiresAt), c.BaselineComparison.Improvement, v)
	}
	tw.Flush()
	fmt.Fprintf(w, "%d certificate(s)\n", len(items))
}

func printTransition(w io.Writer, r *contract.CertRecord) {
	if r == nil || r.Cert == nil {
		return
	}
	c := r.Cert
	fmt.Fprintf(w, "certificate %s is %s", c.RecommendationID, c.Status)
	switch c.Status {
	case contract.CertApproved:
		fmt.Fprintf(w, " (approved by %s at %s, expires %s)", c.ApprovedBy, certTime(c.ApprovedAt), certTime(c.ExpiresAt))
	case contract.CertRevoked:
		fmt.Fprintf(w, " (revoked by %s: %s)", c.RevokedBy, c.RevokeReason)
	}
	fmt.Fprintln(w)
}

func certTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}

func printCert(w io.Writer, r *contract.CertRecord) {
	if r == nil || r.Cert == nil {
		return
	}
	c := r.Cert
	fmt.Fprintf(w, "certificate %s  status %s  line %s\n", c.RecommendationID, c.Status, r.LineID)
	fmt.Fprintf(w, "requested by %s at %s; expires %s\n", c.CreatedBy, certTime(c.CreatedAt), certTime(c.ExpiresAt))
	if c.ApprovedBy != "" {
		fmt.Fprintf(w, "approved by %s at %s\n", c.ApprovedBy, certTime(c.ApprovedAt))
	}
	if c.RevokedBy != "" {
		fmt.Fprintf(w, "revoked by %s at %s: %s\n", c.RevokedBy, certTime(c.RevokedAt), c.RevokeReason)
	}
	if !c.ExecutedAt.IsZero() {
		fmt.Fprintf(w, "executed at %s\n", certTime(c.ExecutedAt))
	}
	if !c.ExpiredAt.IsZero() {
		fmt.Fprintf(w, "marked expired at %s\n", certTime(c.ExpiredAt))
	}
	fmt.Fprintf(w, "trial %s  scene %s@%s\n", c.TrialID, c.SceneID, c.SceneVersion)
	fmt.Fprintf(w, "hashes: certificate %s\n        trial %s\n        scene %s\n        snapshot %s\n        model %s\n        objective %s\n",
		c.CertificateHash, c.TrialHash, c.SceneHash, c.SnapshotHash, c.ModelHash, c.ObjectiveHash)
	fmt.Fprintf(w, "signed by key %s; issue recorded in audit entry %d\n", c.KeyID, r.AuditSeq)
	b := c.BaselineComparison
	fmt.Fprintf(w, "improvement %.4g (baseline cost %.4g → candidate %.4g); uncertainty max std %.3g, coverage %.3g; OOD distance %.3g\n",
		b.Improvement, b.BaselineCost, b.CandidateCost, c.Uncertainty.MaxStd, c.Uncertainty.Coverage, c.OutOfDistribution.Distance)
	if len(c.CandidateControlTrajectory) > 0 {
		step := c.CandidateControlTrajectory[0]
		parts := []string{}
		for _, k := range slices.Sorted(maps.Keys(step)) {
			parts = append(parts, fmt.Sprintf("%s=%g", k, step[k]))
		}
		fmt.Fprintf(w, "first step (what a write applies): %s  (%d steps certified)\n", strings.Join(parts, " "), len(c.CandidateControlTrajectory))
	}
}

// printCertShow is a certificate with its predicted target trajectories.
func printCertShow(w io.Writer, r app.CertShowResponse) {
	printCert(w, r.CertRecord)
	if len(r.Targets) > 0 {
		fmt.Fprintln(w, "predicted targets (mean, tube) against their target; baseline: holding the setpoints")
	}
	for _, t := range r.Targets {
		printCertTarget(w, t)
	}
}

// printCertTarget prints a target at the horizon's end, with holding's
// prediction, then at its start and where the tube reaches farthest from
// the target: weight [g]: target 250.0, predicted 249.6 (248.9 … 250.3)
// at step 59; baseline 247.1.
func printCertTarget(w io.Writer, t app.CertTarget) {
	n := len(t.Mean)
	if n == 0 || len(t.Lower) != n || len(t.Upper) != n {
		return
	}
	at := func(k int) string {
		return fmt.Sprintf("%s (%s … %s) at step %d", num(t.Mean[k]), num(t.Lower[k]), num(t.Upper[k]), k)
	}
	unit := ""
	if t.Unit != "" {
		unit = " [" + t.Unit + "]"
	}
	line := fmt.Sprintf("%s%s: target %s, predicted %s", t.VariableID, unit, num(t.Target), at(n-1))
	if len(t.Baseline) == n {
		line += "; baseline " + num(t.Baseline[n-1])
	}
	fmt.Fprintln(w, line)
	worst := t.WorstStep
	if worst < 0 || worst >= n {
		worst = n - 1
	}
	fmt.Fprintf(w, "  start %s; farthest from the target %s\n", at(0), at(worst))
}

// num formats a figure of a target's unit: one decimal from 10 on, else
// four significant digits.
func num(v float64) string {
	if math.Abs(v) >= 10 {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

func printCertVerify(w io.Writer, rep govern.VerifyReport) {
	for _, ch := range rep.Checks {
		fmt.Fprintf(w, "%s %-16s %s\n", okMark(ch.OK), ch.Name, ch.Detail)
	}
	if rep.OK {
		fmt.Fprintf(w, "certificate %s verified (status %s, key %s, %d audit entries)\n", rep.CertificateID, rep.Status, rep.KeyID, rep.AuditEntries)
	}
}

func printExecution(w io.Writer, r govern.Result) {
	if !r.Allowed {
		fmt.Fprintf(w, "write under certificate %s DENIED: %s\n%s\n", r.CertificateID, r.Reason, r.Detail)
		printRevalidation(w, r.Revalidation)
		return
	}
	fmt.Fprintf(w, "certificate %s on line %s, run %s (snapshot %s): %s\n", r.CertificateID, r.LineID, dash(r.RunID), r.SnapshotID, r.Status)
	printRevalidation(w, r.Revalidation)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tVARIABLE\tFROM\tTO\tREADBACK\tRESULT")
	for _, m := range r.Writes {
		res := "verified"
		if !m.Verified {
			res = "FAILED: " + m.Error
		}
		fmt.Fprintf(tw, "%s\t%s\t%g\t%g\t%g\t%s\n", m.NodeID, m.VariableID, m.From, m.To, m.Readback, res)
	}
	tw.Flush()
	if r.Executed {
		fmt.Fprintf(w, "%d move(s) written and read back; certificate EXECUTED\n", r.Written())
	} else {
		fmt.Fprintf(w, "%s\n", r.Detail)
	}
}

// printRevalidation is the re-run from a fresh snapshot of an execution
// whose certified snapshot was too old.
func printRevalidation(w io.Writer, rv *govern.Revalidation) {
	if rv == nil {
		return
	}
	verdict := "passed"
	if !rv.OK {
		verdict = "FAILED"
	}
	fmt.Fprintf(w, "re-validated from fresh snapshot %s (certified snapshot %s): re-run %s %s; improvement %.4g (baseline cost %.4g → %.4g); OOD distance %.4g (threshold %.4g)\n",
		dash(rv.SnapshotID), rv.CertifiedSnapshotID, dash(rv.TrialID), verdict, rv.Improvement, rv.BaselineCost, rv.CandidateCost, rv.OODDistance, rv.OODThreshold)
	for _, t := range rv.Targets {
		fmt.Fprintf(w, "  %s at step %d: target %s, predicted %s (%s … %s)\n", t.VariableID, t.Step, num(t.Target), num(t.Mean), num(t.Lower), num(t.Upper))
	}
}

func printChannel(w io.Writer, c *contract.ChannelRecord) {
	if c == nil {
		return
	}
	fmt.Fprintf(w, "line %s  channel %s\nprofile %s  policy %s\n", c.LineID, c.ChannelID, c.Profile, c.ControlPolicy)
	if c.SceneID != "" {
		fmt.Fprintf(w, "scene %s@%s\n", c.SceneID, c.SceneVersion)
	}
	for _, k := range slices.Sorted(maps.Keys(c.Bounds)) {
		fmt.Fprintf(w, "  bound %-26s [%g, %g]\n", k, c.Bounds[k].Min, c.Bounds[k].Max)
	}
	fmt.Fprintf(w, "set by %s at %s\n", c.UpdatedBy, certTime(c.UpdatedAt))
}

func printRetention(w io.Writer, rep retention.Report) {
	verb := "removed"
	if rep.DryRun {
		verb = "would remove"
	}
	fmt.Fprintf(w, "%s %d dataset(s), %d retired model artifact set(s), %d job dir(s): %.1f MiB\n", verb, len(rep.Datasets), len(rep.ModelArtifacts), len(rep.JobDirs), float64(rep.Bytes)/(1<<20))
	if len(rep.SkippedInUse) > 0 {
		fmt.Fprintf(w, "kept %d old dataset(s) still used by jobs or models\n", len(rep.SkippedInUse))
	}
	if c := rep.SharedCollected; c != nil {
		fmt.Fprintf(w, "shared artifact store: collected %d unreferenced file(s), %d chunk(s), %.1f MiB\n", c.Blobs, c.Chunks, float64(c.Bytes)/(1<<20))
	}
}

func printTokens(w io.Writer, items []auth.TokenInfo) {
	now := time.Now()
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tROLE\tLINES\tCREATED\tSTATE")
	for _, t := range items {
		state := "active"
		switch {
		case t.RevokedAt != nil:
			state = "revoked " + t.RevokedAt.Format(time.RFC3339) + " by " + t.RevokedBy
		case !t.Active(now):
			state = "expired " + t.ExpiresAt.Format(time.RFC3339)
		case t.ExpiresAt != nil:
			state = "active until " + t.ExpiresAt.Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Name, t.Role, tokenLines(t.Lines), t.CreatedAt.Format(time.RFC3339), state)
	}
	tw.Flush()
}

func tokenLines(l []string) string {
	if len(l) == 0 {
		return "all"
	}
	return strings.Join(l, ",")
}

func printTokenCreated(w io.Writer, out app.TokenCreateResponse) {
	fmt.Fprintf(w, "token %s for %s (role %s, lines %s)\n", out.ID, out.Name, out.Role, tokenLines(out.Lines))
	fmt.Fprintln(w, out.Token)
	fmt.Fprintln(w, "store it now: it cannot be shown again")
}

func printMoves(w io.Writer, l []app.CertMove) {
	table(w, "VARIABLE\tNODE\tFROM\tTO\tDELTA", len(l), "move(s) at the first step", func(row func(...any)) {
		for _, m := range l {
			row(m.VariableID, m.NodeID, fmtOpt(m.From), m.To, fmtOpt(m.Delta))
		}
	})
}

package benefit

import (
	"context"
	"fmt"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/engine"
	"github.com/aml-project/aml/internal/twin/govern"
	"github.com/aml-project/aml/internal/twin/guard"
)

// The per_move mode's governed path (hitl_governed: one approval per
// move). Each move the twin recommends becomes a recommendation
// certificate in the study's store: the cycle's snapshot and the passing
// trial are stored and the engineer issues the certificate on them
// (twinstore.IssueCertificate, signed with the deployment key, audited).
// After Options.ApprovalDelaySteps the approver — a person other than the
// requester, with the approver role — approves it with a signed approval
// (ApproveCertificateAs), and the certificate is executed through
// govern.Execute, the platform's one governed write: it checks the
// signed approval and the audit trail, runs the write guard (channel,
// frozen scene, maxDeltaPerAction, node and line intervals,
// maxActionsPerRun against the snapshot's run, the certificate's expiry)
// and writes through guard.Execute to the simulated line with readback,
// every write recorded in the write history and the audit log. A person
// approves minutes after issue, when the certified snapshot is older than
// the guard's freshness limit: as internal/app's execute does, the study
// then re-validates — a fresh snapshot of the line, the certified
// trajectory re-run from it with the same model (engine Trial), both
// stored — and the guard judges the moves from that fresh snapshot; a
// re-run that no longer passes or improves is denied
// REVALIDATION_FAILED. Approvals count the signed approvals, writes the
// certificates the guard let through and read back; a denial is counted
// by its reason (ModeResult.Denials).

// pendingCert is an issued certificate waiting for its approval.
type pendingCert struct {
	id    string
	trial *contract.VirtualTrial
	snap  *contract.TwinSnapshot
	at    int // global step from which it is approved and executed
}

// issue stores the cycle's snapshot and trial and has the engineer issue
// a certificate for the trial at global step g. A trial the store refuses
// to certify (AML_CERT_REFUSED) is counted as a denial and gives no
// certificate (nil).
func (g *governor) issue(ctx context.Context, l *loop, step int, snap *contract.TwinSnapshot, trial *contract.VirtualTrial) (*pendingCert, error) {
	if err := g.st.PutSnapshot(ctx, snap, false); err != nil {
		return nil, err
	}
	if _, err := g.st.PutTrial(ctx, trial, contract.TrialManual, ""); err != nil {
		return nil, err
	}
	rec, err := g.st.IssueCertificate(ctx, trial.TrialID, Engineer, g.key, cert.DefaultTTL, l.at(step))
	if core.CodeOf(err) == core.CodeCertRefused {
		l.deny("CERT_REFUSED")
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	l.res.Certificates++
	return &pendingCert{id: rec.Cert.RecommendationID, trial: trial, snap: snap, at: step + l.o.ApprovalDelaySteps}, nil
}

// execute has the approver approve certificate p at global step step
// (signed) and runs its governed write.
func (g *governor) execute(ctx context.Context, l *loop, step int, p *pendingCert) error {
	now := l.at(step)
	_, err := g.st.ApproveCertificateAs(ctx, p.id, twinstore.Approver{Name: Approver, Role: twinstore.RoleApprover}, g.key, now)
	if core.CodeOf(err) == core.CodeCertExpired {
		l.deny(guard.ReasonCertExpired)
		return nil
	}
	if err != nil {
		return err
	}
	l.res.Approvals++
	opts := govern.Options{Actor: Engineer, Now: now, WallNow: now, SnapshotMaxAge: guard.DefaultSnapshotMaxAge}
	if age := now.Sub(p.snap.CapturedAt); age > guard.DefaultSnapshotMaxAge {
		if opts.Snapshot, opts.Revalidation, err = g.revalidate(ctx, l, step, p); err != nil {
			return err
		}
	}
	r, err := govern.Execute(ctx, g.st, g.key.Public, p.id, lineWriter{l}, opts)
	switch {
	case r.Status == govern.StatusDenied:
		l.deny(r.Reason)
		return nil
	case err != nil:
		return fmt.Errorf("certificate %s: %w", p.id, err)
	case !r.Executed:
		return core.Errorf(core.CodeInternal, "certificate %s: written (%s) but not executed", p.id, r.Status)
	}
	l.lastLine = step
	l.runActions++
	l.res.Writes++
	l.res.Moves += r.Written()
	return nil
}

// revalidate takes a fresh snapshot at global step step, re-runs the
// certified trajectory of p from it with the twin's model, stores both
// and returns the fresh snapshot with the outcome (internal/app's
// revalidation: the write goes ahead only when the re-run passes and
// still improves on holding).
func (g *governor) revalidate(ctx context.Context, l *loop, step int, p *pendingCert) (*contract.TwinSnapshot, *govern.Revalidation, error) {
	now := l.at(step)
	rv := &govern.Revalidation{CertifiedSnapshotID: p.snap.SnapshotID, CertifiedCapturedAt: p.snap.CapturedAt}
	fresh, err := l.snapshot(ctx, step, "-fresh")
	if err != nil {
		return nil, nil, err
	}
	if err := g.st.PutSnapshot(ctx, fresh, false); err != nil {
		return nil, nil, err
	}
	rv.SnapshotID, rv.CapturedAt = fresh.SnapshotID, fresh.CapturedAt
	t, _, err := l.tw.Trial(ctx, engine.TrialInput{Scene: l.scene, Snapshot: fresh, Objective: l.obj,
		Candidate: p.trial.CandidateControlTrajectory, TrialID: p.trial.TrialID + "-revalidation", CreatedBy: Engineer, Now: now})
	if err != nil {
		rv.Reason = fmt.Sprintf("the certified trajectory could not be re-run from fresh snapshot %s: %v", fresh.SnapshotID, err)
		return fresh, rv, nil
	}
	if _, err := g.st.PutTrial(ctx, t, contract.TrialManual, ""); err != nil {
		return nil, nil, err
	}
	b := t.BaselineComparison
	rv.TrialID, rv.Passed, rv.RejectCode = t.TrialID, t.Passed(), t.RejectCode
	rv.Improvement, rv.BaselineCost, rv.CandidateCost = b.Improvement, b.BaselineCost, b.CandidateCost
	rv.OODDistance = t.OutOfDistribution.Distance
	switch {
	case !rv.Passed:
		rv.Reason = fmt.Sprintf("re-run %s from the fresh snapshot does not pass (%s)", t.TrialID, t.RejectCode)
	case !(b.Improvement > 0):
		rv.Reason = fmt.Sprintf("re-run %s no longer improves on holding: improvement %.6g", t.TrialID, b.Improvement)
	default:
		rv.OK = true
	}
	return fresh, rv, nil
}

// deny counts a governed write's denial by its reason.
func (l *loop) deny(reason string) {
	if l.res.Denials == nil {
		l.res.Denials = map[string]int{}
	}
	l.res.Denials[reason]++
	l.res.Refused++
}

package guard

import (
	"context"
	"fmt"
	"math"
	"strings"

	"time"

	"github.com/aml-project/aml/internal/twin/contract"
)

// Writes of an approved step test (Request.StepTest, StepIndex,
// StepStart). A person approves the whole test; the guard checks every
// move against it. The checks replace 6, 7, 9 and 11 of the certificate
// path; the others (channel, scene, history) are the same:
//
//   - no certificate or envelope besides it            INVALID_REQUEST
//   - it verifies (signature, key)                     CERT_INVALID
//   - it is APPROVED by someone other than its         CERT_REVOKED,
//     proposer, not revoked, not expired               CERT_NOT_APPROVED,
//     CERT_EXPIRED
//   - it is for this line and frozen scene (hash)      LINE_MISMATCH,
//     SCENE_MISMATCH
//   - the snapshot the From values come from is fresh  SNAPSHOT_STALE
//   - StepIndex names a move of the test, and the      MOVES_MISMATCH
//     moves set exactly its variables to its values
//   - Now − StepStart lies in the move's slot          OUTSIDE_SLOT
//     [atSec, atSec + ½·holdSec), and move i > 0 only   OUTSIDE_SLOT
//     after move i − 1 was written in the same run
//   - each target within the test's bounds, each       OUT_OF_BOUNDS,
//     |to − from| ≤ maxDeltaPerAction, each target     DELTA_TOO_LARGE
//     within the channel's bounds (bounded_auto)
//   - the history checks (clock, intervals, move not   (as the certificate
//     written before, actions per run)                 path)
//
// Moves are written in order: a move is refused (CERT_ALREADY_USED by the
// history) when written twice, and each later move's From must be the
// value the line holds (Execute reads before it writes).
func checkStepTest(ctx context.Context, prof *contract.ChannelProfile, s *contract.SceneContract, hist History, req Request, now time.Time) Decision {
	c := req.StepTest
	if req.Cert != nil || req.Envelope != nil || req.ActionID != "" {
		return deny(ReasonInvalidRequest, "a step test is written alone, without a certificate, envelope or action id")
	}
	if err := c.Verify(req.PublicKey); err != nil {
		return deny(ReasonCertInvalid, "%v", err)
	}
	switch {
	case c.Status == contract.CertRevoked:
		return deny(ReasonCertRevoked, "step test %s was revoked by %s: %s", c.TestID, c.RevokedBy, c.RevokeReason)
	case c.Status != contract.CertApproved:
		return deny(ReasonCertNotApproved, "step test %s is %s, not APPROVED", c.TestID, c.Status)
	case strings.TrimSpace(c.ApprovedBy) == "" || contract.SameIdentity(c.ApprovedBy, c.CreatedBy):
		return deny(ReasonCertNotApproved, "step test %s has no approval by someone other than its proposer", c.TestID)
	case c.Expired(now):
		return deny(ReasonCertExpired, "step test %s expired at %s", c.TestID, c.ExpiresAt.UTC().Format(time.RFC3339Nano))
	case c.LineID != req.LineID:
		return deny(ReasonLineMismatch, "step test %s is for line %q, not %q", c.TestID, c.LineID, req.LineID)
	}
	sh, err := s.Hash()
	if err != nil {
		return deny(ReasonNoPolicy, "cannot hash scene: %v", err)
	}
	if c.SceneID != s.SceneID || c.SceneVersion != s.SceneVersion || c.SceneHash != sh {
		return deny(ReasonSceneMismatch, "step test is for scene %s %s (%s), given %s %s (%s)", c.SceneID, c.SceneVersion, c.SceneHash, s.SceneID, s.SceneVersion, sh)
	}
	if d, ok := checkSnapshotAge(req, now); !ok {
		return d
	}
	if req.StepIndex < 0 || req.StepIndex >= len(c.Moves) {
		return deny(ReasonMovesMismatch, "step test %s has no move %d", c.TestID, req.StepIndex)
	}
	want := c.Moves[req.StepIndex]
	if req.StepStart.IsZero() {
		return deny(ReasonInvalidRequest, "no step-test start time")
	}
	from, to := c.Slot(req.StepIndex)
	if at := now.Sub(req.StepStart).Seconds(); at < from-1e-9 || at >= to {
		return deny(ReasonOutsideSlot, "move %d of step test %s belongs to [%gs, %gs) after the start, now is %gs", req.StepIndex, c.TestID, from, to, at)
	}
	if len(req.Moves) != len(want.Set) {
		return deny(ReasonMovesMismatch, "move %d of step test %s sets %d variables, the request %d", req.StepIndex, c.TestID, len(want.Set), len(req.Moves))
	}
	vars, nodes := map[string]bool{}, map[string]bool{}
	for i, m := range req.Moves {
		x, ok := want.Set[m.VariableID]
		switch {
		case strings.TrimSpace(m.NodeID) == "" || strings.TrimSpace(m.VariableID) == "":
			return deny(ReasonMovesMismatch, "move %d has no node or variable", i)
		case vars[m.VariableID] || nodes[m.NodeID]:
			return deny(ReasonMovesMismatch, "variable %s or node %s is written twice", m.VariableID, m.NodeID)
		case !finite(m.From) || !finite(m.To):
			return deny(ReasonMovesMismatch, "move %d of %s is not finite", i, m.VariableID)
		case s.Control(m.VariableID) == nil:
			return deny(ReasonMovesMismatch, "%s is not a control of scene %s", m.VariableID, s.SceneID)
		case !ok || !near(m.To, x):
			return deny(ReasonMovesMismatch, "move %d of step test %s does not set %s to %v", req.StepIndex, c.TestID, m.VariableID, m.To)
		}
		vars[m.VariableID], nodes[m.NodeID] = true, true
		if b := c.Bounds[m.VariableID]; m.To < b.Min || m.To > b.Max {
			return deny(ReasonOutOfBounds, "%s target %v is outside the step test's bounds [%v, %v]", m.VariableID, m.To, b.Min, b.Max)
		}
		limit, ok := s.WritePolicy.MaxDeltaPerAction[m.VariableID]
		if !ok || !finite(limit) || limit <= 0 {
			return deny(ReasonNoPolicy, "no maxDeltaPerAction for %s", m.VariableID)
		}
		if d := math.Abs(m.Delta()); d > limit*(1+1e-12) {
			return deny(ReasonDeltaTooLarge, "%s moves %v, more than maxDeltaPerAction %v", m.VariableID, d, limit)
		}
		if ctl := s.Control(m.VariableID); (ctl.Min != nil && m.To < *ctl.Min) || (ctl.Max != nil && m.To > *ctl.Max) {
			return deny(ReasonOutOfBounds, "%s target %v is outside the scene's range", m.VariableID, m.To)
		}
		if prof.ControlPolicy == contract.PolicyBoundedAuto {
			if b, ok := prof.Bounds[m.VariableID]; !ok || m.To < b.Min || m.To > b.Max {
				return deny(ReasonOutOfBounds, "%s target %v is outside the channel's bounds", m.VariableID, m.To)
			}
		}
	}
	if hist == nil {
		return deny(ReasonHistoryError, "no write history")
	}
	if d, ok := checkStepOrder(ctx, hist, req, now); !ok {
		return d
	}
	actionID := contract.StepTestActionID(c.TestID, req.StepIndex)
	if d, ok := checkHistory(ctx, hist, req, s.WritePolicy, nodes, actionID, now); !ok {
		return d
	}
	_, hash, _ := req.authority()
	return Decision{Allowed: true, Detail: fmt.Sprintf("move %d of step test %s (%d variables)", req.StepIndex, c.TestID, len(req.Moves)),
		grant: &grant{lineID: req.LineID, runID: req.RunID, certHash: hash, moves: append([]Move(nil), req.Moves...)}}
}

// checkStepOrder refuses (OUTSIDE_SLOT) move i > 0 of a step test unless
// the history holds move i − 1 of the same test written in the same run:
// the slot alone is measured from a StepStart the caller chooses, so
// without this a caller could pick the start that puts any later move
// in its slot and skip the moves before it. The lookback (RunLookback)
// is at least a step test's longest life (StepTestMaxTTL).
func checkStepOrder(ctx context.Context, hist History, req Request, now time.Time) (Decision, bool) {
	i := req.StepIndex
	if i == 0 {
		return Decision{}, true
	}
	wall := req.WallNow
	if wall.IsZero() {
		wall = now
	}
	recs, err := hist.Writes(ctx, req.LineID, wall.Add(-max(RunLookback, contract.StepTestMaxTTL)))
	if err != nil {
		return deny(ReasonHistoryError, "write history of line %s: %v", req.LineID, err), false
	}
	prev := contract.StepTestActionID(req.StepTest.TestID, i-1)
	for _, r := range recs {
		if r.CertificateID == prev && r.RunID == req.RunID && r.LineID == req.LineID {
			return Decision{}, true
		}
	}
	return deny(ReasonOutsideSlot, "move %d of step test %s comes before move %d was written in run %s: moves are written in order", i, req.StepTest.TestID, i-1, req.RunID), false
}

package guard

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/twin/contract"
)

// Writes under an operating envelope (Request.Envelope). Under the
// bounded_auto policy a person approves an envelope instead of each move;
// the supervisor (package twin/envelope) re-optimises each cycle and asks
// the guard to write the cycle's moves. The checks replace 6, 7, 9 and 11
// of the certificate path; the others are the same:
//
//   - the channel's policy is bounded_auto             ENVELOPE_NOT_ALLOWED
//   - an action id is given                            INVALID_REQUEST
//   - the envelope verifies (signature, key)           CERT_INVALID
//   - it is APPROVED by someone other than its         CERT_REVOKED,
//     proposer, not revoked, not expired               CERT_NOT_APPROVED,
//     (expiresAt ≤ Now)                                CERT_EXPIRED
//   - it is for this line and frozen scene (hash)      LINE_MISMATCH,
//     SCENE_MISMATCH
//   - the snapshot is fresh                            SNAPSHOT_STALE
//   - at least one move, each a control of the scene,  MOVES_MISMATCH
//     on distinct nodes and variables, finite
//   - each control is in the envelope and its target   OUTSIDE_ENVELOPE
//     within the envelope's bounds
//   - each |to − from| ≤ maxDeltaPerAction, each       DELTA_TOO_LARGE,
//     target within the channel's bounds               OUT_OF_BOUNDS
//   - the writes under the envelope in the rolling     RATE_EXCEEDED
//     hour plus these moves ≤ maxMovesPerHour
//   - the history checks (clock, intervals, action     (as the certificate
//     not used before, actions per run)                path)
//
// The envelope's signature is checked here; that its approval is signed
// by a person and that it was not revoked is the supervisor's check on
// the signed records (the guard sees the envelope as loaded from them).

// EnvelopeRateWindow is the rolling window maxMovesPerHour counts in.
const EnvelopeRateWindow = time.Hour

func checkEnvelope(ctx context.Context, prof *contract.ChannelProfile, s *contract.SceneContract, hist History, req Request, now time.Time) Decision {
	e := req.Envelope
	if prof.ControlPolicy != contract.PolicyBoundedAuto {
		return deny(ReasonEnvelopeNotAllowed, "channel %s has policy %s: an operating envelope authorises writes only under %s; every move needs its own approved certificate", prof.ChannelID, prof.ControlPolicy, contract.PolicyBoundedAuto)
	}
	if e == nil {
		return deny(ReasonNoCertificate, "an action id without an envelope")
	}
	if req.Cert != nil {
		return deny(ReasonInvalidRequest, "both a certificate and an envelope were given")
	}
	if strings.TrimSpace(req.ActionID) == "" || strings.Contains(req.ActionID, "/") {
		return deny(ReasonInvalidRequest, "an envelope write needs an action id without '/'")
	}
	if err := e.Verify(req.PublicKey); err != nil {
		return deny(ReasonCertInvalid, "%v", err)
	}
	switch {
	case e.Status == contract.CertRevoked:
		return deny(ReasonCertRevoked, "envelope %s was revoked by %s: %s", e.EnvelopeID, e.RevokedBy, e.RevokeReason)
	case e.Status != contract.CertApproved:
		return deny(ReasonCertNotApproved, "envelope %s is %s, not APPROVED", e.EnvelopeID, e.Status)
	case strings.TrimSpace(e.ApprovedBy) == "" || contract.SameIdentity(e.ApprovedBy, e.CreatedBy):
		return deny(ReasonCertNotApproved, "envelope %s has no approval by someone other than its proposer", e.EnvelopeID)
	case e.Expired(now):
		return deny(ReasonCertExpired, "envelope %s expired at %s", e.EnvelopeID, e.ExpiresAt.UTC().Format(time.RFC3339Nano))
	case e.LineID != req.LineID:
		return deny(ReasonLineMismatch, "envelope %s is for line %q, not %q", e.EnvelopeID, e.LineID, req.LineID)
	}
	sh, err := s.Hash()
	if err != nil {
		return deny(ReasonNoPolicy, "cannot hash scene: %v", err)
	}
	if e.SceneID != s.SceneID || e.SceneVersion != s.SceneVersion || e.SceneHash != sh {
		return deny(ReasonSceneMismatch, "envelope is for scene %s %s (%s), given %s %s (%s)", e.SceneID, e.SceneVersion, e.SceneHash, s.SceneID, s.SceneVersion, sh)
	}
	if d, ok := checkSnapshotAge(req, now); !ok {
		return d
	}
	if len(req.Moves) == 0 {
		return deny(ReasonMovesMismatch, "no moves")
	}
	vars, nodes := map[string]bool{}, map[string]bool{}
	for i, m := range req.Moves {
		switch {
		case strings.TrimSpace(m.NodeID) == "" || strings.TrimSpace(m.VariableID) == "":
			return deny(ReasonMovesMismatch, "move %d has no node or variable", i)
		case vars[m.VariableID]:
			return deny(ReasonMovesMismatch, "variable %s is moved twice", m.VariableID)
		case nodes[m.NodeID]:
			return deny(ReasonMovesMismatch, "node %s is written twice", m.NodeID)
		case !finite(m.From) || !finite(m.To):
			return deny(ReasonMovesMismatch, "move %d of %s is not finite", i, m.VariableID)
		case s.Control(m.VariableID) == nil:
			return deny(ReasonMovesMismatch, "%s is not a control of scene %s", m.VariableID, s.SceneID)
		}
		vars[m.VariableID], nodes[m.NodeID] = true, true
		b, ok := e.Bounds[m.VariableID]
		switch {
		case !ok:
			return deny(ReasonOutsideEnvelope, "envelope %s does not let %s move", e.EnvelopeID, m.VariableID)
		case m.To < b.Min || m.To > b.Max:
			return deny(ReasonOutsideEnvelope, "%s target %v is outside envelope %s's bounds [%v, %v]", m.VariableID, m.To, e.EnvelopeID, b.Min, b.Max)
		}
	}
	wp := s.WritePolicy
	for _, m := range req.Moves {
		limit, ok := wp.MaxDeltaPerAction[m.VariableID]
		if !ok || !finite(limit) || limit <= 0 {
			return deny(ReasonNoPolicy, "no maxDeltaPerAction for %s", m.VariableID)
		}
		if d := math.Abs(m.Delta()); d > limit*(1+1e-12) {
			return deny(ReasonDeltaTooLarge, "%s moves %v, more than maxDeltaPerAction %v", m.VariableID, d, limit)
		}
		b, ok := prof.Bounds[m.VariableID]
		switch {
		case !ok:
			return deny(ReasonOutOfBounds, "channel %s has no bounds for %s", prof.ChannelID, m.VariableID)
		case !finite(b.Min) || !finite(b.Max) || b.Min > b.Max:
			return deny(ReasonOutOfBounds, "channel %s has invalid bounds [%v, %v] for %s", prof.ChannelID, b.Min, b.Max, m.VariableID)
		case m.To < b.Min || m.To > b.Max:
			return deny(ReasonOutOfBounds, "%s target %v is outside [%v, %v]", m.VariableID, m.To, b.Min, b.Max)
		}
	}
	if hist == nil {
		return deny(ReasonHistoryError, "no write history")
	}
	wall := req.WallNow
	if wall.IsZero() {
		wall = now
	}
	prefix := contract.EnvelopeActionPrefix(e.EnvelopeID)
	recs, err := hist.Writes(ctx, req.LineID, wall.Add(-EnvelopeRateWindow))
	if err != nil {
		return deny(ReasonHistoryError, "write history of line %s: %v", req.LineID, err)
	}
	n := 0
	for _, r := range recs {
		if r.NodeID != "" && strings.HasPrefix(r.CertificateID, prefix) && wall.Sub(r.At) < EnvelopeRateWindow {
			n++
		}
	}
	if n+len(req.Moves) > e.MaxMovesPerHour {
		return deny(ReasonRateExceeded, "envelope %s allows %d moves per hour; %d were written in the last hour and this action has %d", e.EnvelopeID, e.MaxMovesPerHour, n, len(req.Moves))
	}
	actionID := prefix + req.ActionID
	if d, ok := checkHistory(ctx, hist, req, wp, nodes, actionID, now); !ok {
		return d
	}
	return Decision{Allowed: true, Detail: fmt.Sprintf("%d moves under envelope %s (action %s)", len(req.Moves), e.EnvelopeID, req.ActionID),
		grant: &grant{lineID: req.LineID, runID: req.RunID, certHash: e.CertificateHash + "/" + req.ActionID, moves: append([]Move(nil), req.Moves...)}}
}

// authority is the id the history records req's writes under and the
// hash its grant is for.
func (req Request) authority() (id, hash string, ok bool) {
	switch {
	case req.StepTest != nil && req.Envelope == nil && req.Cert == nil:
		return contract.StepTestActionID(req.StepTest.TestID, req.StepIndex), req.StepTest.CertificateHash + "/" + contract.StepTestActionID("", req.StepIndex), true
	case req.Envelope != nil && req.Cert == nil:
		return contract.EnvelopeActionPrefix(req.Envelope.EnvelopeID) + req.ActionID, req.Envelope.CertificateHash + "/" + req.ActionID, true
	case req.Cert != nil && req.Envelope == nil:
		return req.Cert.RecommendationID, req.Cert.CertificateHash, true
	}
	return "", "", false
}

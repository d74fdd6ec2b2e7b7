package guard

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
)

// Reason codes of a denied Decision. They are a public contract: never
// rename one, only add.
const (
	ReasonInvalidRequest           = "INVALID_REQUEST"
	ReasonNoChannel                = "NO_CHANNEL"
	ReasonChannelError             = "CHANNEL_ERROR"
	ReasonLineMismatch             = "LINE_MISMATCH"
	ReasonProfileNotTwin           = "PROFILE_NOT_TWIN"
	ReasonPolicyRecommendationOnly = "POLICY_RECOMMENDATION_ONLY"
	ReasonPolicyUnknown            = "POLICY_UNKNOWN"
	ReasonNoPolicy                 = "NO_POLICY"
	ReasonNoCertificate            = "NO_CERTIFICATE"
	ReasonCertInvalid              = "CERT_INVALID"
	ReasonCertNotApproved          = "CERT_NOT_APPROVED"
	ReasonCertRevoked              = "CERT_REVOKED"
	ReasonCertExpired              = "CERT_EXPIRED"
	ReasonSceneMismatch            = "SCENE_MISMATCH"
	ReasonSnapshotStale            = "SNAPSHOT_STALE"
	ReasonMovesMismatch            = "MOVES_MISMATCH"
	ReasonDeltaTooLarge            = "DELTA_TOO_LARGE"
	ReasonOutOfBounds              = "OUT_OF_BOUNDS"
	ReasonHistoryError             = "HISTORY_ERROR"
	ReasonNodeInterval             = "NODE_INTERVAL"
	ReasonLineInterval             = "LINE_INTERVAL"
	ReasonCertAlreadyUsed          = "CERT_ALREADY_USED"
	ReasonTooManyActions           = "TOO_MANY_ACTIONS"
	ReasonInternal                 = "INTERNAL"
	// ReasonClockFault: the write history holds an entry dated after the
	// wall clock (beyond ClockTolerance): a clock is wrong, and no
	// interval measured against that entry means anything.
	ReasonClockFault = "CLOCK_FAULT"
	// ReasonEnvelopeNotAllowed: an operating envelope was given on a
	// channel whose policy is not bounded_auto (hitl_governed stays one
	// approval per move).
	ReasonEnvelopeNotAllowed = "ENVELOPE_NOT_ALLOWED"
	// ReasonOutsideEnvelope: a move's control is not in the envelope or
	// its target lies outside the envelope's bounds.
	ReasonOutsideEnvelope = "OUTSIDE_ENVELOPE"
	// ReasonRateExceeded: the moves would exceed the envelope's
	// maxMovesPerHour in the rolling hour.
	ReasonRateExceeded = "RATE_EXCEEDED"
	// ReasonOutsideSlot: a step-test move is written outside its time
	// slot, or out of order.
	ReasonOutsideSlot = "OUTSIDE_SLOT"
)

// Reasons lists every reason code.
var Reasons = []string{
	ReasonInvalidRequest, ReasonNoChannel, ReasonChannelError, ReasonLineMismatch,
	ReasonProfileNotTwin, ReasonPolicyRecommendationOnly, ReasonPolicyUnknown, ReasonNoPolicy,
	ReasonNoCertificate, ReasonCertInvalid, ReasonCertNotApproved, ReasonCertRevoked,
	ReasonCertExpired, ReasonSceneMismatch, ReasonSnapshotStale, ReasonMovesMismatch,
	ReasonDeltaTooLarge, ReasonOutOfBounds, ReasonHistoryError, ReasonNodeInterval,
	ReasonLineInterval, ReasonCertAlreadyUsed, ReasonTooManyActions, ReasonInternal,
	ReasonClockFault, ReasonEnvelopeNotAllowed, ReasonOutsideEnvelope, ReasonRateExceeded,
	ReasonOutsideSlot,
}

const (
	// DefaultSnapshotMaxAge is the snapshot age limit when
	// Request.SnapshotMaxAge is 0.
	DefaultSnapshotMaxAge = 60 * time.Second
	// RunLookback is how far back Check reads the history to count a
	// run's actions (also covering both write intervals, which the scene
	// caps far below it in practice). It equals cert.MaxTTL.
	RunLookback = cert.MaxTTL
	// Tolerance is the relative tolerance (of max(1, |value|)) for
	// comparing a move's target with its certified value, and a readback
	// or a node's current value with the expected one.
	Tolerance = 1e-9
	// ClockTolerance is how far after the wall clock a write-history
	// entry may be dated before it is a clock fault (clocks of processes
	// sharing a store differ a little).
	ClockTolerance = contract.WriteClockTolerance
)

// History is the recorded write history.
type History interface {
	// Writes returns the writes on the line at or after since.
	Writes(ctx context.Context, lineID string, since time.Time) ([]contract.WriteRecord, error)
}

// Channels looks up the channel profile of a line; (nil, nil) means the
// line has no channel.
type Channels interface {
	Channel(ctx context.Context, lineID string) (*contract.ChannelProfile, error)
}

// Move sets one control (VariableID) on one node from its current value
// From to the target To.
type Move struct {
	NodeID, VariableID string
	From, To           float64
}

// Delta is To − From.
func (m Move) Delta() float64 { return m.To - m.From }

// Request is one guarded write: the moves of one action under one
// certificate.
type Request struct {
	LineID, RunID string
	Scene         *contract.SceneContract
	Cert          *contract.RecommendationCertificate
	// PublicKey verifies the certificate's signature.
	PublicKey ed25519.PublicKey
	Moves     []Move
	// SnapshotAt is when the snapshot the moves' From values come from
	// was captured; SnapshotMaxAge (0: DefaultSnapshotMaxAge) its age
	// limit.
	SnapshotAt     time.Time
	SnapshotMaxAge time.Duration
	// Now is the decision time (zero: the wall clock): the clock the
	// certificate and the snapshot were stamped on (the application's,
	// which a demo runs at simulated time).
	Now time.Time
	// Envelope, instead of Cert, is the approved operating envelope the
	// moves are written under (bounded_auto only; see envelope.go), and
	// ActionID the id of this action (cycle) under it: the history
	// records the writes with certificate id
	// contract.EnvelopeActionPrefix(envelope id) + ActionID.
	Envelope *contract.EnvelopeCertificate
	ActionID string
	// StepTest, instead of Cert or Envelope, is the approved step test
	// the moves are move StepIndex of, StepStart the instant (on Now's
	// clock) the test started: see steptest.go.
	StepTest  *contract.StepTestCertificate
	StepIndex int
	StepStart time.Time
	// WallNow is the wall clock at the decision (zero: Now). The
	// write history is kept on the wall clock: Execute stamps its records
	// with it and the history checks (intervals, actions per run, clock
	// faults) measure against it.
	WallNow time.Time
}

// Decision is the guard's verdict. Only a Decision returned by Check for
// the same request authorises Execute.
type Decision struct {
	Allowed bool
	// Reason is a stable reason code when denied (empty when allowed).
	Reason string
	Detail string
	grant  *grant
}

// grant is what an allowed decision was given for.
type grant struct {
	lineID, runID, certHash string
	moves                   []Move
}

func deny(reason, format string, args ...any) Decision {
	return Decision{Reason: reason, Detail: fmt.Sprintf(format, args...)}
}

// Check decides whether req may be written. It never fails open: any
// error, missing input or panic denies (see the package documentation for
// the checks and reason codes).
func Check(ctx context.Context, ch Channels, hist History, req Request) (d Decision) {
	defer func() {
		if r := recover(); r != nil {
			d = deny(ReasonInternal, "guard panicked: %v", r)
		}
	}()
	d = check(ctx, ch, hist, req)
	if d.Allowed && (d.Reason != "" || d.grant == nil) {
		return deny(ReasonInternal, "inconsistent decision")
	}
	if !d.Allowed && d.Reason == "" {
		return deny(ReasonInternal, "denied without a reason: %s", d.Detail)
	}
	return d
}

func check(ctx context.Context, ch Channels, hist History, req Request) Decision {
	if ctx == nil {
		ctx = context.Background()
	}
	now := req.Now
	if now.IsZero() {
		now = time.Now()
	}
	if strings.TrimSpace(req.LineID) == "" {
		return deny(ReasonInvalidRequest, "no line id")
	}
	if strings.TrimSpace(req.RunID) == "" {
		return deny(ReasonInvalidRequest, "no run id")
	}

	// Channel.
	if ch == nil {
		return deny(ReasonChannelError, "no channel directory")
	}
	prof, err := ch.Channel(ctx, req.LineID)
	if err != nil {
		return deny(ReasonChannelError, "channel lookup for line %s: %v", req.LineID, err)
	}
	if prof == nil {
		return deny(ReasonNoChannel, "line %s has no channel", req.LineID)
	}
	if prof.LineID != req.LineID {
		return deny(ReasonLineMismatch, "channel %s belongs to line %q, not %q", prof.ChannelID, prof.LineID, req.LineID)
	}
	if prof.Profile != contract.ProfileHybridTwin {
		return deny(ReasonProfileNotTwin, "channel %s has profile %q, not %s", prof.ChannelID, prof.Profile, contract.ProfileHybridTwin)
	}
	switch prof.ControlPolicy {
	case contract.PolicyHITLGoverned, contract.PolicyBoundedAuto:
	case contract.PolicyRecommendationOnly:
		return deny(ReasonPolicyRecommendationOnly, "channel %s only receives recommendations", prof.ChannelID)
	default:
		return deny(ReasonPolicyUnknown, "channel %s has unknown control policy %q", prof.ChannelID, prof.ControlPolicy)
	}

	// Scene and write policy.
	s := req.Scene
	if s == nil {
		return deny(ReasonNoPolicy, "no scene: the write policy is unknown")
	}
	if s.Status != contract.SceneFrozen {
		return deny(ReasonNoPolicy, "scene %s is %q, not frozen", s.SceneID, s.Status)
	}
	if err := s.Validate(); err != nil {
		return deny(ReasonNoPolicy, "scene %s is invalid: %v", s.SceneID, err)
	}
	if s.LineID != req.LineID {
		return deny(ReasonLineMismatch, "scene %s is of line %q, not %q", s.SceneID, s.LineID, req.LineID)
	}
	wp := s.WritePolicy
	if req.StepTest != nil {
		return checkStepTest(ctx, prof, s, hist, req, now)
	}
	if req.Envelope != nil || req.ActionID != "" {
		return checkEnvelope(ctx, prof, s, hist, req, now)
	}

	// Certificate.
	c := req.Cert
	if c == nil {
		return deny(ReasonNoCertificate, "writes need an approved certificate")
	}
	if err := cert.Verify(c, req.PublicKey); err != nil {
		return deny(ReasonCertInvalid, "%v", err)
	}
	switch {
	case c.Status == contract.CertRevoked:
		return deny(ReasonCertRevoked, "certificate %s was revoked by %s: %s", c.RecommendationID, c.RevokedBy, c.RevokeReason)
	case c.Status == contract.CertExpired:
		return deny(ReasonCertExpired, "certificate %s is expired", c.RecommendationID)
	case c.Status != contract.CertApproved:
		return deny(ReasonCertNotApproved, "certificate %s is %s, not APPROVED", c.RecommendationID, c.Status)
	case strings.TrimSpace(c.ApprovedBy) == "" || contract.SameIdentity(c.ApprovedBy, c.CreatedBy):
		return deny(ReasonCertNotApproved, "certificate %s has no approval by someone other than its requester", c.RecommendationID)
	case cert.Expired(c, now):
		return deny(ReasonCertExpired, "certificate %s expired at %s", c.RecommendationID, c.ExpiresAt.UTC().Format(time.RFC3339Nano))
	}
	if err := cert.CanWrite(c, now); err != nil { // belt and braces: the cert package's own guard
		return deny(ReasonCertNotApproved, "%v", err)
	}
	sh, err := s.Hash()
	if err != nil {
		return deny(ReasonNoPolicy, "cannot hash scene: %v", err)
	}
	if c.SceneID != s.SceneID || c.SceneVersion != s.SceneVersion || c.SceneHash != sh {
		return deny(ReasonSceneMismatch, "certificate is for scene %s %s (%s), given %s %s (%s)", c.SceneID, c.SceneVersion, c.SceneHash, s.SceneID, s.SceneVersion, sh)
	}

	if d, ok := checkSnapshotAge(req, now); !ok {
		return d
	}

	// Moves: exactly the certificate's first step.
	if len(c.CandidateControlTrajectory) == 0 {
		return deny(ReasonMovesMismatch, "certificate has no candidate step")
	}
	step := c.CandidateControlTrajectory[0]
	if len(req.Moves) != len(step) {
		return deny(ReasonMovesMismatch, "%d moves, the certificate's step sets %d controls", len(req.Moves), len(step))
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
		want, ok := step[m.VariableID]
		if !ok {
			return deny(ReasonMovesMismatch, "the certificate does not move %s", m.VariableID)
		}
		if !near(m.To, want) {
			return deny(ReasonMovesMismatch, "%s target %v, the certificate's %v", m.VariableID, m.To, want)
		}
	}

	// Per-action delta and bounds.
	for _, m := range req.Moves {
		limit, ok := wp.MaxDeltaPerAction[m.VariableID]
		if !ok || !finite(limit) || limit <= 0 {
			return deny(ReasonNoPolicy, "no maxDeltaPerAction for %s", m.VariableID)
		}
		if d := math.Abs(m.Delta()); d > limit*(1+1e-12) {
			return deny(ReasonDeltaTooLarge, "%s moves %v, more than maxDeltaPerAction %v", m.VariableID, d, limit)
		}
		if prof.ControlPolicy == contract.PolicyBoundedAuto {
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
	}

	if d, ok := checkHistory(ctx, hist, req, wp, nodes, c.RecommendationID, now); !ok {
		return d
	}

	return Decision{Allowed: true, Detail: fmt.Sprintf("%d moves under certificate %s (%s)", len(req.Moves), c.RecommendationID, prof.ControlPolicy),
		grant: &grant{lineID: req.LineID, runID: req.RunID, certHash: c.CertificateHash, moves: append([]Move(nil), req.Moves...)}}
}

// checkHistory runs the history checks (on the wall clock) of an action
// with id actionID moving nodes; ok false with the denial when one fails.
func checkHistory(ctx context.Context, hist History, req Request, wp contract.WritePolicy, nodes map[string]bool, actionID string, now time.Time) (Decision, bool) {
	// History, on the wall clock.
	if hist == nil {
		return deny(ReasonHistoryError, "no write history"), false
	}
	wall := req.WallNow
	if wall.IsZero() {
		wall = now
	}
	nodeIv := secs(wp.MinNodeIntervalSec)
	lineIv := secs(wp.MinLineActionIntervalSec)
	since := wall.Add(-max(RunLookback, nodeIv, lineIv))
	recs, err := hist.Writes(ctx, req.LineID, since)
	if err != nil {
		return deny(ReasonHistoryError, "write history of line %s: %v", req.LineID, err), false
	}
	for _, r := range recs {
		if r.LineID != req.LineID {
			return deny(ReasonHistoryError, "history of line %s returned a write of line %q", req.LineID, r.LineID), false
		}
		if r.At.IsZero() {
			return deny(ReasonHistoryError, "history holds a write to %s without a time", r.NodeID), false
		}
	}
	// An entry dated in the future would turn into a misleading interval
	// denial (and block the line until the wall clock passes it).
	for _, r := range recs {
		if r.At.Sub(wall) > ClockTolerance {
			what := "a write to node " + r.NodeID
			if r.NodeID == "" {
				what = "a write claim"
			}
			return deny(ReasonClockFault, "clock fault: the write history of line %s holds %s (certificate %s) dated %s, %v after the wall clock %s: a clock is wrong; fix the clock or the entry before writing",
				req.LineID, what, r.CertificateID, r.At.UTC().Format(time.RFC3339Nano), r.At.Sub(wall).Round(time.Millisecond), wall.UTC().Format(time.RFC3339Nano)), false
		}
	}
	for _, r := range recs {
		if nodes[r.NodeID] && wall.Sub(r.At) < nodeIv {
			return deny(ReasonNodeInterval, "node %s was written at %s, less than %v ago", r.NodeID, r.At.UTC().Format(time.RFC3339Nano), nodeIv), false
		}
	}
	for _, r := range recs {
		if wall.Sub(r.At) < lineIv {
			return deny(ReasonLineInterval, "line %s had an action at %s, less than %v ago", req.LineID, r.At.UTC().Format(time.RFC3339Nano), lineIv), false
		}
	}
	actions := map[string]bool{}
	n := 0
	for i, r := range recs {
		if r.CertificateID != "" && r.CertificateID == actionID {
			return deny(ReasonCertAlreadyUsed, "certificate %s was already written at %s", actionID, r.At.UTC().Format(time.RFC3339Nano)), false
		}
		if r.RunID != req.RunID {
			continue
		}
		key := "cert:" + r.CertificateID
		if r.CertificateID == "" {
			key = fmt.Sprintf("rec:%d", i)
		}
		if !actions[key] {
			actions[key] = true
			n++
		}
	}
	if n+1 > wp.MaxActionsPerRun {
		return deny(ReasonTooManyActions, "run %s already has %d actions, at most %d allowed", req.RunID, n, wp.MaxActionsPerRun), false
	}

	return Decision{}, true
}

// checkSnapshotAge checks that the snapshot the moves start from is fresh.
func checkSnapshotAge(req Request, now time.Time) (Decision, bool) {
	maxAge := req.SnapshotMaxAge
	if maxAge == 0 {
		maxAge = DefaultSnapshotMaxAge
	}
	switch {
	case maxAge < 0:
		return deny(ReasonSnapshotStale, "negative snapshot max age %v", maxAge), false
	case req.SnapshotAt.IsZero():
		return deny(ReasonSnapshotStale, "no snapshot time"), false
	case req.SnapshotAt.After(now):
		return deny(ReasonSnapshotStale, "snapshot time %s is after now %s", req.SnapshotAt.Format(time.RFC3339Nano), now.Format(time.RFC3339Nano)), false
	case now.Sub(req.SnapshotAt) > maxAge:
		return deny(ReasonSnapshotStale, "snapshot is %v old, more than %v", now.Sub(req.SnapshotAt), maxAge), false
	}

	return Decision{}, true
}

func secs(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// near reports whether a equals b within Tolerance × max(1, |b|).
func near(a, b float64) bool {
	return finite(a) && finite(b) && math.Abs(a-b) <= Tolerance*math.Max(1, math.Abs(b))
}

package envelope

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/guard"
)

// Store is what a supervised cycle needs of the store; store.Store
// implements it.
type Store interface {
	RecordStore
	guard.Channels
	guard.History
	AppendAudit(ctx context.Context, actor, action, subject, lineID string, payload any) (audit.Entry, error)
	AuditWrites(ctx context.Context, lineID string, since time.Time) ([]contract.WriteRow, error)
	GetScene(ctx context.Context, id, version string) (*contract.SceneContract, error)
	ActiveRun(ctx context.Context, lineID string) (string, error)
	LastWriteID(ctx context.Context, lineID string) (int64, error)
	ClaimWrite(ctx context.Context, c contract.WriteClaimRequest) (int64, error)
	RecordWrite(ctx context.Context, actor string, r contract.WriteRow) (int64, error)
}

// Cycle statuses (CycleResult.Status).
const (
	// StatusWritten: the cycle's moves were written through the guard and
	// read back (or acknowledged where the line cannot read back).
	StatusWritten = "written"
	// StatusHeld: nothing to write this cycle (no better passing move,
	// no change, or a write-policy interval not yet over); the envelope
	// stays in force.
	StatusHeld = "held"
	// StatusStopped: the supervisor stopped the envelope (revoked it,
	// audited "envelope.stop", published EventStopped): a person must
	// approve a new one.
	StatusStopped = "stopped"
	// StatusRefused: the envelope does not authorise writing (never
	// issued, not approved, revoked, does not verify); nothing changed.
	StatusRefused = "refused"
)

// Stop reasons of the supervisor (besides the guard's reasons).
const (
	ReasonGateFailed     = "GATE_FAILED"
	ReasonOOD            = "OOD"
	ReasonStaleConnector = "STALE_CONNECTOR"
	ReasonTrialFailed    = "TRIAL_FAILED"
	ReasonWriteFailed    = "WRITE_FAILED"
	ReasonAuditTampered  = "AUDIT_TAMPERED"
	ReasonStoreError     = "STORE_ERROR"
)

// SupervisorActor is the audit actor of a stop.
const SupervisorActor = "aml-supervisor"

// CycleInput is one supervised cycle: what the caller measured and
// re-optimised this cycle.
type CycleInput struct {
	EnvelopeID string
	// Actor runs the supervisor (required; the audit actor of the writes).
	Actor string
	// ActionID names this cycle (unique under the envelope; default a
	// random "cyc-…").
	ActionID string
	// Snapshot is the fresh snapshot taken this cycle (required);
	// SnapshotProblem says why there is none (the connector's or the
	// store's error), for the stop's detail.
	Snapshot        *contract.TwinSnapshot
	SnapshotProblem string
	// Trial is the virtual trial the twin re-optimised from Snapshot with
	// the envelope's model: its first candidate step is what is written.
	// nil: no candidate passed, nothing to write (StatusHeld) unless the
	// snapshot itself is out of distribution (SnapshotOOD).
	Trial *contract.VirtualTrial
	// SnapshotOOD, when set, is the snapshot's own out-of-distribution
	// verdict (the optimiser found no candidate because the state is out
	// of distribution): not accepted stops the envelope.
	SnapshotOOD *contract.OutOfDistribution
	// GatePassed is whether the envelope's model passes its twin gate
	// now; GateDetail says why not.
	GatePassed bool
	GateDetail string
	// SnapshotMaxAge bounds the snapshot's age (0: guard default 60 s).
	SnapshotMaxAge time.Duration
	// Now is the application clock (certificate and snapshot time);
	// WallNow the wall clock the write history is kept on (zero: Now).
	Now, WallNow time.Time
}

// CycleResult is what one cycle did.
type CycleResult struct {
	EnvelopeID string       `json:"envelopeId"`
	ActionID   string       `json:"actionId"`
	LineID     string       `json:"lineId,omitempty"`
	RunID      string       `json:"runId,omitempty"`
	SnapshotID string       `json:"snapshotId,omitempty"`
	TrialID    string       `json:"trialId,omitempty"`
	Status     string       `json:"status"`
	Reason     string       `json:"reason,omitempty"`
	Detail     string       `json:"detail"`
	Moves      []guard.Move `json:"moves"`
	Writes     []Write      `json:"writes"`
}

// Write is one move written in a cycle.
type Write struct {
	NodeID     string  `json:"nodeId"`
	VariableID string  `json:"variableId"`
	From       float64 `json:"from"`
	To         float64 `json:"to"`
	Written    bool    `json:"written"`
	Readback   float64 `json:"readback"`
	Verified   bool    `json:"verified"`
	Acked      bool    `json:"transportAck,omitempty"`
	Error      string  `json:"error,omitempty"`
}

// holdReasons are guard denials that wait rather than stop: a
// write-policy interval that is not over yet.
var holdReasons = map[string]bool{guard.ReasonNodeInterval: true, guard.ReasonLineInterval: true}

// refuseReasons are denials of an envelope that is not (or no longer)
// in force: nothing to stop.
var refuseReasons = map[string]bool{guard.ReasonNoCertificate: true, guard.ReasonCertInvalid: true, guard.ReasonCertNotApproved: true,
	guard.ReasonCertRevoked: true, guard.ReasonEnvelopeNotAllowed: true, guard.ReasonInvalidRequest: true}

// Cycle runs one supervised cycle under envelope in.EnvelopeID through w
// (the docs of this package list the checks). pub anchors the keyring
// the envelope and its approval verify with. It returns the result and
// nil when the cycle wrote or held; a refusal or a stop returns
// AML_WRITE_DENIED (Result.Reason), a failed write AML_WRITE_FAILED.
// bus (nil: none) receives EventStopped on a stop.
func Cycle(ctx context.Context, st Store, pub ed25519.PublicKey, w guard.Writer, in CycleInput, bus *events.Bus) (CycleResult, error) {
	now := in.Now
	if now.IsZero() {
		now = time.Now()
	}
	wall := in.WallNow
	if wall.IsZero() {
		wall = now
	}
	res := CycleResult{EnvelopeID: in.EnvelopeID, ActionID: in.ActionID, Moves: []guard.Move{}, Writes: []Write{}}
	if res.ActionID == "" {
		var b [6]byte
		_, _ = rand.Read(b[:])
		res.ActionID = "cyc-" + hex.EncodeToString(b[:])
	}
	if in.Snapshot != nil {
		res.SnapshotID = in.Snapshot.SnapshotID
	}
	if in.Trial != nil {
		res.TrialID = in.Trial.TrialID
	}
	actor := in.Actor
	if strings.TrimSpace(actor) == "" {
		actor = "(unknown)"
	}
	audited := func(action string, payload map[string]any) {
		who := actor
		if action == AuditStop {
			who = SupervisorActor
		}
		payload["actionId"], payload["status"], payload["reason"], payload["detail"], payload["at"] = res.ActionID, res.Status, res.Reason, res.Detail, now.UnixMilli()
		payload["snapshotId"], payload["trialId"] = res.SnapshotID, res.TrialID
		if _, err := st.AppendAudit(ctx, who, action, res.EnvelopeID, res.LineID, payload); err != nil {
			res.Detail += fmt.Sprintf(" (could not be audited: %v)", err)
		}
	}
	refuse := func(reason, format string, args ...any) (CycleResult, error) {
		res.Status, res.Reason, res.Detail = StatusRefused, reason, fmt.Sprintf(format, args...)
		audited(AuditCycle, map[string]any{})
		return res, core.Errorf(core.CodeWriteDenied, "envelope %s: %s (%s)", res.EnvelopeID, res.Detail, reason)
	}
	stop := func(reason, format string, args ...any) (CycleResult, error) {
		res.Status, res.Reason, res.Detail = StatusStopped, reason, fmt.Sprintf(format, args...)
		why := reason + ": " + res.Detail
		audited(AuditStop, map[string]any{"reason": why})
		payload := map[string]any{"envelopeId": res.EnvelopeID, "actionId": res.ActionID, "reason": reason, "detail": res.Detail, "askPerson": true}
		if bus != nil {
			bus.Publish(events.Event{Kind: EventStopped, Line: res.LineID, ID: res.EnvelopeID, Data: payload})
		}
		return res, core.Errorf(core.CodeWriteDenied, "envelope %s stopped (%s): %s; a person must approve a new envelope", res.EnvelopeID, reason, res.Detail)
	}
	hold := func(reason, format string, args ...any) (CycleResult, error) {
		res.Status, res.Reason, res.Detail = StatusHeld, reason, fmt.Sprintf(format, args...)
		audited(AuditCycle, map[string]any{})
		return res, nil
	}
	if strings.TrimSpace(in.Actor) == "" {
		return refuse(guard.ReasonInvalidRequest, "who runs the supervisor is required")
	}
	if strings.ContainsAny(res.ActionID, "/ ") {
		return refuse(guard.ReasonInvalidRequest, "action id %q holds '/' or a space", res.ActionID)
	}

	// The envelope, from its signed trail.
	rec, err := Load(ctx, st, pub, in.EnvelopeID, now)
	switch {
	case core.CodeOf(err) == core.CodeNotFound:
		return refuse(guard.ReasonNoCertificate, "envelope %s was never issued", in.EnvelopeID)
	case core.CodeOf(err) == core.CodeCertInvalid:
		return refuse(guard.ReasonCertInvalid, "%v", err)
	case err != nil:
		return refuse(ReasonStoreError, "load envelope %s: %v", in.EnvelopeID, err)
	}
	e := rec.Envelope
	res.LineID = e.LineID
	switch {
	case e.Status == contract.CertRevoked:
		return refuse(guard.ReasonCertRevoked, "envelope %s was revoked by %s: %s", e.EnvelopeID, e.RevokedBy, e.RevokeReason)
	case e.Status != contract.CertApproved:
		return refuse(guard.ReasonCertNotApproved, "envelope %s is %s: a person must approve it first", e.EnvelopeID, e.Status)
	}
	if reason, detail := trailAuthority(ctx, st, pub, rec); reason != "" {
		return refuse(reason, "%s", detail)
	}
	// From here on the envelope is in force: whatever leaves it stops it.
	if rec.Expired {
		return stop(guard.ReasonCertExpired, "envelope %s expired at %s", e.EnvelopeID, e.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if !in.GatePassed {
		return stop(ReasonGateFailed, "model %s does not pass its gate: %s", e.ModelID, orDash(in.GateDetail))
	}
	snap := in.Snapshot
	if snap == nil {
		return stop(ReasonStaleConnector, "no fresh snapshot this cycle: %s", orDash(in.SnapshotProblem))
	}
	maxAge := in.SnapshotMaxAge
	if maxAge == 0 {
		maxAge = guard.DefaultSnapshotMaxAge
	}
	switch {
	case snap.SceneID != e.SceneID || snap.SceneVersion != e.SceneVersion || snap.LineID != e.LineID:
		return stop(guard.ReasonSceneMismatch, "snapshot %s is of scene %s@%s on line %s, the envelope's %s@%s on %s", snap.SnapshotID, snap.SceneID, snap.SceneVersion, snap.LineID, e.SceneID, e.SceneVersion, e.LineID)
	case !snap.DataQuality.Fresh || len(snap.DataQuality.StaleNodeIDs) > 0:
		return stop(ReasonStaleConnector, "snapshot %s is not fresh (stale nodes: %s): the connector is not delivering", snap.SnapshotID, orDash(strings.Join(snap.DataQuality.StaleNodeIDs, ", ")))
	case snap.CapturedAt.IsZero() || now.Sub(snap.CapturedAt) > maxAge || snap.CapturedAt.After(now):
		return stop(ReasonStaleConnector, "snapshot %s was captured at %s, %v before the cycle (limit %v)", snap.SnapshotID, snap.CapturedAt.UTC().Format(time.RFC3339), now.Sub(snap.CapturedAt), maxAge)
	}
	if o := in.SnapshotOOD; o != nil && !o.Accepted {
		return stop(ReasonOOD, "snapshot %s is out of distribution (distance %.3g)", snap.SnapshotID, o.Distance)
	}
	t := in.Trial
	if t == nil {
		return hold("", "no passing candidate improves on holding")
	}
	if !t.OutOfDistribution.Accepted {
		return stop(ReasonOOD, "the re-optimised trial %s is out of distribution (distance %.3g)", t.TrialID, t.OutOfDistribution.Distance)
	}
	if t.SnapshotID != snap.SnapshotID || t.ModelID != e.ModelID {
		return stop(ReasonTrialFailed, "trial %s is from snapshot %s with model %s, not this cycle's snapshot %s with the envelope's model %s", t.TrialID, t.SnapshotID, t.ModelID, snap.SnapshotID, e.ModelID)
	}
	if reasons := t.FailureReasons(); len(reasons) > 0 {
		return stop(ReasonTrialFailed, "the re-optimised trial %s does not pass: %s", t.TrialID, strings.Join(reasons, "; "))
	}
	if len(t.CandidateControlTrajectory) == 0 || !(t.BaselineComparison.Improvement > 0) {
		return hold("", "the re-optimised trial %s does not improve on holding", t.TrialID)
	}
	scene, err := st.GetScene(ctx, e.SceneID, e.SceneVersion)
	if err != nil {
		return stop(ReasonStoreError, "scene %s@%s: %v", e.SceneID, e.SceneVersion, err)
	}
	res.Moves = stepMoves(t.CandidateControlTrajectory[0], scene, snap)
	if len(res.Moves) == 0 {
		return hold("", "the first step of trial %s changes nothing", t.TrialID)
	}
	if snap.Window != nil {
		res.RunID = snap.Window.RunID
	}
	if res.RunID == "" {
		if res.RunID, err = st.ActiveRun(ctx, e.LineID); err != nil {
			return stop(ReasonStoreError, "active run of line %s: %v", e.LineID, err)
		}
	}
	if res.RunID == "" {
		return stop(guard.ReasonInvalidRequest, "line %s has no run the action could count against", e.LineID)
	}
	lastID, err := st.LastWriteID(ctx, e.LineID)
	if err != nil {
		return stop(ReasonStoreError, "write history of line %s: %v", e.LineID, err)
	}
	req := guard.Request{LineID: e.LineID, RunID: res.RunID, Scene: scene, Envelope: e, ActionID: res.ActionID, PublicKey: auditKey(ctx, st, pub, e.KeyID),
		Moves: res.Moves, SnapshotAt: snap.CapturedAt, SnapshotMaxAge: in.SnapshotMaxAge, Now: now, WallNow: wall}
	d := guard.Check(ctx, st, historyOf{st}, req)
	if !d.Allowed {
		switch {
		case holdReasons[d.Reason]:
			return hold(d.Reason, "%s", d.Detail)
		case refuseReasons[d.Reason]:
			return refuse(d.Reason, "%s", d.Detail)
		}
		return stop(d.Reason, "%s", d.Detail)
	}
	authID := contract.EnvelopeActionPrefix(e.EnvelopeID) + res.ActionID
	if _, err := st.ClaimWrite(ctx, contract.WriteClaimRequest{LineID: e.LineID, CertificateID: authID, RunID: res.RunID, Actor: in.Actor, At: wall, ExpectLastWriteID: lastID}); err != nil {
		if core.CodeOf(err) == core.CodeConflict {
			return hold("CONCURRENT_WRITE", "%v", err)
		}
		return stop(ReasonStoreError, "claim line %s: %v", e.LineID, err)
	}
	varOf := map[string]string{}
	for _, m := range res.Moves {
		varOf[m.NodeID] = m.VariableID
	}
	out, xerr := guard.Execute(ctx, w, &recorder{st: st, actor: in.Actor, varOf: varOf}, d, req)
	for _, r := range out.Results {
		res.Writes = append(res.Writes, Write{NodeID: r.Move.NodeID, VariableID: r.Move.VariableID, From: r.Move.From, To: r.Move.To,
			Written: r.Written, Readback: r.Readback, Verified: r.Verified, Acked: r.Acked, Error: r.Err})
	}
	if xerr != nil || (out.Status != guard.OutcomeVerified && out.Status != guard.OutcomeTransportAck) {
		return stop(ReasonWriteFailed, "%s", out.Detail)
	}
	res.Status, res.Detail = StatusWritten, out.Detail
	audited(AuditCycle, map[string]any{"runId": res.RunID, "outcome": out.Status, "writes": res.Writes})
	return res, nil
}

// trailAuthority checks what the envelope's row-free record rests on:
// the audit log verifies with its signed checkpoints (keys of the
// keyring) and the issue and approval entries are covered by a signed
// checkpoint. It returns the refusal reason and detail ("" when it holds).
func trailAuthority(ctx context.Context, st Store, pub ed25519.PublicKey, r *Record) (string, string) {
	ring, err := st.Keyring(ctx, pub)
	if err != nil {
		return ReasonStoreError, fmt.Sprintf("read the keyring: %v", err)
	}
	log := st.AuditLog()
	if _, err := twinstore.RingLog(log, ring).Verify(ctx); err != nil {
		return ReasonAuditTampered, fmt.Sprintf("the audit log does not verify: %v", err)
	}
	entries, err := log.Trail(ctx, r.Envelope.EnvelopeID)
	if err != nil {
		return ReasonStoreError, fmt.Sprintf("read the trail of envelope %s: %v", r.Envelope.EnvelopeID, err)
	}
	for _, en := range entries {
		if en.Seq != r.IssueSeq && en.Seq != r.ApproveSeq {
			continue
		}
		ok, err := log.SignedAt(ctx, ring.Keys(), en.Seq, en.Hash)
		if err != nil {
			return ReasonStoreError, fmt.Sprintf("read the checkpoint of entry %d: %v", en.Seq, err)
		}
		if !ok {
			return ReasonAuditTampered, fmt.Sprintf("the %s entry %d of envelope %s is not covered by a signed checkpoint", en.Action, en.Seq, r.Envelope.EnvelopeID)
		}
	}
	return "", ""
}

func auditKey(ctx context.Context, st Store, pub ed25519.PublicKey, keyID string) ed25519.PublicKey {
	ring, err := st.Keyring(ctx, pub)
	if err != nil {
		return nil
	}
	return ring.Key(keyID)
}

// stepMoves are the moves of one candidate step that change a control
// (beyond guard.Tolerance), in variable order, from the snapshot's value
// (NaN when it lacks it, which the guard denies) on the control's node.
func stepMoves(step map[string]float64, scene *contract.SceneContract, snap *contract.TwinSnapshot) []guard.Move {
	vars := make([]string, 0, len(step))
	for v := range step {
		vars = append(vars, v)
	}
	sort.Strings(vars)
	var out []guard.Move
	for _, v := range vars {
		node := v
		if sv := scene.Control(v); sv != nil && sv.NodeID != "" {
			node = sv.NodeID
		}
		from, ok := snap.ControlValues[v]
		if !ok {
			from = math.NaN()
		}
		to := step[v]
		if ok && math.Abs(to-from) <= guard.Tolerance*math.Max(1, math.Abs(to)) {
			continue
		}
		out = append(out, guard.Move{NodeID: node, VariableID: v, From: from, To: to})
	}
	return out
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}

type recorder struct {
	st    Store
	actor string
	varOf map[string]string
}

func (r *recorder) Record(ctx context.Context, w contract.WriteRecord) error {
	_, err := r.st.RecordWrite(ctx, r.actor, contract.WriteRow{WriteRecord: w, VariableID: r.varOf[w.NodeID], Outcome: contract.WriteAttempted})
	return err
}

// historyOf is the history the guard checks: the store's rows together
// with the writes the audit log recorded (deleting rows does not reopen
// the rate or an interval).
type historyOf struct{ st Store }

func (h historyOf) Writes(ctx context.Context, lineID string, since time.Time) ([]contract.WriteRecord, error) {
	rows, err := h.st.Writes(ctx, lineID, since)
	if err != nil {
		return nil, err
	}
	audited, err := h.st.AuditWrites(ctx, lineID, since)
	if err != nil {
		return nil, err
	}
	type key struct {
		cert, node string
		at         int64
	}
	seen := map[key]bool{}
	for _, r := range rows {
		seen[key{r.CertificateID, r.NodeID, r.At.UnixMilli()}] = true
	}
	for _, a := range audited {
		if k := (key{a.CertificateID, a.NodeID, a.At.UnixMilli()}); !seen[k] {
			seen[k] = true
			rows = append(rows, a.WriteRecord)
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].At.Before(rows[j].At) })
	return rows, nil
}

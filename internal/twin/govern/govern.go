package govern

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/guard"
)

// Error codes of this package (never rename one, only add).
const (
	// CodeWriteDenied: the governed write was denied; Result.Reason holds
	// the reason code. HTTP 403.
	CodeWriteDenied = core.CodeWriteDenied
	// CodeWriteFailed: the write was allowed but did not complete with a
	// verified readback (Result.Outcome says which move failed). HTTP 502.
	CodeWriteFailed = core.CodeWriteFailed
	// CodeClockFault: the write history holds an entry dated after the
	// wall clock (Result.Reason CLOCK_FAULT), or a write could not be
	// recorded for that reason. HTTP 500.
	CodeClockFault = core.CodeClockFault
	// CodeCertRevalidationFailed: the re-run from a fresh snapshot failed
	// (Result.Reason REVALIDATION_FAILED, Result.Revalidation has the
	// figures); nothing was written. HTTP 409.
	CodeCertRevalidationFailed = core.CodeCertRevalidation
)

// Reason codes of denials decided here, before or after the guard (the
// guard's own are guard.Reason*).
const (
	// ReasonStoreError: a record the decision needs could not be read.
	ReasonStoreError = "STORE_ERROR"
	// ReasonRecordMissing: the certificate's trial, snapshot or scene is
	// not stored.
	ReasonRecordMissing = "RECORD_MISSING"
	// ReasonRecordTampered: a stored record fails its checks, or no longer
	// hashes to what the certificate signed.
	ReasonRecordTampered = "RECORD_TAMPERED"
	// ReasonConcurrentWrite: another governed write claimed the line
	// between this one's check and its claim.
	ReasonConcurrentWrite = "CONCURRENT_WRITE"
	// ReasonRunMismatch: the caller named a run other than the one the
	// action counts against (the certified snapshot's run, else the line's
	// active run): a made-up run would escape maxActionsPerRun.
	ReasonRunMismatch = "RUN_MISMATCH"
	// ReasonNoRun: neither the certified snapshot nor the store names a
	// run the action could count against.
	ReasonNoRun = "NO_RUN"
	// ReasonApprovalUnsigned: the certificate's row says APPROVED but no
	// approval signed with the deployment key exists: the row was edited
	// outside AML.
	ReasonApprovalUnsigned = "APPROVAL_UNSIGNED"
	// ReasonApprovalInvalid: the signed approval does not verify, belongs
	// to another certificate or approval, or names an approver who may
	// not approve (not the approver or admin role, an agent, the
	// requester).
	ReasonApprovalInvalid = "APPROVAL_INVALID"
	// ReasonAuditIncomplete: the audit log lacks the certificate's issue
	// or approval entry as recorded.
	ReasonAuditIncomplete = "AUDIT_INCOMPLETE"
	// ReasonAuditTampered: the audit log does not verify (hash chain,
	// signed checkpoints), or the certificate's issue or approval entry
	// is not covered by a signed checkpoint.
	ReasonAuditTampered = "AUDIT_TAMPERED"
	// ReasonRevalidationFailed: the certificate's moves, re-run from a
	// fresh snapshot (Options.Snapshot, Options.Revalidation), no longer
	// pass or no longer improve on holding. The error is
	// AML_CERT_REVALIDATION_FAILED.
	ReasonRevalidationFailed = "REVALIDATION_FAILED"
	// ReasonFreshSnapshotInvalid: the fresh snapshot given to re-validate
	// is not a sealed snapshot of the certificate's scene and line.
	ReasonFreshSnapshotInvalid = "FRESH_SNAPSHOT_INVALID"
)

// Store is what Execute needs of the store; store.Store implements it.
type Store interface {
	guard.Channels
	guard.History
	LoadCertificate(ctx context.Context, id string) (*contract.CertRecord, error)
	GetTrial(ctx context.Context, id string) (contract.TrialRecord, error)
	GetSnapshot(ctx context.Context, id string) (*contract.TwinSnapshot, error)
	GetScene(ctx context.Context, id, version string) (*contract.SceneContract, error)
	LastWriteID(ctx context.Context, lineID string) (int64, error)
	ActiveRun(ctx context.Context, lineID string) (string, error)
	ClaimCertificateWrite(ctx context.Context, c contract.WriteClaimRequest, pub ed25519.PublicKey) (int64, error)
	GetAttestation(ctx context.Context, subject, kind string) (*twinstore.Attestation, error)
	AuditWrites(ctx context.Context, lineID string, since time.Time) ([]contract.WriteRow, error)
	AuditLog() *audit.Log
	NameRoles(ctx context.Context, name string) ([]string, error)
	RecordWrite(ctx context.Context, actor string, r contract.WriteRow) (int64, error)
	MarkCertificateExecuted(ctx context.Context, id, by string, pub ed25519.PublicKey, now time.Time, extra map[string]any) (*contract.CertRecord, error)
	ExpireDue(ctx context.Context, now time.Time, ids ...string) ([]string, error)
	AppendAudit(ctx context.Context, actor, action, subject, lineID string, payload any) (audit.Entry, error)
	Keyring(ctx context.Context, anchor ed25519.PublicKey) (*twinstore.Keyring, error)
}

var _ Store = (store.Store)(nil)

// Options of Execute.
type Options struct {
	// Now is the decision and write time (zero: the wall clock).
	Now time.Time
	// Actor is who executes (required): the audit actor of every entry.
	Actor string
	// RunID, when set, must name the run the action counts against —
	// the run of the certified snapshot's window, else the line's newest
	// active run in the store — or the write is denied RUN_MISMATCH. It
	// never chooses the run: maxActionsPerRun counts the actions of the
	// line's real run.
	RunID string
	// SnapshotMaxAge is the snapshot age limit (0: guard default, 60 s).
	SnapshotMaxAge time.Duration
	// WallNow is the wall clock (zero: Now). The write history —
	// the claim and every attempted write — is stamped with it and the
	// guard's history checks measure against it; Now stays the clock of
	// the certificate and the snapshot (the application's, which a demo
	// runs at simulated time).
	WallNow time.Time
	// Snapshot, when set, is a fresh stored snapshot of the certificate's
	// scene that the caller re-ran the certified trajectory from
	// (Revalidation, required with it): the moves start from its control
	// values, its capture time is what the guard's freshness check sees
	// and its run is the run the action counts against. The certified
	// trial and snapshot must still hash to what the certificate signed.
	Snapshot     *contract.TwinSnapshot
	Revalidation *Revalidation
}

// Revalidation is the re-run of a certificate's candidate trajectory from
// a fresh snapshot with the certificate's model, scene and objective,
// made when the certified snapshot is too old to write from.
type Revalidation struct {
	// CertifiedSnapshotID is the certified trial's snapshot and
	// CertifiedCapturedAt its capture time; SnapshotID and CapturedAt the
	// fresh snapshot's (stored).
	CertifiedSnapshotID string    `json:"certifiedSnapshotId"`
	CertifiedCapturedAt time.Time `json:"certifiedCapturedAt"`
	SnapshotID          string    `json:"snapshotId,omitempty"`
	CapturedAt          time.Time `json:"capturedAt,omitzero"`
	// TrialID is the stored re-run (empty when it could not be run).
	TrialID string `json:"trialId,omitempty"`
	// Passed: every scene constraint passed on the re-run's tube and it is
	// in distribution (VirtualTrial.Passed).
	Passed        bool    `json:"passed"`
	Improvement   float64 `json:"improvement"`
	BaselineCost  float64 `json:"baselineCost"`
	CandidateCost float64 `json:"candidateCost"`
	RejectCode    string  `json:"rejectCode,omitempty"`
	OODDistance   float64 `json:"oodDistance"`
	OODThreshold  float64 `json:"oodThreshold"`
	// Targets are the re-run's predicted target values at the horizon's
	// end.
	Targets []TargetEnd `json:"targets,omitempty"`
	// OK: passed and improvement > 0 — the write may go ahead. Reason says
	// why not, with the figures.
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
}

// TargetEnd is one objective target at a step of a re-run: the setpoint
// and the predicted mean with its tube.
type TargetEnd struct {
	VariableID string  `json:"variableId"`
	Step       int     `json:"step"`
	Target     float64 `json:"target"`
	Mean       float64 `json:"mean"`
	Lower      float64 `json:"lower"`
	Upper      float64 `json:"upper"`
}

// MoveResult is one move of a Result.
type MoveResult struct {
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

// Result is what Execute did. It is returned together with any error.
type Result struct {
	CertificateID string `json:"certificateId"`
	LineID        string `json:"lineId,omitempty"`
	RunID         string `json:"runId,omitempty"`
	SnapshotID    string `json:"snapshotId,omitempty"`
	Allowed       bool   `json:"allowed"`
	// Reason is the denial reason code (guard.Reason* or this package's
	// Reason*); empty when allowed.
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail"`
	// Moves are the moves decided on (nil when they could not be built).
	Moves []guard.Move `json:"-"`
	// Status is the outcome: guard.OutcomeVerified, OutcomeFailed,
	// OutcomeRefused, or "denied".
	Status string       `json:"status"`
	Writes []MoveResult `json:"writes"`
	// Executed: the certificate was marked EXECUTED.
	Executed bool `json:"executed"`
	// Revalidation is the re-run from a fresh snapshot, when the certified
	// snapshot was too old to write from (SnapshotID is then the fresh
	// snapshot's).
	Revalidation *Revalidation `json:"revalidation,omitempty"`
}

// StatusDenied is Result.Status of a denied write.
const StatusDenied = "denied"

// Written counts the moves written and read back (or, where the line
// does not allow reading back, written and acknowledged).
func (r *Result) Written() int {
	n := 0
	for _, w := range r.Writes {
		if w.Verified || w.Acked {
			n++
		}
	}
	return n
}

func deniedErr(r *Result) error {
	code := CodeWriteDenied
	switch r.Reason {
	case guard.ReasonClockFault:
		code = core.CodeClockFault
	case ReasonRevalidationFailed:
		code = CodeCertRevalidationFailed
	}
	return core.Errorf(code, "write under certificate %s denied (%s): %s", r.CertificateID, r.Reason, r.Detail)
}

// classify maps a load error to a denial reason.
func classify(err error) string {
	switch core.CodeOf(err) {
	case core.CodeNotFound:
		return ReasonRecordMissing
	case twinstore.CodeTrialTampered, twinstore.CodeSnapshotTampered, cert.CodeCertInvalid, core.CodeInternal:
		// sceneRow reports a scene disagreeing with its row as AML_INTERNAL.
		return ReasonRecordTampered
	}
	return ReasonStoreError
}

// Execute runs the governed write of certificate certID through w (see
// the package documentation). pub verifies the certificate's signature.
// It returns the Result and nil after a readback-verified write, else the
// Result and an error: AML_WRITE_DENIED (Result.Reason), AML_WRITE_FAILED
// (Result.Writes), or the store error that stopped it after the writes.
func Execute(ctx context.Context, st Store, pub ed25519.PublicKey, certID string, w guard.Writer, opts Options) (Result, error) {
	now := opts.Now
	if now.IsZero() {
		now = time.Now()
	}
	wall := opts.WallNow
	if wall.IsZero() {
		wall = now
	}
	res := Result{CertificateID: certID, Status: StatusDenied, Writes: []MoveResult{}, Revalidation: opts.Revalidation}
	deny := func(reason, format string, args ...any) (Result, error) {
		res.Allowed, res.Reason, res.Detail, res.Status = false, reason, fmt.Sprintf(format, args...), StatusDenied
		subject := certID
		if strings.TrimSpace(subject) == "" {
			subject = "(none)"
		}
		actor := opts.Actor
		if strings.TrimSpace(actor) == "" {
			actor = "(unknown)"
		}
		payload := map[string]any{"reason": reason, "detail": res.Detail, "runId": res.RunID, "at": now.UnixMilli()}
		if rv := opts.Revalidation; rv != nil {
			payload["revalidation"] = rv
		}
		if _, err := st.AppendAudit(ctx, actor, twinstore.AuditWriteDenied, subject, res.LineID, payload); err != nil {
			res.Detail += fmt.Sprintf(" (the denial could not be audited: %v)", err)
		}
		return res, deniedErr(&res)
	}
	if strings.TrimSpace(opts.Actor) == "" {
		return deny(guard.ReasonInvalidRequest, "who executes is required")
	}
	if strings.TrimSpace(certID) == "" {
		return deny(guard.ReasonNoCertificate, "no certificate id")
	}

	rec, err := st.LoadCertificate(ctx, certID)
	switch {
	case core.CodeOf(err) == core.CodeNotFound:
		return deny(guard.ReasonNoCertificate, "certificate %s is not stored", certID)
	case core.CodeOf(err) == cert.CodeCertInvalid:
		return deny(guard.ReasonCertInvalid, "%v", err)
	case err != nil:
		return deny(ReasonStoreError, "read certificate %s: %v", certID, err)
	}
	c := rec.Cert
	res.LineID = rec.LineID

	tr, err := st.GetTrial(ctx, c.TrialID)
	if err != nil {
		return deny(classify(err), "trial %s of the certificate: %v", c.TrialID, err)
	}
	if tr.Hash != c.TrialHash {
		return deny(ReasonRecordTampered, "trial %s hashes to %s, the certificate signed %s", c.TrialID, tr.Hash, c.TrialHash)
	}
	snap, err := st.GetSnapshot(ctx, tr.Trial.SnapshotID)
	if err != nil {
		return deny(classify(err), "snapshot %s of trial %s: %v", tr.Trial.SnapshotID, c.TrialID, err)
	}
	res.SnapshotID = snap.SnapshotID
	if snap.SnapshotHash != c.SnapshotHash {
		return deny(ReasonRecordTampered, "snapshot %s hashes to %s, the certificate signed %s", snap.SnapshotID, snap.SnapshotHash, c.SnapshotHash)
	}
	scene, err := st.GetScene(ctx, c.SceneID, c.SceneVersion)
	if err != nil {
		return deny(classify(err), "scene %s@%s of the certificate: %v", c.SceneID, c.SceneVersion, err)
	}
	// The moves start from the fresh snapshot the caller re-ran the
	// certified trajectory from (a failed revalidation may have none: it
	// is denied below, once the certificate's authority is checked).
	if fresh, rv := opts.Snapshot, opts.Revalidation; fresh != nil || rv != nil {
		switch {
		case rv == nil:
			return deny(ReasonFreshSnapshotInvalid, "a fresh snapshot was given without its revalidation")
		case fresh == nil && rv.OK:
			return deny(ReasonFreshSnapshotInvalid, "a passed revalidation was given without its fresh snapshot")
		}
		if fresh != nil {
			switch {
			case fresh.SceneID != c.SceneID || fresh.SceneVersion != c.SceneVersion || fresh.LineID != rec.LineID:
				return deny(ReasonFreshSnapshotInvalid, "fresh snapshot %s is of scene %s@%s on line %s, the certificate of %s@%s on line %s",
					fresh.SnapshotID, fresh.SceneID, fresh.SceneVersion, fresh.LineID, c.SceneID, c.SceneVersion, rec.LineID)
			case fresh.SnapshotHash == "" || fresh.Validate() != nil:
				return deny(ReasonFreshSnapshotInvalid, "fresh snapshot %s is not a valid sealed snapshot", fresh.SnapshotID)
			}
			stored, err := st.GetSnapshot(ctx, fresh.SnapshotID)
			if err != nil {
				return deny(classify(err), "fresh snapshot %s: %v", fresh.SnapshotID, err)
			}
			if stored.SnapshotHash != fresh.SnapshotHash {
				return deny(ReasonRecordTampered, "fresh snapshot %s is stored with hash %s, given %s", fresh.SnapshotID, stored.SnapshotHash, fresh.SnapshotHash)
			}
			snap = stored
			res.SnapshotID = snap.SnapshotID
		}
	}

	// The run the action counts against: the snapshot's (signed into its
	// hash, which the certificate signed), else the line's active run.
	if snap.Window != nil {
		res.RunID = snap.Window.RunID
	}
	if res.RunID == "" {
		if res.RunID, err = st.ActiveRun(ctx, res.LineID); err != nil {
			return deny(ReasonStoreError, "active run of line %s: %v", res.LineID, err)
		}
	}
	if res.RunID == "" {
		return deny(ReasonNoRun, "the certified snapshot %s names no run and line %s has no active run: the action could not be counted against maxActionsPerRun", snap.SnapshotID, res.LineID)
	}
	if opts.RunID != "" && opts.RunID != res.RunID {
		given := opts.RunID
		return deny(ReasonRunMismatch, "run %q was given, but the action counts against run %s (the certified snapshot's, else the line's active run)", given, res.RunID)
	}
	res.Moves = FirstStepMoves(c, scene, snap)
	varOf := map[string]string{}
	for _, m := range res.Moves {
		varOf[m.NodeID] = m.VariableID
	}

	// The certificate's authority, from what is signed rather than from
	// its row: the signed approval, no signed or audited use, the audit
	// trail of its issue and approval under signed checkpoints.
	// The keyring: pub (this process's key) and the keys it retired — a
	// certificate signed before a rotation is still executed when
	// otherwise valid (its approval and execution are signed with pub).
	ring, err := st.Keyring(ctx, pub)
	if err != nil {
		return deny(ReasonStoreError, "read the keyring: %v", err)
	}
	if c.Status == contract.CertApproved {
		if reason, detail := authority(ctx, st, ring, rec); reason != "" {
			return deny(reason, "%s", detail)
		}
	}
	if rv := opts.Revalidation; rv != nil && !rv.OK {
		return deny(ReasonRevalidationFailed, "the certified snapshot %s is too old to write from and its re-validation failed: %s", rv.CertifiedSnapshotID, rv.Reason)
	}

	lastID, err := st.LastWriteID(ctx, res.LineID)
	if err != nil {
		return deny(ReasonStoreError, "write history of line %s: %v", res.LineID, err)
	}
	req := guard.Request{LineID: res.LineID, RunID: res.RunID, Scene: scene, Cert: c, PublicKey: ring.Key(c.KeyID), Moves: res.Moves,
		SnapshotAt: snap.CapturedAt, SnapshotMaxAge: opts.SnapshotMaxAge, Now: now, WallNow: wall}
	d := guard.Check(ctx, st, auditedHistory{st}, req)
	if !d.Allowed {
		if d.Reason == guard.ReasonCertExpired && (c.Status == contract.CertIssued || c.Status == contract.CertApproved) {
			if _, err := st.ExpireDue(ctx, now, certID); err != nil {
				d.Detail += fmt.Sprintf(" (marking it EXPIRED failed: %v)", err)
			}
		}
		return deny(d.Reason, "%s", d.Detail)
	}

	if _, err := st.ClaimCertificateWrite(ctx, contract.WriteClaimRequest{LineID: res.LineID, CertificateID: certID, RunID: res.RunID, Actor: opts.Actor, At: wall, ExpectLastWriteID: lastID}, pub); err != nil {
		var ae *core.Error
		if errors.As(err, &ae) && ae.Code == core.CodeConflict && ae.Field == "certificateId" {
			return deny(guard.ReasonCertAlreadyUsed, "%v", err)
		}
		if core.CodeOf(err) == core.CodeConflict {
			return deny(ReasonConcurrentWrite, "%v", err)
		}
		if core.CodeOf(err) == core.CodeClockFault {
			return deny(guard.ReasonClockFault, "%v", err)
		}
		return deny(ReasonStoreError, "claim line %s: %v", res.LineID, err)
	}
	res.Allowed, res.Detail = true, d.Detail

	out, xerr := guard.Execute(ctx, w, &recorder{st: st, actor: opts.Actor, varOf: varOf}, d, req)
	res.Status = out.Status
	for _, r := range out.Results {
		res.Writes = append(res.Writes, MoveResult{NodeID: r.Move.NodeID, VariableID: r.Move.VariableID, From: r.Move.From, To: r.Move.To,
			Written: r.Written, Readback: r.Readback, Verified: r.Verified, Acked: r.Acked, Error: r.Err})
	}
	if out.Detail != "" {
		res.Detail = out.Detail
	}
	payload := map[string]any{"status": out.Status, "detail": out.Detail, "runId": res.RunID, "snapshotId": res.SnapshotID,
		"certificateHash": c.CertificateHash, "writes": res.Writes, "at": now.UnixMilli(), "wallAt": wall.UnixMilli()}
	if rv := opts.Revalidation; rv != nil {
		payload["revalidation"] = rv
	}
	// transport-ack: written and acknowledged where the line does not allow
	// reading back; it executes the certificate, audited with its status.
	if (out.Status != guard.OutcomeVerified && out.Status != guard.OutcomeTransportAck) || xerr != nil {
		if _, err := st.AppendAudit(ctx, opts.Actor, twinstore.AuditWriteFailed, certID, res.LineID, payload); err != nil {
			res.Detail += fmt.Sprintf(" (the failure could not be audited: %v)", err)
		}
		return res, core.Errorf(CodeWriteFailed, "write under certificate %s failed: %s", certID, res.Detail)
	}
	if _, err := st.AppendAudit(ctx, opts.Actor, twinstore.AuditWriteExecuted, certID, res.LineID, payload); err != nil {
		return res, err
	}
	if _, err := st.MarkCertificateExecuted(ctx, certID, opts.Actor, pub, now, map[string]any{"outcome": out.Status, "written": res.Written()}); err != nil {
		return res, err
	}
	res.Executed = true
	return res, nil
}

// FirstStepMoves builds the moves of the certificate's first candidate
// step: for each control it sets (in variable order), from the snapshot's
// control value (NaN when the snapshot lacks it, which the guard denies)
// to the certified value, on the control's node (its scene nodeId, else
// the variable id). nil when the certificate has no step.
func FirstStepMoves(c *contract.RecommendationCertificate, scene *contract.SceneContract, snap *contract.TwinSnapshot) []guard.Move {
	if c == nil || len(c.CandidateControlTrajectory) == 0 {
		return nil
	}
	step := c.CandidateControlTrajectory[0]
	vars := make([]string, 0, len(step))
	for v := range step {
		vars = append(vars, v)
	}
	sort.Strings(vars)
	moves := make([]guard.Move, 0, len(vars))
	for _, v := range vars {
		node := v
		if scene != nil {
			if sv := scene.Control(v); sv != nil && sv.NodeID != "" {
				node = sv.NodeID
			}
		}
		from := math.NaN()
		if snap != nil {
			if x, ok := snap.ControlValues[v]; ok {
				from = x
			}
		}
		moves = append(moves, guard.Move{NodeID: node, VariableID: v, From: from, To: step[v]})
	}
	return moves
}

// recorder records the guard's writes in the store's history with the
// executing actor and the variable of each node.
type recorder struct {
	st    Store
	actor string
	varOf map[string]string
}

func (r *recorder) Record(ctx context.Context, w contract.WriteRecord) error {
	_, err := r.st.RecordWrite(ctx, r.actor, contract.WriteRow{WriteRecord: w, VariableID: r.varOf[w.NodeID], Outcome: contract.WriteAttempted})
	return err
}

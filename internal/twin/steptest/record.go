package steptest

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqldb"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/contract"
)

// Audit actions of a step test (subject: the test id), in the
// hash-chained audit log whose head the deployment key signs after each.
const (
	AuditIssue   = "steptest.issue"
	AuditApprove = "steptest.approve"
	AuditRevoke  = "steptest.revoke"
	// AuditMove: one move's guard decision, outcome and readback.
	AuditMove = "steptest.move"
	// AuditExecuted: the end of the moves (completed, or why it stopped).
	AuditExecuted = "steptest.executed"
	// AuditStart: an execution claimed the test (RecordStart, atomic):
	// who, when, the moves planned and until when it may run.
	AuditStart = "steptest.start"
	// AuditResult: the execution's end, after the fit: its result (the
	// execution without its samples, which are stored as the run; the
	// fitted models) or its error (RecordResult).
	AuditResult = "steptest.result"
)

// Execution statuses and stages (Progress).
const (
	StatusRunning     = "running"
	StatusDone        = "done"
	StatusFailed      = "failed"
	StatusInterrupted = "interrupted"

	StageMoving  = "moving"
	StageFitting = "fitting"
	StageStored  = "stored"
)

// Result is what an execution returns: the executed test (its moves and,
// from Execute, its samples), the models fitted from it, and the
// identification run its samples were stored as.
type Result struct {
	Execution *Execution `json:"execution,omitempty"`
	Fit       *FitReport `json:"fit,omitempty"`
	FitError  string     `json:"fitError,omitempty"`
	// RunID is the identification run the samples were stored as (empty:
	// not stored, RunNote says why).
	RunID   string `json:"runId,omitempty"`
	RunNote string `json:"runNote,omitempty"`
}

// Progress is the latest execution of a step test as its trail has it:
// started (steptest.start), moving (its moves), fitting (the moves ended,
// steptest.executed) and stored (steptest.result: the result or the
// error). A start with no result reads as interrupted (its process ended
// without recording its end) once its executor's lease was last renewed
// LeaseTimeout ago or more, or its Until passed.
type Progress struct {
	Status    string    `json:"status" jsonschema:"running, done, failed or interrupted (its process ended before it recorded its end: no heartbeat for the lease timeout)"`
	Stage     string    `json:"stage" jsonschema:"moving, fitting or stored"`
	StartSeq  int64     `json:"startSeq"`
	StartedBy string    `json:"startedBy"`
	StartedAt time.Time `json:"startedAt"`
	// Until is when the execution must have ended (its planned length
	// plus a margin for the fit).
	Until time.Time `json:"until"`
	// Planned is the test's number of moves, Written the ones written
	// so far in this execution, Refused the ones the guard refused.
	Planned int `json:"planned"`
	Written int `json:"written"`
	Refused int `json:"refused,omitempty"`
	// Stopped says why the moves stopped early (steptest.executed).
	Stopped string `json:"stopped,omitempty"`
	// Heartbeat is when the executor last renewed its lease (an
	// execution without a result; none for one started before leases).
	Heartbeat *time.Time `json:"heartbeat,omitempty" jsonschema:"when the running execution's process last renewed its lease"`
	// LastWritten is the last move this execution wrote: where it left
	// the line's setpoints when it stopped early or was interrupted.
	LastWritten *WrittenMove `json:"lastWritten,omitempty" jsonschema:"the last move written in this execution (index, values, when): where the setpoints are left when it stopped or was interrupted"`
	// Result is the execution's result once stored (its samples are in
	// the run RunID), Error its error (a stopped test has both).
	Result *Result         `json:"result,omitempty"`
	Error  *auth.ErrorBody `json:"error,omitempty"`
}

// WrittenMove is a move an execution wrote (steptest.move allowed).
type WrittenMove struct {
	Index int                `json:"index"`
	Set   map[string]float64 `json:"set"`
	At    time.Time          `json:"at"`
}

// ApprovalKind is the kind of a signed step-test approval statement.
const ApprovalKind = "aml.steptest.approval/1"

// RecordStore is what the step-test records need of the store (the
// audit log, the keyring, the roles of a name and the leases of running
// executions with the SQL handle they are claimed in; store.Store).
type RecordStore interface {
	AuditLog() *audit.Log
	Keyring(ctx context.Context, anchor ed25519.PublicKey) (*twinstore.Keyring, error)
	NameRoles(ctx context.Context, name string) ([]string, error)
	SQL() *sqldb.DB
	Lease(ctx context.Context, name string) (twinstore.Lease, bool, error)
	RenewLease(ctx context.Context, name, holder string, now time.Time) error
}

// ApprovalStatement is what a step-test approval signs.
type ApprovalStatement struct {
	Kind         string `json:"kind"`
	TestID       string `json:"testId"`
	TestHash     string `json:"testHash"`
	ApprovedBy   string `json:"approvedBy"`
	ApproverRole string `json:"approverRole"`
	ApprovedAt   int64  `json:"approvedAt"` // epoch ms
	KeyID        string `json:"keyId"`
}

// Record is a step test as its signed audit trail has it.
type Record struct {
	Test       *contract.StepTestCertificate `json:"test"`
	Expired    bool                          `json:"expired"`
	IssueSeq   int64                         `json:"issueSeq"`
	ApproveSeq int64                         `json:"approveSeq,omitempty"`
	// Moves counts the audited moves the guard allowed (written),
	// Refused the ones it refused; Executed is the last end entry (0:
	// never run).
	Moves    int   `json:"moves"`
	Refused  int   `json:"refused,omitempty"`
	Executed int64 `json:"executedSeq,omitempty"`
	// Progress is the latest execution (none: never started).
	Progress *Progress `json:"progress,omitempty"`
}

// RecordIssue records a signed, ISSUED step test in the audit log
// ("steptest.issue") and signs the log's head; an id issued before is
// refused AML_CONFLICT.
func RecordIssue(ctx context.Context, st RecordStore, key Signer, c *contract.StepTestCertificate) (*Record, error) {
	if c == nil || c.Status != contract.CertIssued {
		return nil, core.Errorf(core.CodeInvalidArgument, "only an ISSUED step test is recorded")
	}
	_, pub := key.SigningKey()
	if err := c.Verify(pub); err != nil {
		return nil, err
	}
	log := st.AuditLog()
	prev, err := log.Query(ctx, audit.Query{Subject: c.TestID, Action: AuditIssue, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(prev) > 0 {
		return nil, core.FieldErrorf(core.CodeConflict, "testId", "step test %s was issued already (audit entry %d)", c.TestID, prev[0].Seq)
	}
	if _, err := log.AppendSigned(ctx, key, c.CreatedBy, AuditIssue, c.TestID, c.LineID, map[string]any{"test": c, "certificateHash": c.CertificateHash}); err != nil {
		return nil, err
	}
	return Load(ctx, st, pub, c.TestID, c.IssuedAt)
}

// RecordApprove approves an ISSUED step test as by (Approve's rules; the
// name's roles come from the store): it signs the approval statement,
// appends "steptest.approve" holding it and signs the log's head.
func RecordApprove(ctx context.Context, st RecordStore, key Signer, id string, by twinstore.Approver, now time.Time) (*Record, error) {
	_, pub := key.SigningKey()
	r, err := Load(ctx, st, pub, id, now)
	if err != nil {
		return nil, err
	}
	roles, err := st.NameRoles(ctx, by.Name)
	if err != nil {
		return nil, err
	}
	now = now.UTC().Truncate(time.Millisecond)
	if err := Approve(r.Test, by, roles, now); err != nil {
		return nil, err
	}
	kid, _ := key.SigningKey()
	att, err := twinstore.SignStatement(key, id, twinstore.AttestApprove, ApprovalStatement{Kind: ApprovalKind, TestID: id, TestHash: r.Test.CertificateHash,
		ApprovedBy: by.Name, ApproverRole: by.Role, ApprovedAt: now.UnixMilli(), KeyID: kid}, now)
	if err != nil {
		return nil, err
	}
	log := st.AuditLog()
	if _, err := log.AppendSigned(ctx, key, by.Name, AuditApprove, id, r.Test.LineID, map[string]any{"approval": att, "statementHash": att.Hash}); err != nil {
		return nil, err
	}
	return Load(ctx, st, pub, id, now)
}

// Revoker is who revokes a step test: a name and role, with the roles
// the store holds for the name (an agent's token name never revokes).
type Revoker struct {
	Name, Role string
	Roles      []string
}

// CanRevoke: a step test's proposer, or a person with the approver or
// admin role; never a name an agent's token carries.
func CanRevoke(c *contract.StepTestCertificate, by Revoker) error {
	for _, r := range append([]string{by.Role}, by.Roles...) {
		if r == "agent" {
			return core.FieldErrorf(core.CodeForbidden, "revokedBy", "%s is an agent's name: only a person revokes a step test", by.Name)
		}
	}
	if by.Name != c.CreatedBy && by.Role != twinstore.RoleApprover && by.Role != twinstore.RoleAdmin {
		return core.FieldErrorf(core.CodeForbidden, "revokedBy", "%s (role %q) neither proposed step test %s nor has the approver or admin role", by.Name, by.Role, c.TestID)
	}
	return nil
}

// RecordRevoke revokes step test id (ISSUED or APPROVED; once) as by
// (CanRevoke, the name's roles from the store): it appends
// "steptest.revoke" with the reason and signs the log's head. A revoked
// test never executes: the guard refuses its moves (CERT_REVOKED).
func RecordRevoke(ctx context.Context, st RecordStore, key Signer, id string, by Revoker, reason string, now time.Time) (*Record, error) {
	if strings.TrimSpace(reason) == "" {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "reason", "a reason is required")
	}
	_, pub := key.SigningKey()
	r, err := Load(ctx, st, pub, id, now)
	if err != nil {
		return nil, err
	}
	if r.Test.Status == contract.CertRevoked {
		return nil, core.FieldErrorf(core.CodeConflict, "id", "step test %s was revoked already by %s", id, r.Test.RevokedBy)
	}
	roles, err := st.NameRoles(ctx, by.Name)
	if err != nil {
		return nil, err
	}
	by.Roles = append(by.Roles, roles...)
	if err := CanRevoke(r.Test, by); err != nil {
		return nil, err
	}
	log := st.AuditLog()
	if _, err := log.AppendSigned(ctx, key, by.Name, AuditRevoke, id, r.Test.LineID, map[string]any{"reason": reason, "role": by.Role, "at": now.UnixMilli()}); err != nil {
		return nil, err
	}
	return Load(ctx, st, pub, id, now)
}

// List replays the step tests issued on line (every line when empty),
// newest first, at most limit; the ids whose trail does not verify are
// returned apart (bad) and never listed.
func List(ctx context.Context, st RecordStore, pub ed25519.PublicKey, line string, limit int, now time.Time) (out []*Record, bad []string, err error) {
	return audit.Replay(ctx, st.AuditLog(), AuditIssue, line, limit, func(ctx context.Context, id string) (*Record, error) {
		return Load(ctx, st, pub, id, now)
	})
}

// Load replays step test id from its audit trail, verified: the issue
// entry's certificate verifies with a key of the keyring anchored at
// pub; an approval counts only with a statement signed by such a key
// that matches the test (id, hash, approver not its proposer, approver or
// admin role, not an agent's token name); a revocation revokes it.
// AML_NOT_FOUND when never issued, AML_CERT_INVALID when what is
// recorded does not verify.
func Load(ctx context.Context, st RecordStore, pub ed25519.PublicKey, id string, now time.Time) (*Record, error) {
	if strings.TrimSpace(id) == "" {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "id", "step test id is required")
	}
	ring, err := st.Keyring(ctx, pub)
	if err != nil {
		return nil, err
	}
	entries, err := st.AuditLog().Trail(ctx, id)
	if err != nil {
		return nil, err
	}
	var r *Record
	for _, en := range entries {
		switch en.Action {
		case AuditIssue:
			if r != nil {
				return nil, core.Errorf(core.CodeCertInvalid, "step test %s has two issue entries", id)
			}
			var p struct {
				Test json.RawMessage `json:"test"`
			}
			if err := json.Unmarshal(en.Payload, &p); err != nil {
				return nil, core.Errorf(core.CodeCertInvalid, "issue entry %d of step test %s does not decode: %v", en.Seq, id, err)
			}
			c, err := contract.ParseStepTest(p.Test)
			if err != nil {
				return nil, core.Wrap(core.CodeCertInvalid, err, "step test "+id)
			}
			if err := c.Verify(ring.Key(c.KeyID)); err != nil {
				return nil, err
			}
			if c.TestID != id || c.Status != contract.CertIssued {
				return nil, core.Errorf(core.CodeCertInvalid, "issue entry %d records step test %s as %s", en.Seq, c.TestID, c.Status)
			}
			r = &Record{Test: c, IssueSeq: en.Seq}
		case AuditApprove:
			if r == nil || r.Test.Status != contract.CertIssued {
				continue
			}
			if err := checkApproval(ctx, st, ring, r.Test, en); err != nil {
				return nil, err
			}
			r.ApproveSeq = en.Seq
		case AuditRevoke:
			if r == nil || r.Test.Status == contract.CertRevoked {
				continue
			}
			var p struct {
				Reason string `json:"reason"`
			}
			_ = json.Unmarshal(en.Payload, &p)
			if strings.TrimSpace(p.Reason) == "" {
				p.Reason = en.Action
			}
			c := r.Test
			c.Status, c.RevokedBy, c.RevokedAt, c.RevokeReason = contract.CertRevoked, en.Actor, en.At.UTC(), p.Reason
		case AuditMove:
			var p struct {
				Allowed bool               `json:"allowed"`
				Index   int                `json:"index"`
				Set     map[string]float64 `json:"set"`
				At      int64              `json:"at"`
			}
			if r != nil && json.Unmarshal(en.Payload, &p) == nil {
				pr := r.Progress
				if p.Allowed {
					r.Moves++
				} else {
					r.Refused++
				}
				if pr != nil && pr.Stage == StageMoving {
					if p.Allowed {
						pr.Written++
						pr.LastWritten = &WrittenMove{Index: p.Index, Set: p.Set, At: time.UnixMilli(p.At).UTC()}
					} else {
						pr.Refused++
					}
				}
			}
		case AuditExecuted:
			if r != nil {
				r.Executed = en.Seq
				if pr := r.Progress; pr != nil && pr.Stage == StageMoving {
					var p struct {
						Stopped string `json:"stopped"`
					}
					_ = json.Unmarshal(en.Payload, &p)
					pr.Stage, pr.Stopped = StageFitting, p.Stopped
				}
			}
		case AuditStart:
			if r != nil {
				var p startPayload
				_ = json.Unmarshal(en.Payload, &p)
				r.Progress = &Progress{Status: StatusRunning, Stage: StageMoving, StartSeq: en.Seq, StartedBy: en.Actor,
					StartedAt: time.UnixMilli(p.At).UTC(), Until: time.UnixMilli(p.Until).UTC(), Planned: p.Planned}
			}
		case AuditResult:
			if pr := r.progress(); pr != nil && pr.Status == StatusRunning {
				var p struct {
					Result *Result         `json:"result"`
					Error  *auth.ErrorBody `json:"error"`
				}
				if err := json.Unmarshal(en.Payload, &p); err != nil {
					p.Error = &auth.ErrorBody{Code: core.CodeInternal, Message: fmt.Sprintf("result entry %d does not decode: %v", en.Seq, err)}
				}
				pr.Stage, pr.Result, pr.Error, pr.Status = StageStored, p.Result, p.Error, StatusDone
				if p.Error != nil {
					pr.Status = StatusFailed
				}
			}
		}
	}
	if r == nil {
		return nil, core.Errorf(core.CodeNotFound, "step test %s was never issued", id)
	}
	r.Expired = r.Test.Expired(now)
	if pr := r.Progress; pr != nil && pr.Status == StatusRunning {
		l, ok, err := st.Lease(ctx, LeaseName(id))
		if err != nil {
			return nil, err
		}
		if ok && l.Holder == leaseHolder(pr.StartSeq) {
			hb := l.Renewed
			pr.Heartbeat = &hb
		}
		if why := pr.dead(now); why != "" {
			pr.Status = StatusInterrupted
			pr.Error = &auth.ErrorBody{Code: core.CodeWorkerLost, Message: fmt.Sprintf("the execution started at %s %s: the process running it ended without recording its end; %s",
				pr.StartedAt.Format(time.RFC3339), why, pr.leftAt())}
		}
	}
	return r, nil
}

// dead says why a running execution is taken for dead at now ("" when
// it is alive): its lease was last renewed LeaseTimeout ago or more, or
// (with or without a lease) its Until passed.
func (pr *Progress) dead(now time.Time) string {
	switch {
	case !now.Before(pr.Until):
		return "did not record its end by " + pr.Until.Format(time.RFC3339)
	case pr.Heartbeat != nil && now.Sub(*pr.Heartbeat) >= LeaseTimeout:
		return fmt.Sprintf("has not renewed its lease since %s (timeout %s)", pr.Heartbeat.Format(time.RFC3339), LeaseTimeout)
	}
	return ""
}

// leftAt says where an execution that ended without recording its end
// left the line's setpoints.
func (pr *Progress) leftAt() string {
	m := pr.LastWritten
	if m == nil {
		return "it wrote no move, so it did not move the setpoints"
	}
	vars := make([]string, 0, len(m.Set))
	for v := range m.Set {
		vars = append(vars, v)
	}
	sort.Strings(vars)
	var b strings.Builder
	for i, v := range vars {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %g", v, m.Set[v])
	}
	return fmt.Sprintf("the setpoints may be left at move %d's values (%s), last written at %s: nothing moved them back", m.Index, b.String(), m.At.Format(time.RFC3339))
}

func (r *Record) progress() *Progress {
	if r == nil {
		return nil
	}
	return r.Progress
}

type startPayload struct {
	At              int64  `json:"at"`
	Until           int64  `json:"until"`
	Planned         int    `json:"planned"`
	CertificateHash string `json:"certificateHash"`
}

// StartMargin is the time an execution is given beyond its planned
// length (its last move's time plus the hold) to fit its models and
// record its result; past it, a start without a result reads as
// interrupted and the test may be claimed again if it wrote no move.
const StartMargin = time.Hour

// The lease of a running execution: its executor renews it every
// HeartbeatEvery (RecordHeartbeat) until it has recorded its end; a
// start without a result whose lease was last renewed LeaseTimeout ago
// or more reads as interrupted (its process was killed), long before
// its Until, and the test may be claimed again if it wrote no move.
const (
	HeartbeatEvery = 5 * time.Second
	LeaseTimeout   = 30 * time.Second
)

// LeaseName is the lease of step test id's running execution.
func LeaseName(id string) string { return "steptest/" + id }

func leaseHolder(startSeq int64) string { return "start/" + strconv.FormatInt(startSeq, 10) }

// RecordStart claims step test c for an execution by actor at now: in
// one serialised write transaction it reads the test's trail and appends
// "steptest.start" only when no move of the test was ever written
// (AML_CONFLICT: executed already) and no other execution is running
// (AML_CONFLICT: a start without a result whose Until has not passed),
// then signs the log's head. Two concurrent claims never both succeed.
func RecordStart(ctx context.Context, st RecordStore, key Signer, c *contract.StepTestCertificate, actor string, now time.Time) (*Progress, error) {
	if c == nil || len(c.Moves) == 0 {
		return nil, core.Errorf(core.CodeInvalidArgument, "a step test with moves is required")
	}
	now = now.UTC().Truncate(time.Millisecond)
	planned := time.Duration((c.Moves[len(c.Moves)-1].AtSec + c.HoldSec) * float64(time.Second))
	until := now.Add(planned + StartMargin)
	log := st.AuditLog()
	tx, err := st.SQL().Begin(ctx)
	if err != nil {
		return nil, sqldb.Err(err, "step test %s: begin claim", c.TestID)
	}
	defer func() { _ = tx.Rollback() }()
	lease, held, err := twinstore.LeaseTx(ctx, tx, LeaseName(c.TestID))
	if err != nil {
		return nil, err
	}
	var lp *twinstore.Lease
	if held {
		lp = &lease
	}
	e, err := log.AppendIfTx(ctx, tx, actor, AuditStart, c.TestID, c.LineID, startPayload{At: now.UnixMilli(), Until: until.UnixMilli(), Planned: len(c.Moves), CertificateHash: c.CertificateHash},
		func(trail []audit.Entry) error { return claimable(c.TestID, trail, lp, now) })
	if err != nil {
		return nil, err
	}
	if err := twinstore.TakeLeaseTx(ctx, tx, LeaseName(c.TestID), leaseHolder(e.Seq), now); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, sqldb.Err(err, "step test %s: commit claim", c.TestID)
	}
	if _, err := log.Checkpoint(ctx, key); err != nil {
		return nil, err
	}
	hb := now
	return &Progress{Status: StatusRunning, Stage: StageMoving, StartSeq: e.Seq, StartedBy: actor, StartedAt: now, Until: until, Planned: len(c.Moves), Heartbeat: &hb}, nil
}

// RecordHeartbeat renews the lease of the execution of step test id
// that started at audit entry startSeq, at now; AML_CONFLICT when the
// lease is held by another execution (this one was taken for dead and
// the test claimed again: it must write no further move).
func RecordHeartbeat(ctx context.Context, st RecordStore, id string, startSeq int64, now time.Time) error {
	return st.RenewLease(ctx, LeaseName(id), leaseHolder(startSeq), now.UTC().Truncate(time.Millisecond))
}

// claimable: no move of the trail was written, and its latest start (if
// any) has its result or is taken for dead (Progress.dead: its lease,
// when the lease is that start's, not renewed for LeaseTimeout, or past
// its Until).
func claimable(id string, trail []audit.Entry, lease *twinstore.Lease, now time.Time) error {
	written := 0
	var running *startPayload
	var runningSeq int64
	for _, en := range trail {
		switch en.Action {
		case AuditMove:
			var p struct {
				Allowed bool `json:"allowed"`
			}
			if json.Unmarshal(en.Payload, &p) == nil && p.Allowed {
				written++
			}
		case AuditStart:
			var p startPayload
			if err := json.Unmarshal(en.Payload, &p); err != nil {
				return core.Errorf(core.CodeCertInvalid, "start entry %d of step test %s does not decode: %v", en.Seq, id, err)
			}
			running, runningSeq = &p, en.Seq
		case AuditResult:
			running = nil
		}
	}
	if written > 0 {
		return core.FieldErrorf(core.CodeConflict, "id", "step test %s was executed already (%d moves written)", id, written)
	}
	if running == nil {
		return nil
	}
	pr := &Progress{Until: time.UnixMilli(running.Until).UTC()}
	if lease != nil && lease.Holder == leaseHolder(runningSeq) {
		hb := lease.Renewed
		pr.Heartbeat = &hb
	}
	if pr.dead(now) == "" {
		return core.FieldErrorf(core.CodeConflict, "id", "step test %s is running (started at %s): follow it with steptest.show", id, time.UnixMilli(running.At).UTC().Format(time.RFC3339))
	}
	return nil
}

// RecordResult appends "steptest.result" to the trail of step test c as
// actor: the execution's result (its samples left out: they are stored
// as the run) and its error, then signs the log's head. A result the
// log refuses (a non-finite number in a fit) is recorded without its
// fit, the refusal in FitError.
func RecordResult(ctx context.Context, st RecordStore, key Signer, c *contract.StepTestCertificate, actor string, res *Result, runErr error) error {
	payload := func(res *Result) map[string]any {
		p := map[string]any{}
		if res != nil {
			r := *res
			if r.Execution != nil {
				ex := *r.Execution
				ex.Samples = nil
				r.Execution = &ex
			}
			p["result"] = &r
		}
		if runErr != nil {
			b := auth.BodyOf(runErr)
			p["error"] = &b
		}
		return p
	}
	log := st.AuditLog()
	_, err := log.Append(ctx, actor, AuditResult, c.TestID, c.LineID, payload(res))
	if err != nil && res != nil && res.Fit != nil {
		r := *res
		r.Fit, r.FitError = nil, "the fit report was not recorded: "+err.Error()
		_, err = log.Append(ctx, actor, AuditResult, c.TestID, c.LineID, payload(&r))
	}
	if err != nil {
		return err
	}
	_, err = log.Checkpoint(ctx, key)
	return err
}

func checkApproval(ctx context.Context, st RecordStore, ring *twinstore.Keyring, c *contract.StepTestCertificate, en audit.Entry) error {
	var s ApprovalStatement
	a, err := twinstore.TrailApproval(en, ring, "step test", c.TestID, &s)
	if err != nil {
		return err
	}
	switch {
	case s.Kind != ApprovalKind || s.TestID != c.TestID || s.TestHash != c.CertificateHash || a.Subject != c.TestID || s.KeyID != a.KeyID:
		return core.Errorf(core.CodeCertInvalid, "the signed approval at entry %d belongs to another step test or key", en.Seq)
	case s.ApprovedBy != en.Actor:
		return core.Errorf(core.CodeCertInvalid, "the signed approval at entry %d names %s, the entry %s", en.Seq, s.ApprovedBy, en.Actor)
	}
	roles, err := st.NameRoles(ctx, s.ApprovedBy)
	if err != nil {
		return err
	}
	if err := Approve(c, twinstore.Approver{Name: s.ApprovedBy, Role: s.ApproverRole}, roles, time.UnixMilli(s.ApprovedAt)); err != nil {
		return core.Wrap(core.CodeCertInvalid, err, fmt.Sprintf("the approval at entry %d", en.Seq))
	}
	return nil
}

// Auditor appends a step test's execution to the audit log: Execute
// calls Move after every move and Done at the end.
type Auditor struct {
	Log   *audit.Log
	Key   Signer
	Actor string
}

func (a *Auditor) entry(ctx context.Context, action string, c *contract.StepTestCertificate, payload map[string]any) error {
	if a == nil || a.Log == nil {
		return nil
	}
	actor := a.Actor
	if actor == "" {
		actor = "steptest"
	}
	if _, err := a.Log.Append(ctx, actor, action, c.TestID, c.LineID, payload); err != nil {
		return err
	}
	if a.Key != nil {
		if _, err := a.Log.Checkpoint(ctx, a.Key); err != nil {
			return err
		}
	}
	return nil
}

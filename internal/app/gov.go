package app

import (
	"context"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/registry"
	"github.com/aml-project/aml/internal/retention"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/govern"
	"github.com/aml-project/aml/internal/twin/guard"
)

// The governance use cases: certificates, channels, the audit log, API
// tokens and retention. Certificate approval, revocation and execution
// are a person's: the role table (internal/auth) never lets an agent take
// those actions, and the certificate store refuses a requester approving
// their own certificate.

var (
	opCertList    = Op{Name: "cert.list", Act: auth.ActRead, Summary: "List certificates, each verified"}
	opCertKey     = Op{Name: "cert.key", Act: auth.ActRead, Summary: "The server's certificate public key (PEM)"}
	opCertRotate  = Op{Name: "cert.key.rotate", Act: auth.ActAdmin, Summary: "Rotate the deployment's certificate signing key (admin, on the data directory's machine only)"}
	opCertIssue   = Op{Name: "cert.issue", Act: auth.ActCertRequest, Summary: "Issue a signed certificate for a passing trial (queued for a person to approve)"}
	opCertShow    = Op{Name: "cert.show", Act: auth.ActRead, Heavy: true, Summary: "A certificate (verified) with the predicted target trajectories it certifies, in the targets' units, against holding"}
	opCertApprove = Op{Name: "cert.approve", Act: auth.ActCertApprove, Summary: "Approve an ISSUED certificate (never by its requester)"}
	opCertRevoke  = Op{Name: "cert.revoke", Act: auth.ActCertApprove, Summary: "Revoke an ISSUED or APPROVED certificate"}
	opCertMoves   = Op{Name: "cert.moves", Act: auth.ActRead, Summary: "What executing a certificate would write at its first step (node, from, to): what an approver reviews"}
	opCertVerify  = Op{Name: "cert.verify", Act: auth.ActRead, Summary: "Verify row, hash, signature, audit trail and chain"}
	opCertExecute = Op{Name: "cert.execute", Act: auth.ActWrite, Heavy: true, Summary: "Write an APPROVED certificate's first step through the fail-closed write guard (re-validated from a fresh snapshot when the certified one is too old)"}
	opChannelShow = Op{Name: "channel.show", Act: auth.ActRead, Summary: "The channel profile of a line"}
	opChannelSet  = Op{Name: "channel.set", Act: auth.ActWrite, Summary: "Set the channel profile of a line (audited)"}
	opAuditList   = Op{Name: "audit.list", Act: auth.ActRead, Summary: "Audit entries in seq order"}
	opAuditVerify = Op{Name: "audit.verify", Act: auth.ActRead, Summary: "Verify the hash chain"}
	opTokenList   = Op{Name: "token.list", Act: auth.ActAdmin, Summary: "List API tokens (never their secrets)"}
	opTokenCreate = Op{Name: "token.create", Act: auth.ActAdmin, Summary: "Create an API token (returned once)"}
	opTokenRevoke = Op{Name: "token.revoke", Act: auth.ActAdmin, Summary: "Revoke an API token"}
	opRetention   = Op{Name: "retention.apply", Act: auth.ActAdmin, Summary: "Apply the retention policy"}
)

// govOps lists the use cases of this file.
func govOps() []*Op {
	return []*Op{
		bind(&opCertList, (*App).CertList),
		bind(&opCertKey, (*App).CertKey),
		bind(&opCertRotate, (*App).CertRotateKey),
		bind(&opCertIssue, (*App).CertIssue),
		bind(&opCertShow, (*App).CertShow),
		bind(&opCertApprove, (*App).CertApprove),
		bind(&opCertRevoke, (*App).CertRevoke),
		bind(&opCertMoves, (*App).CertMoves),
		bind(&opCertVerify, (*App).CertVerify),
		bind(&opCertExecute, (*App).CertExecute),
		bind(&opChannelShow, (*App).ChannelShow),
		bind(&opChannelSet, (*App).ChannelSet),
		bind(&opAuditList, (*App).AuditList),
		bind(&opAuditVerify, (*App).AuditVerify),
		bind(&opTokenList, (*App).TokenList),
		bind(&opTokenCreate, (*App).TokenCreate),
		bind(&opTokenRevoke, (*App).TokenRevoke),
		bind(&opRetention, (*App).RetentionApply),
	}
}

func (a *App) key() (*cert.KeyPair, error) {
	if a.d.Key == nil {
		return nil, core.Errorf(core.CodeStoreUnavailable, "this process has no certificate key")
	}
	return a.d.Key, nil
}

func (a *App) certEvent(r *contract.CertRecord) {
	if r == nil || r.Cert == nil {
		return
	}
	a.publish(events.Event{Kind: events.CertificateUp, Line: r.LineID, ID: r.Cert.RecommendationID, Data: map[string]any{
		"status": r.Cert.Status, "trialId": r.Cert.TrialID, "requestedBy": r.Cert.CreatedBy, "approvedBy": r.Cert.ApprovedBy}})
}

// certLine checks p's scope for act on a certificate's line (unverified
// row) before any transition.
func (a *App) certLine(ctx context.Context, p Principal, act auth.Action, id string) error {
	r, err := a.d.Store.LoadCertificate(ctx, id)
	if err != nil {
		return unseen(p, err)
	}
	return p.Allow(act, r.LineID)
}

// CertListRequest filters certificates.
type CertListRequest struct {
	Line   string `json:"line,omitempty" jsonschema:"only this line"`
	Status string `json:"status,omitempty" jsonschema:"ISSUED, APPROVED, EXECUTED, EXPIRED or REVOKED"`
	Limit  int    `json:"limit,omitempty" jsonschema:"at most this many (default 100, at most 1000)"`
}

// Validate checks the status and the limit.
func (r *CertListRequest) Validate() error {
	if r.Status != "" {
		if _, err := contract.ParseCertStatus(strings.ToUpper(r.Status)); err != nil {
			return core.FieldErrorf(core.CodeInvalidArgument, "status", "status %q is not ISSUED, APPROVED, EXECUTED, EXPIRED or REVOKED", r.Status)
		}
	}
	return limitIn("limit", r.Limit, 1, 1000)
}

// CertList lists the certificates of p's lines, each verified.
func (a *App) CertList(ctx context.Context, p Principal, req CertListRequest) (List[contract.CertListItem], error) {
	return run(ctx, a, p, &opCertList, req, func(ctx context.Context, p Principal, req CertListRequest) (List[contract.CertListItem], error) {
		var zero List[contract.CertListItem]
		if err := scope(p, auth.ActRead, req.Line); err != nil {
			return zero, err
		}
		f := contract.CertFilter{LineID: req.Line, Limit: req.Limit}
		if f.Limit == 0 {
			f.Limit = 100
		}
		if req.Status != "" {
			f.Status, _ = contract.ParseCertStatus(strings.ToUpper(req.Status))
		}
		k, err := a.key()
		if err != nil {
			return zero, err
		}
		items, err := a.d.Store.ListCertificates(ctx, f, k.Public)
		if err != nil {
			return zero, err
		}
		return ListOf(filter(p, items, func(i contract.CertListItem) string { return i.LineID })), nil
	})
}

// CertKeyRequest has no fields.
type CertKeyRequest struct{}

// CertKeyResponse is the certificate public key.
type CertKeyResponse struct {
	KeyID        string `json:"keyId"`
	Algorithm    string `json:"algorithm"`
	PublicKeyPEM string `json:"publicKeyPem"`
}

// CertKey returns the public key certificates are signed with.
func (a *App) CertKey(ctx context.Context, p Principal, req CertKeyRequest) (CertKeyResponse, error) {
	return run(ctx, a, p, &opCertKey, req, func(ctx context.Context, p Principal, _ CertKeyRequest) (CertKeyResponse, error) {
		k, err := a.key()
		if err != nil {
			return CertKeyResponse{}, err
		}
		return CertKeyResponse{KeyID: k.ID, Algorithm: "ed25519", PublicKeyPEM: string(k.PublicPEM())}, nil
	})
}

// CertRotateKeyRequest has no fields.
type CertRotateKeyRequest struct{}

// CertRotateKeyResponse is a key rotation's outcome.
type CertRotateKeyResponse struct {
	OldKeyID string    `json:"oldKeyId"`
	KeyID    string    `json:"keyId"`
	At       time.Time `json:"at"`
	// KeyFile is the data directory's key file, now holding the new key;
	// RetiredKeyFile the old key's file, kept.
	KeyFile        string `json:"keyFile"`
	RetiredKeyFile string `json:"retiredKeyFile"`
}

// CertRotateKey replaces the data directory's signing key by a new one
// (cert.RotateKey): the old key signs that the new one succeeds it, the
// new key that it retired the old, both stored and audited
// ("cert.key.rotate") before the new key is installed as cert-key.json;
// the old file is kept in keys/. From then on this process signs with the
// new key; certificates signed with the old one still verify, and one
// approved but not executed may still be executed. Other processes
// sharing the database are refused (AML_CERT_KEY_RETIRED) until the new
// cert-key.json is copied into their data directory. Only the local CLI
// rotates (it holds the data directory): over the API it is
// AML_FORBIDDEN.
func (a *App) CertRotateKey(ctx context.Context, p Principal, req CertRotateKeyRequest) (CertRotateKeyResponse, error) {
	return run(ctx, a, p, &opCertRotate, req, func(ctx context.Context, p Principal, _ CertRotateKeyRequest) (CertRotateKeyResponse, error) {
		var zero CertRotateKeyResponse
		if !p.Local {
			return zero, core.Errorf(core.CodeForbidden, "the signing key is rotated on the machine holding the data directory (aml cert rotate-key without --server), never over the API")
		}
		k, err := a.key()
		if err != nil {
			return zero, err
		}
		if a.d.DataDir == "" {
			return zero, core.Errorf(core.CodeInvalidArgument, "rotate: no data directory")
		}
		now := a.o.Now().UTC()
		old, next, err := cert.RotateKey(a.d.DataDir, now, func(old, next *cert.KeyPair) error {
			if old.ID != k.ID {
				return core.Errorf(core.CodeCertKeyMismatch, "the data directory's key %s is not this process's key %s: it changed since the process started", old.ID, k.ID)
			}
			return a.d.Store.RotateSigningKey(ctx, old, next, p.Name, now)
		})
		if err != nil {
			return zero, err
		}
		a.d.Key = next
		return CertRotateKeyResponse{OldKeyID: old.ID, KeyID: next.ID, At: now.Truncate(time.Millisecond),
			KeyFile: filepath.Join(a.d.DataDir, cert.KeyFileName), RetiredKeyFile: cert.ArchivedKeyPath(a.d.DataDir, old.ID)}, nil
	})
}

// CertIssueRequest certifies a stored passing trial.
type CertIssueRequest struct {
	Trial string   `json:"trial" jsonschema:"trial id (a stored trial that passes and improves on the baseline)"`
	TTL   Duration `json:"ttl,omitempty" jsonschema:"lifetime (default 15m, at most 24h)"`
}

// Validate requires the trial and a TTL within bounds.
func (r *CertIssueRequest) Validate() error {
	if r.TTL < 0 || r.TTL.D() > cert.MaxTTL {
		return core.FieldErrorf(core.CodeInvalidArgument, "ttl", "ttl must be 0..%s", cert.MaxTTL)
	}
	return required("trial", r.Trial)
}

// CertIssue issues a signed certificate, queued for a person to approve.
func (a *App) CertIssue(ctx context.Context, p Principal, req CertIssueRequest) (*contract.CertRecord, error) {
	return run(ctx, a, p, &opCertIssue, req, func(ctx context.Context, p Principal, req CertIssueRequest) (*contract.CertRecord, error) {
		t, err := a.d.Store.GetTrial(ctx, req.Trial)
		if err != nil {
			return nil, err
		}
		if err := p.Allow(auth.ActCertRequest, t.LineID); err != nil {
			return nil, err
		}
		m, err := a.d.Store.GetModel(ctx, t.Trial.ModelID)
		if err != nil {
			return nil, err
		}
		if err := registry.CheckLineage(m, "drive a certificate"); err != nil {
			return nil, err
		}
		k, err := a.key()
		if err != nil {
			return nil, err
		}
		r, err := a.d.Store.IssueCertificate(ctx, req.Trial, p.Name, k, req.TTL.D(), a.o.Now())
		if err != nil {
			return nil, err
		}
		a.certEvent(r)
		return r, nil
	})
}

// CertRequest names a certificate.
type CertRequest struct {
	ID string `json:"id" jsonschema:"certificate (recommendation) id"`
}

// Validate requires the id.
func (r *CertRequest) Validate() error { return required("id", r.ID) }

// CertShowResponse is a verified certificate with what its approver
// reviews besides the moves: each objective target's predicted trajectory
// with its tube against the target, in the target's unit.
type CertShowResponse struct {
	*contract.CertRecord
	Targets []CertTarget `json:"targets,omitempty" jsonschema:"per objective target: the certified trial's predicted mean and tube at each step against the target value, in the target node's unit, with holding's prediction (baseline)"`
	// Execution is whether it can still be executed (CertExecutionOf).
	Execution CertExecution `json:"execution" jsonschema:"whether the certificate can still be executed, and why not"`
}

// CertShow returns a certificate, verified, with its predicted target
// trajectories (certTargets; none when the trial's records are gone).
func (a *App) CertShow(ctx context.Context, p Principal, req CertRequest) (CertShowResponse, error) {
	return run(ctx, a, p, &opCertShow, req, func(ctx context.Context, p Principal, req CertRequest) (CertShowResponse, error) {
		if err := a.certLine(ctx, p, auth.ActRead, req.ID); err != nil {
			return CertShowResponse{}, err
		}
		k, err := a.key()
		if err != nil {
			return CertShowResponse{}, err
		}
		r, err := a.d.Store.GetCertificate(ctx, req.ID, k.Public)
		if err != nil {
			return CertShowResponse{}, err
		}
		return CertShowResponse{CertRecord: r, Targets: a.certTargets(ctx, r), Execution: a.CertExecutionOf(ctx, r, true, "")}, nil
	})
}

// CertApprove approves an ISSUED certificate; its requester never can.
func (a *App) CertApprove(ctx context.Context, p Principal, req CertRequest) (*contract.CertRecord, error) {
	return run(ctx, a, p, &opCertApprove, req, func(ctx context.Context, p Principal, req CertRequest) (*contract.CertRecord, error) {
		if err := a.certLine(ctx, p, auth.ActCertApprove, req.ID); err != nil {
			return nil, err
		}
		k, err := a.key()
		if err != nil {
			return nil, err
		}
		// The approval is signed with the deployment key, naming the
		// approver and their role: the write guard trusts the signature,
		// not the row.
		r, err := a.d.Store.ApproveCertificateAs(ctx, req.ID, twinstore.Approver{Name: p.Name, Role: string(p.Role)}, k, a.o.Now())
		if err != nil {
			return nil, err
		}
		a.certEvent(r)
		return r, nil
	})
}

// CertRevokeRequest revokes a certificate with a reason.
type CertRevokeRequest struct {
	ID     string `json:"id" jsonschema:"certificate id"`
	Reason string `json:"reason" jsonschema:"why (recorded in the audit log)"`
}

// Validate requires id and reason.
func (r *CertRevokeRequest) Validate() error {
	return firstErr(required("id", r.ID), required("reason", r.Reason))
}

// CertRevoke revokes an ISSUED or APPROVED certificate.
func (a *App) CertRevoke(ctx context.Context, p Principal, req CertRevokeRequest) (*contract.CertRecord, error) {
	return run(ctx, a, p, &opCertRevoke, req, func(ctx context.Context, p Principal, req CertRevokeRequest) (*contract.CertRecord, error) {
		if err := a.certLine(ctx, p, auth.ActCertApprove, req.ID); err != nil {
			return nil, err
		}
		k, err := a.key()
		if err != nil {
			return nil, err
		}
		r, err := a.d.Store.RevokeCertificate(ctx, req.ID, p.Name, req.Reason, k.Public, a.o.Now())
		if err != nil {
			return nil, err
		}
		a.certEvent(r)
		return r, nil
	})
}

// CertVerify checks a certificate's row, hash, signature, audit trail and
// chain. A failed check returns the report with the error.
func (a *App) CertVerify(ctx context.Context, p Principal, req CertRequest) (govern.VerifyReport, error) {
	return run(ctx, a, p, &opCertVerify, req, func(ctx context.Context, p Principal, req CertRequest) (govern.VerifyReport, error) {
		if err := a.certLine(ctx, p, auth.ActRead, req.ID); err != nil {
			return govern.VerifyReport{}, err
		}
		k, err := a.key()
		if err != nil {
			return govern.VerifyReport{}, err
		}
		return govern.VerifyCertificate(ctx, a.d.Store, k.Public, req.ID)
	})
}

// CertExecuteRequest executes an approved certificate's first step.
type CertExecuteRequest struct {
	ID string `json:"id" jsonschema:"certificate id"`
	// Run, when given, must be the run the action counts against — the
	// certified snapshot's run, else the line's active run — or the write
	// is denied RUN_MISMATCH: the caller never chooses the run that
	// maxActionsPerRun counts.
	Run string `json:"run,omitempty" jsonschema:"optional check: the run the action counts against (the certified snapshot's run, else the line's active run); any other is refused"`

	// Writer writes to the machine. Only in-process callers (the demo,
	// the tests) set it; otherwise the writer the process's operator
	// configured for the certificate's line (Options.LineWriters), else a
	// recording writer seeded with the snapshot's values — the fresh
	// one's when re-validated.
	Writer guard.Writer `json:"-"`
}

// Validate requires the id.
func (r *CertExecuteRequest) Validate() error { return required("id", r.ID) }

// CertExecute writes an APPROVED certificate's first step through the
// fail-closed write guard. A denied write returns the guard's result with
// the error. When the certified snapshot is older than the guard's
// freshness limit (an approval minutes after issue), execute re-validates
// first (see revalidate.go): a fresh snapshot, the certified trajectory
// re-run from it, and the write only when that re-run passes and still
// improves (else AML_CERT_REVALIDATION_FAILED); Result.Revalidation has
// the figures. The write history records the write at the wall clock
// (Options.WallNow).
func (a *App) CertExecute(ctx context.Context, p Principal, req CertExecuteRequest) (govern.Result, error) {
	return run(ctx, a, p, &opCertExecute, req, func(ctx context.Context, p Principal, req CertExecuteRequest) (govern.Result, error) {
		if err := a.certLine(ctx, p, auth.ActWrite, req.ID); err != nil {
			return govern.Result{}, err
		}
		k, err := a.key()
		if err != nil {
			return govern.Result{}, err
		}
		// The write is judged on the clock the certificate was issued and
		// approved on (the application's clock), and recorded at the wall
		// clock.
		now := a.o.Now()
		opts := govern.Options{Actor: p.Name, RunID: req.Run, Now: now, WallNow: a.o.WallNow(), SnapshotMaxAge: certMaxAge}
		seed := func() map[string]float64 { return a.seedValues(ctx, req.ID) }
		if r, err := a.d.Store.LoadCertificate(ctx, req.ID); err == nil {
			if tr, orig, ok := a.needsRevalidation(ctx, r, now); ok {
				fresh, rv := a.revalidate(ctx, p, r, tr, orig, now)
				opts.Snapshot, opts.Revalidation = fresh, rv
				if fresh != nil {
					scene, _ := a.d.Store.GetScene(ctx, r.Cert.SceneID, r.Cert.SceneVersion)
					seed = func() map[string]float64 { return freshSeed(r.Cert, scene, fresh) }
				}
			}
		}
		line := ""
		if r, err := a.d.Store.LoadCertificate(ctx, req.ID); err == nil {
			line = r.LineID
		}
		w, err := a.writerFor(ctx, line, req.Writer)
		if err != nil {
			return govern.Result{}, err
		}
		if w == nil {
			w = guard.NewRecordingWriter(seed())
		}
		res, xerr := govern.ExecuteGoverned(ctx, a.d.Store, k.Public, req.ID, w, opts, a.d.Bus)
		if r, err := a.d.Store.LoadCertificate(ctx, req.ID); err == nil {
			a.certEvent(r)
		}
		return res, xerr
	})
}

// seedValues are the recording writer's initial node values: the
// snapshot's control values on the certificate's nodes.
func (a *App) seedValues(ctx context.Context, id string) map[string]float64 {
	out := map[string]float64{}
	r, err := a.d.Store.LoadCertificate(ctx, id)
	if err != nil {
		return out
	}
	for _, m := range a.firstStep(ctx, r) {
		if !math.IsNaN(m.From) {
			out[m.NodeID] = m.From
		}
	}
	return out
}

// firstStep is what the write guard would write for a certificate: its
// first step's moves from the trial's snapshot (none when the trial or
// snapshot is gone).
func (a *App) firstStep(ctx context.Context, r *contract.CertRecord) []guard.Move {
	tr, err := a.d.Store.GetTrial(ctx, r.Cert.TrialID)
	if err != nil {
		return nil
	}
	snap, err := a.d.Store.GetSnapshot(ctx, tr.Trial.SnapshotID)
	if err != nil {
		return nil
	}
	scene, _ := a.d.Store.GetScene(ctx, r.Cert.SceneID, r.Cert.SceneVersion)
	return govern.FirstStepMoves(r.Cert, scene, snap)
}

// CertMove is one setpoint move of a certificate's first step.
type CertMove struct {
	VariableID string   `json:"variableId"`
	NodeID     string   `json:"nodeId"`
	From       *float64 `json:"from" jsonschema:"the snapshot's value (null when it had none)"`
	To         float64  `json:"to"`
	Delta      *float64 `json:"delta" jsonschema:"to − from (null without a from)"`
}

// CertMoves lists what executing a certificate would write at its first
// step — what an approver reviews before approving.
func (a *App) CertMoves(ctx context.Context, p Principal, req CertRequest) (List[CertMove], error) {
	return run(ctx, a, p, &opCertMoves, req, func(ctx context.Context, p Principal, req CertRequest) (List[CertMove], error) {
		r, err := a.d.Store.LoadCertificate(ctx, req.ID)
		if err != nil {
			return List[CertMove]{}, err
		}
		if err := p.Allow(auth.ActRead, r.LineID); err != nil {
			return List[CertMove]{}, err
		}
		var out []CertMove
		for _, m := range a.firstStep(ctx, r) {
			cm := CertMove{VariableID: m.VariableID, NodeID: m.NodeID, To: m.To}
			if !math.IsNaN(m.From) {
				from, d := m.From, m.Delta()
				cm.From, cm.Delta = &from, &d
			}
			out = append(out, cm)
		}
		return ListOf(out), nil
	})
}

// ---- channels

// ChannelShowRequest names a line.
type ChannelShowRequest struct {
	Line string `json:"line" jsonschema:"line id"`
}

// Validate requires the line.
func (r *ChannelShowRequest) Validate() error { return required("line", r.Line) }

// ChannelShow returns a line's channel profile.
func (a *App) ChannelShow(ctx context.Context, p Principal, req ChannelShowRequest) (*contract.ChannelRecord, error) {
	return run(ctx, a, p, &opChannelShow, req, func(ctx context.Context, p Principal, req ChannelShowRequest) (*contract.ChannelRecord, error) {
		if err := p.Allow(auth.ActRead, req.Line); err != nil {
			return nil, err
		}
		return a.d.Store.GetChannel(ctx, req.Line)
	})
}

// ChannelSetRequest sets a line's channel profile.
type ChannelSetRequest struct {
	Line          string                           `json:"line" jsonschema:"line id"`
	Profile       string                           `json:"profile" jsonschema:"legacy or hybrid_twin"`
	ControlPolicy string                           `json:"controlPolicy" jsonschema:"recommendation_only, hitl_governed or bounded_auto"`
	ChannelID     string                           `json:"channelId,omitempty"`
	SceneID       string                           `json:"sceneId,omitempty"`
	SceneVersion  string                           `json:"sceneVersion,omitempty"`
	Bounds        map[string]contract.ChannelBound `json:"bounds,omitempty" jsonschema:"bounded_auto: node → bounds"`
}

// Validate requires the line.
func (r *ChannelSetRequest) Validate() error { return required("line", r.Line) }

// ChannelSet sets a line's channel profile (audited).
func (a *App) ChannelSet(ctx context.Context, p Principal, req ChannelSetRequest) (*contract.ChannelRecord, error) {
	return run(ctx, a, p, &opChannelSet, req, func(ctx context.Context, p Principal, req ChannelSetRequest) (*contract.ChannelRecord, error) {
		if err := p.Allow(auth.ActWrite, req.Line); err != nil {
			return nil, err
		}
		return a.d.Store.SetChannel(ctx, contract.ChannelRecord{LineID: req.Line, ChannelID: req.ChannelID, Profile: req.Profile, ControlPolicy: req.ControlPolicy,
			SceneID: req.SceneID, SceneVersion: req.SceneVersion, Bounds: req.Bounds}, p.Name)
	})
}

// ---- audit

// auditLog is the audit log, verified with its signed checkpoints when
// this process has the deployment key.
func (a *App) auditLog() *audit.Log {
	l := audit.New(a.d.Store.SQL())
	if a.d.Key != nil {
		l = twinstore.KeyedLog(l, a.d.Key.Public)
	}
	return l
}

// verifiedAuditLog is auditLog verified with the keyring of this
// process's key (it and the keys it retired), so checkpoints signed
// before a rotation verify.
func (a *App) verifiedAuditLog(ctx context.Context) (*audit.Log, error) {
	l := audit.New(a.d.Store.SQL())
	if a.d.Key == nil {
		return l, nil
	}
	ring, err := a.d.Store.Keyring(ctx, a.d.Key.Public)
	if err != nil {
		return nil, err
	}
	return twinstore.RingLog(l, ring), nil
}

// AuditListRequest pages through the audit log, oldest first by default.
type AuditListRequest struct {
	After   int64  `json:"after,omitempty" jsonschema:"only entries after this seq"`
	Limit   int    `json:"limit,omitempty" jsonschema:"at most this many"`
	Subject string `json:"subject,omitempty" jsonschema:"only entries about this subject"`
	Actor   string `json:"actor,omitempty" jsonschema:"only entries by this actor"`
	Action  string `json:"action,omitempty" jsonschema:"only this action, or the actions starting with a prefix that ends in * (cert.*)"`
	// From and To bound the entries' time, both inclusive.
	From *Instant `json:"from,omitempty" jsonschema:"only entries at or after this time (epoch ms or RFC 3339)"`
	To   *Instant `json:"to,omitempty" jsonschema:"only entries at or before this time (epoch ms or RFC 3339)"`
	// Newest lists newest first; page with before.
	Newest bool  `json:"newest,omitempty" jsonschema:"newest first (page with before = the response's nextBefore)"`
	Before int64 `json:"before,omitempty" jsonschema:"only entries before this seq"`
}

// Validate bounds after, before, limit and the time range.
func (r *AuditListRequest) Validate() error {
	if r.After < 0 {
		return core.FieldErrorf(core.CodeInvalidArgument, "after", "after must not be negative")
	}
	if r.Before < 0 {
		return core.FieldErrorf(core.CodeInvalidArgument, "before", "before must not be negative")
	}
	if r.From != nil && r.To != nil && *r.To < *r.From {
		return core.FieldErrorf(core.CodeInvalidArgument, "to", "to (%s) is before from (%s)", r.To.T().Format(time.RFC3339), r.From.T().Format(time.RFC3339))
	}
	return limitIn("limit", r.Limit, 1, audit.MaxListLimit)
}

// AuditListResponse is a page of entries.
type AuditListResponse struct {
	Items      []audit.Entry `json:"items"`
	Count      int           `json:"count"`
	NextAfter  int64         `json:"nextAfter,omitempty" jsonschema:"pass as after for the next page; absent on the last page"`
	NextBefore int64         `json:"nextBefore,omitempty" jsonschema:"newest first: pass as before for the next (older) page; absent on the last page"`
	// HeadSeq and Head are the chain's head when the page was read (what
	// audit verify --expect-head pins), without verifying the chain.
	HeadSeq int64  `json:"headSeq" jsonschema:"the seq of the log's newest entry (0: empty)"`
	Head    string `json:"head" jsonschema:"the hash of the log's newest entry"`
}

// AuditList lists audit entries in seq order (newest first on request),
// filtered by subject, actor, action and time. A principal scoped to lines
// sees the entries of its lines only (entries without a line — tokens,
// global settings — need every line); the scope is part of the query, so
// a scoped principal's pages are full pages.
func (a *App) AuditList(ctx context.Context, p Principal, req AuditListRequest) (AuditListResponse, error) {
	return run(ctx, a, p, &opAuditList, req, func(ctx context.Context, p Principal, req AuditListRequest) (AuditListResponse, error) {
		limit := req.Limit
		if limit == 0 {
			limit = audit.DefaultListLimit
		}
		q := audit.Query{AfterSeq: req.After, BeforeSeq: req.Before, Subject: req.Subject, Actor: req.Actor, Action: req.Action,
			FromMs: ms(req.From), ToMs: ms(req.To), Newest: req.Newest, Limit: limit}
		if !p.AllLines() {
			q.Lines = append([]string{}, p.Lines...)
		}
		es, err := a.auditLog().Query(ctx, q)
		if err != nil {
			return AuditListResponse{}, err
		}
		res := AuditListResponse{Items: es, Count: len(es)}
		if res.HeadSeq, res.Head, err = a.auditLog().Head(ctx); err != nil {
			return AuditListResponse{}, err
		}
		if len(es) == limit {
			if req.Newest {
				res.NextBefore = es[len(es)-1].Seq
			} else {
				res.NextAfter = es[len(es)-1].Seq
			}
		}
		return res, nil
	})
}

// AuditVerifyRequest optionally pins the head.
type AuditVerifyRequest struct {
	ExpectHead string `json:"expectHead,omitempty" jsonschema:"also require this head (SEQ:HASH)"`
}

// Validate checks the head's form.
func (r *AuditVerifyRequest) Validate() error {
	if r.ExpectHead == "" {
		return nil
	}
	sq, h, ok := strings.Cut(r.ExpectHead, ":")
	n, err := strconv.ParseInt(sq, 10, 64)
	if !ok || err != nil || n < 0 || len(h) != 64 {
		return core.FieldErrorf(core.CodeInvalidArgument, "expectHead", "expectHead %q is not SEQ:HASH", r.ExpectHead)
	}
	return nil
}

// AuditVerify verifies the audit hash chain (and the expected head).
func (a *App) AuditVerify(ctx context.Context, p Principal, req AuditVerifyRequest) (audit.VerifyResult, error) {
	return run(ctx, a, p, &opAuditVerify, req, func(ctx context.Context, p Principal, req AuditVerifyRequest) (audit.VerifyResult, error) {
		l, err := a.verifiedAuditLog(ctx)
		if err != nil {
			return audit.VerifyResult{}, err
		}
		if req.ExpectHead != "" {
			sq, h, _ := strings.Cut(req.ExpectHead, ":")
			n, _ := strconv.ParseInt(sq, 10, 64)
			return l.VerifyHead(ctx, n, strings.ToLower(h))
		}
		return l.Verify(ctx)
	})
}

// ---- administration

func (a *App) tokens() *auth.Tokens { return auth.NewTokens(a.d.Store.SQL()) }

// TokenVerifier is the store's API tokens as a verifier, what a login
// page checks a token against (nil without a store). It is no op:
// verifying a token is how a caller becomes a principal.
func (a *App) TokenVerifier() auth.Verifier {
	if a.d == nil || a.d.Store == nil {
		return nil
	}
	return a.tokens()
}

// TokenListRequest has no fields.
type TokenListRequest struct{}

// TokenList lists API tokens (never their secrets).
func (a *App) TokenList(ctx context.Context, p Principal, req TokenListRequest) (List[auth.TokenInfo], error) {
	return run(ctx, a, p, &opTokenList, req, func(ctx context.Context, p Principal, _ TokenListRequest) (List[auth.TokenInfo], error) {
		ts, err := a.tokens().List(ctx)
		if err != nil {
			return List[auth.TokenInfo]{}, err
		}
		return ListOf(ts), nil
	})
}

// TokenCreateRequest creates an API token.
type TokenCreateRequest struct {
	Name  string    `json:"name" jsonschema:"who the token is for (the actor of its actions)"`
	Role  auth.Role `json:"role" jsonschema:"viewer, engineer, approver, admin or agent"`
	Lines []string  `json:"lines,omitempty" jsonschema:"line scope (default: every line)"`
	TTL   Duration  `json:"ttl,omitempty" jsonschema:"lifetime (e.g. 720h; default: no expiry)"`
}

// Validate checks name, role and TTL.
func (r *TokenCreateRequest) Validate() error {
	if r.TTL < 0 {
		return core.FieldErrorf(core.CodeInvalidArgument, "ttl", "ttl must not be negative")
	}
	if _, err := auth.ParseRole(string(r.Role)); err != nil {
		return err
	}
	return required("name", r.Name)
}

// TokenCreateResponse is the token's record and, once, its secret.
type TokenCreateResponse struct {
	auth.TokenInfo
	Token string `json:"token" jsonschema:"the secret (shown once)"`
}

// TokenCreate creates an API token.
func (a *App) TokenCreate(ctx context.Context, p Principal, req TokenCreateRequest) (TokenCreateResponse, error) {
	return run(ctx, a, p, &opTokenCreate, req, func(ctx context.Context, p Principal, req TokenCreateRequest) (TokenCreateResponse, error) {
		info, secret, err := a.tokens().Create(ctx, p.Name, auth.NewToken{Name: req.Name, Role: req.Role, Lines: req.Lines, TTL: req.TTL.D()})
		if err != nil {
			return TokenCreateResponse{}, err
		}
		return TokenCreateResponse{TokenInfo: info, Token: secret}, nil
	})
}

// TokenRevokeRequest names a token.
type TokenRevokeRequest struct {
	ID string `json:"id" jsonschema:"token id"`
}

// Validate requires the id.
func (r *TokenRevokeRequest) Validate() error { return required("id", r.ID) }

// TokenRevoke revokes an API token.
func (a *App) TokenRevoke(ctx context.Context, p Principal, req TokenRevokeRequest) (auth.TokenInfo, error) {
	return run(ctx, a, p, &opTokenRevoke, req, func(ctx context.Context, p Principal, req TokenRevokeRequest) (auth.TokenInfo, error) {
		return a.tokens().Revoke(ctx, p.Name, req.ID)
	})
}

// RetentionRequest is a retention policy: the age past which each kind of
// record is removed (0: never).
type RetentionRequest struct {
	DatasetAge Duration `json:"datasetAge,omitempty" jsonschema:"remove unreferenced datasets older than this (e.g. 2160h; 0 never)"`
	ModelAge   Duration `json:"modelAge,omitempty" jsonschema:"remove retired models older than this"`
	JobAge     Duration `json:"jobAge,omitempty" jsonschema:"remove finished job folders older than this"`
	DryRun     bool     `json:"dryRun,omitempty" jsonschema:"report what would be removed"`
}

// Validate refuses negative ages.
func (r *RetentionRequest) Validate() error {
	for _, f := range [...]struct {
		n string
		d Duration
	}{{"datasetAge", r.DatasetAge}, {"modelAge", r.ModelAge}, {"jobAge", r.JobAge}} {
		if f.d < 0 {
			return core.FieldErrorf(core.CodeInvalidArgument, f.n, "%s must not be negative", f.n)
		}
	}
	return nil
}

// RetentionApply applies a retention policy.
func (a *App) RetentionApply(ctx context.Context, p Principal, req RetentionRequest) (retention.Report, error) {
	return run(ctx, a, p, &opRetention, req, func(ctx context.Context, p Principal, req RetentionRequest) (retention.Report, error) {
		return retention.Run(ctx, a.d.Store, a.d.DataDir, retention.Policy{DatasetAge: req.DatasetAge.D(), ModelAge: req.ModelAge.D(), JobAge: req.JobAge.D(), DryRun: req.DryRun}, a.o.Now())
	})
}

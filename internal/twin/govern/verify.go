package govern

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
)

// Names of the checks of VerifyCertificate, in order.
const (
	CheckRow       = "row"                 // the stored JSON decodes, validates and agrees with its columns
	CheckHash      = "hash"                // certificateHash is the hash of the signed body
	CheckSignature = "signature"           // the Ed25519 signature verifies with the server key
	CheckApproval  = "approval-signature"  // an approved certificate's approval is signed and matches the row
	CheckExecution = "execution-signature" // an executed certificate's execution claim is signed
	CheckAnchor    = "audit-anchor"        // the row's audit anchor is a signed audit checkpoint
	CheckIssue     = "audit-issue"         // the issue entry is in the log at the head recorded with the row
	CheckLifecycle = "audit-lifecycle"
	CheckChain     = "audit-chain" // audit.VerifyHead over the whole log, with its signed checkpoints
)

// VerifyCheck is one check of a certificate verification.
type VerifyCheck struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// VerifyReport is the result of VerifyCertificate.
type VerifyReport struct {
	CertificateID string        `json:"certificateId"`
	Status        string        `json:"status,omitempty"`
	KeyID         string        `json:"keyId,omitempty"`
	Hash          string        `json:"certificateHash,omitempty"`
	AuditEntries  int           `json:"auditEntries"`
	Checks        []VerifyCheck `json:"checks"`
	OK            bool          `json:"ok"`
}

// VerifyCertificate checks stored certificate id end to end with the
// server's public key pub:
//
//   - row: the stored JSON decodes into a valid certificate agreeing with
//     the row's columns;
//   - hash: certificateHash is the sha256 of the signed body;
//   - signature: the signature verifies with pub and keyId is pub's id;
//   - approval-signature (a certificate that records an approval): the
//     approval statement signed with pub exists and matches the row — a
//     person with the approver or admin role, not the requester
//     (twinstore.CheckApproval);
//   - execution-signature (EXECUTED): the signed execution claim exists
//     and names the certificate's hash;
//   - audit-anchor: the audit entry recorded with the row (seq, hash) is
//     a checkpoint signed with pub, so an anchor edited to match a
//     rewritten log is detected;
//   - audit-issue: the log holds a "cert.issue" entry for it at the seq
//     and hash recorded with the row, naming the same certificateHash;
//   - audit-lifecycle: its cert.* entries replay (issue, then approve /
//     revoke / expire / execute, each from the status the previous left)
//     to the row's status and approver;
//   - audit-chain: the whole audit log verifies, with every signed
//     checkpoint (a rewrite that recomputed the hashes no longer matches
//     them), and still contains the issue entry as recorded
//     (audit.VerifyHead), so a truncated or rewritten log is detected
//     too.
//
// It returns the report and, when any check fails, an AML_CERT_INVALID
// error naming the first failed check (AML_NOT_FOUND for an unknown id).
func VerifyCertificate(ctx context.Context, st store.Store, pub ed25519.PublicKey, id string) (VerifyReport, error) {
	rep := VerifyReport{CertificateID: id, Checks: []VerifyCheck{}}
	add := func(name string, err error, okDetail string) {
		ch := VerifyCheck{Name: name, OK: err == nil, Detail: okDetail}
		if err != nil {
			ch.Detail = errText(err)
		}
		rep.Checks = append(rep.Checks, ch)
	}
	if len(pub) != ed25519.PublicKeySize {
		return rep, core.Errorf(core.CodeInvalidArgument, "a certificate verification key is required")
	}
	ring, err := st.Keyring(ctx, pub)
	if err != nil {
		return rep, err
	}
	rec, err := st.LoadCertificate(ctx, id)
	if core.CodeOf(err) == core.CodeNotFound {
		return rep, err
	}
	if err != nil && core.CodeOf(err) != cert.CodeCertInvalid {
		return rep, err
	}
	add(CheckRow, err, "the stored certificate agrees with its row")
	var c *contract.RecommendationCertificate
	if rec != nil {
		c = rec.Cert
		rep.Status, rep.KeyID, rep.Hash = string(c.Status), c.KeyID, c.CertificateHash
		if h, herr := c.BodyHash(); herr != nil {
			add(CheckHash, herr, "")
		} else if h != c.CertificateHash {
			add(CheckHash, fmt.Errorf("the signed body hashes to %s, the certificate says %s: a signed field was changed", h, c.CertificateHash), "")
		} else {
			add(CheckHash, nil, "certificateHash "+h+" is the hash of the signed body")
		}
		add(CheckSignature, ring.VerifyCert(c), "Ed25519 signature verifies with key "+c.KeyID)
		if c.ApprovedBy != "" || c.Status == contract.CertApproved || c.Status == contract.CertExecuted {
			add(CheckApproval, checkSignedApproval(ctx, st, ring, c), "the approval by "+c.ApprovedBy+" is signed with the deployment key")
		}
		if c.Status == contract.CertExecuted {
			add(CheckExecution, checkSignedExecution(ctx, st, ring, c), "the execution claim is signed with the deployment key")
		}
	}

	log := st.AuditLog()
	var entries []audit.Entry
	for after := int64(0); ; {
		page, err := log.List(ctx, after, audit.MaxListLimit, id)
		if err != nil {
			return rep, err
		}
		entries = append(entries, page...)
		if len(page) < audit.MaxListLimit {
			break
		}
		after = page[len(page)-1].Seq
	}
	rep.AuditEntries = len(entries)
	keys := ring.Keys()
	keyed := twinstore.RingLog(log, ring)
	if rec != nil {
		ok, err := log.SignedAt(ctx, keys, rec.AuditSeq, rec.AuditHash)
		if err == nil && !ok {
			err = fmt.Errorf("the row's audit anchor (entry %d, %.12s…) is not a checkpoint signed with a trusted key (%s): the anchor or the log was changed", rec.AuditSeq, rec.AuditHash, strings.Join(ring.IDs(), ", "))
		}
		add(CheckAnchor, err, fmt.Sprintf("audit anchor entry %d is signed", rec.AuditSeq))
		add(CheckIssue, checkIssue(rec, entries), fmt.Sprintf("issue recorded in audit entry %d", rec.AuditSeq))
		add(CheckLifecycle, checkLifecycle(c, entries), "the audit trail replays to status "+string(c.Status))
		res, err := keyed.VerifyHead(ctx, rec.AuditSeq, rec.AuditHash)
		add(CheckChain, err, fmt.Sprintf("audit log verified: %d entries, head %d:%s, %d signed checkpoints up to entry %d", res.Entries, res.HeadSeq, res.Head, res.Checkpoints, res.SignedSeq))
	} else {
		res, err := keyed.Verify(ctx)
		add(CheckChain, err, fmt.Sprintf("audit log verified: %d entries, head %d:%s, %d signed checkpoints up to entry %d", res.Entries, res.HeadSeq, res.Head, res.Checkpoints, res.SignedSeq))
	}
	rep.OK = true
	for _, ch := range rep.Checks {
		if !ch.OK {
			rep.OK = false
			return rep, core.Errorf(cert.CodeCertInvalid, "certificate %s fails check %s: %s", id, ch.Name, ch.Detail)
		}
	}
	return rep, nil
}

func checkSignedApproval(ctx context.Context, st store.Store, ring *twinstore.Keyring, c *contract.RecommendationCertificate) error {
	a, err := st.GetAttestation(ctx, c.RecommendationID, twinstore.AttestApprove)
	if core.CodeOf(err) == core.CodeNotFound {
		return fmt.Errorf("the certificate records an approval by %s but no approval signed with the deployment key exists: it was approved outside AML", orNone(c.ApprovedBy))
	}
	if err != nil {
		return err
	}
	return twinstore.CheckApprovalWith(c, a, ring)
}

func checkSignedExecution(ctx context.Context, st store.Store, ring *twinstore.Keyring, c *contract.RecommendationCertificate) error {
	a, err := st.GetAttestation(ctx, c.RecommendationID, twinstore.AttestExecute)
	if core.CodeOf(err) == core.CodeNotFound {
		return fmt.Errorf("the certificate is EXECUTED but no signed execution claim exists: it was marked outside AML")
	}
	if err != nil {
		return err
	}
	if err := a.Verify(ring.Key(a.KeyID)); err != nil {
		return err
	}
	x, err := a.Execution()
	if err != nil {
		return err
	}
	if x.Kind != twinstore.ExecutionKind || x.CertificateID != c.RecommendationID || x.CertificateHash != c.CertificateHash {
		return fmt.Errorf("the signed execution claim belongs to another certificate")
	}
	return nil
}

func errText(err error) string {
	var ae *core.Error
	if errors.As(err, &ae) {
		return ae.Code + ": " + ae.Message
	}
	return err.Error()
}

func payloadOf(e audit.Entry) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(e.Payload, &m)
	if m == nil {
		m = map[string]any{}
	}
	return m
}

func checkIssue(rec *contract.CertRecord, es []audit.Entry) error {
	for _, e := range es {
		if e.Action != twinstore.AuditCertIssue {
			continue
		}
		if e.Seq != rec.AuditSeq || e.Hash != rec.AuditHash {
			return fmt.Errorf("the issue entry is seq %d (%.12s…), the certificate row recorded seq %d (%.12s…)", e.Seq, e.Hash, rec.AuditSeq, rec.AuditHash)
		}
		if h, _ := payloadOf(e)["certificateHash"].(string); h != rec.Cert.CertificateHash {
			return fmt.Errorf("the issue entry names certificateHash %s, the certificate is %s", h, rec.Cert.CertificateHash)
		}
		return nil
	}
	return fmt.Errorf("no %s entry for the certificate in the audit log (the row recorded seq %d)", twinstore.AuditCertIssue, rec.AuditSeq)
}

// checkLifecycle replays the certificate's cert.* entries.
func checkLifecycle(c *contract.RecommendationCertificate, es []audit.Entry) error {
	status, approvedBy := contract.CertStatus(""), ""
	to := map[string]contract.CertStatus{
		twinstore.AuditCertApprove: contract.CertApproved, twinstore.AuditCertRevoke: contract.CertRevoked,
		twinstore.AuditCertExpire: contract.CertExpired, twinstore.AuditCertExecute: contract.CertExecuted,
	}
	var steps []string
	for _, e := range es {
		if !strings.HasPrefix(e.Action, "cert.") {
			continue
		}
		p := payloadOf(e)
		if e.Action == twinstore.AuditCertIssue {
			if status != "" {
				return fmt.Errorf("audit entry %d issues the certificate a second time", e.Seq)
			}
			status = contract.CertIssued
			steps = append(steps, string(status))
			continue
		}
		next, ok := to[e.Action]
		if !ok {
			return fmt.Errorf("audit entry %d has unknown certificate action %s", e.Seq, e.Action)
		}
		if status == "" {
			return fmt.Errorf("audit entry %d (%s) comes before the issue", e.Seq, e.Action)
		}
		if from, _ := p["from"].(string); from != string(status) || !cert.Allowed(status, next) {
			return fmt.Errorf("audit entry %d moves the certificate %s → %s, but the trail had it %s", e.Seq, from, next, status)
		}
		if h, ok := p["certificateHash"].(string); ok && h != c.CertificateHash {
			return fmt.Errorf("audit entry %d names certificateHash %s, the certificate is %s", e.Seq, h, c.CertificateHash)
		}
		if next == contract.CertApproved {
			approvedBy = e.Actor
		}
		status = next
		steps = append(steps, string(status))
	}
	if status != c.Status {
		return fmt.Errorf("the audit trail (%s) ends at %s but the certificate is %s: its status was changed outside AML", strings.Join(steps, " → "), orNone(string(status)), c.Status)
	}
	if approvedBy != c.ApprovedBy {
		return fmt.Errorf("the audit trail has approver %s but the certificate names %s", orNone(approvedBy), orNone(c.ApprovedBy))
	}
	return nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

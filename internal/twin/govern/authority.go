package govern

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/guard"
)

// usedActions are the audit actions that show a certificate was used: a
// claim, a node write, an outcome or the EXECUTED step.
var usedActions = map[string]bool{
	twinstore.AuditWriteStart: true, twinstore.AuditWriteAttempt: true, twinstore.AuditWriteExecuted: true,
	twinstore.AuditWriteFailed: true, twinstore.AuditCertExecute: true, AuditAlarm: true,
}

// authority checks what makes an APPROVED certificate's row authoritative
// before any write, trusting only what the deployment key signed and the
// audit log those signatures cover (security issue #16):
//
//   - the issuer's signature (cert.Verify);
//   - the signed approval (twin_attestations) matching the row, by a
//     person with the approver or admin role who is not the requester
//     (twinstore.CheckApproval) and whose name no agent's token carries
//     — no signed approval: APPROVAL_UNSIGNED;
//   - no signed execution statement and no audit entry of a claim, write
//     or execution of the certificate (CERT_ALREADY_USED), no revocation
//     or expiry entry: a row reset to APPROVED is not reused;
//   - the audit log holds the issue entry at the anchor and the approval
//     entry naming the signed statement (AUDIT_INCOMPLETE), the whole log
//     verifies with its signed checkpoints, and both entries are signed
//     checkpoints (AUDIT_TAMPERED).
//
// It returns the denial reason and detail, "" when the certificate holds.
func authority(ctx context.Context, st Store, ring *twinstore.Keyring, rec *contract.CertRecord) (reason, detail string) {
	c := rec.Cert
	id := c.RecommendationID
	if err := ring.VerifyCert(c); err != nil {
		return guard.ReasonCertInvalid, errText(err)
	}
	att, err := st.GetAttestation(ctx, id, twinstore.AttestApprove)
	switch {
	case core.CodeOf(err) == core.CodeNotFound:
		return ReasonApprovalUnsigned, fmt.Sprintf("certificate %s's row says APPROVED by %s, but no approval signed with the deployment key exists: the row was changed outside AML", id, c.ApprovedBy)
	case err != nil:
		return ReasonStoreError, fmt.Sprintf("read the signed approval of %s: %v", id, err)
	}
	if err := twinstore.CheckApprovalWith(c, att, ring); err != nil {
		return ReasonApprovalInvalid, errText(err)
	}
	roles, err := st.NameRoles(ctx, c.ApprovedBy)
	if err != nil {
		return ReasonStoreError, fmt.Sprintf("read the roles of approver %s: %v", c.ApprovedBy, err)
	}
	for _, r := range roles {
		if r == "agent" {
			return ReasonApprovalInvalid, fmt.Sprintf("certificate %s was approved as %s, the name of an agent's API token: only a person approves", id, c.ApprovedBy)
		}
	}
	switch _, err := st.GetAttestation(ctx, id, twinstore.AttestExecute); {
	case err == nil:
		return guard.ReasonCertAlreadyUsed, fmt.Sprintf("certificate %s has a signed execution statement: it was used already (its row says %s)", id, c.Status)
	case core.CodeOf(err) != core.CodeNotFound:
		return ReasonStoreError, fmt.Sprintf("read the signed execution of %s: %v", id, err)
	}

	log := st.AuditLog()
	var entries []audit.Entry
	for after := int64(0); ; {
		page, err := log.List(ctx, after, audit.MaxListLimit, id)
		if err != nil {
			return ReasonStoreError, fmt.Sprintf("read the audit trail of %s: %v", id, err)
		}
		entries = append(entries, page...)
		if len(page) < audit.MaxListLimit {
			break
		}
		after = page[len(page)-1].Seq
	}
	var issue, approve *audit.Entry
	for i := range entries {
		e := &entries[i]
		p := payloadOf(*e)
		switch {
		case usedActions[e.Action]:
			return guard.ReasonCertAlreadyUsed, fmt.Sprintf("the audit log records %s of certificate %s at entry %d: it was used already (its row says %s)", e.Action, id, e.Seq, c.Status)
		case e.Action == twinstore.AuditCertRevoke:
			return guard.ReasonCertRevoked, fmt.Sprintf("the audit log records the revocation of certificate %s at entry %d (its row says %s)", id, e.Seq, c.Status)
		case e.Action == twinstore.AuditCertExpire:
			return guard.ReasonCertExpired, fmt.Sprintf("the audit log records the expiry of certificate %s at entry %d (its row says %s)", id, e.Seq, c.Status)
		case e.Action == twinstore.AuditCertIssue && issue == nil:
			if h, _ := p["certificateHash"].(string); h == c.CertificateHash && e.Seq == rec.AuditSeq && e.Hash == rec.AuditHash {
				issue = e
			}
		case e.Action == twinstore.AuditCertApprove && approve == nil:
			if h, _ := p["statementHash"].(string); h == att.Hash && e.Actor == c.ApprovedBy {
				approve = e
			}
		}
	}
	if issue == nil {
		return ReasonAuditIncomplete, fmt.Sprintf("the audit log has no issue entry of certificate %s at its anchor (entry %d)", id, rec.AuditSeq)
	}
	if approve == nil {
		return ReasonAuditIncomplete, fmt.Sprintf("the audit log has no approval entry of certificate %s naming its signed approval", id)
	}
	keys := ring.Keys()
	if _, err := twinstore.RingLog(log, ring).Verify(ctx); err != nil {
		return ReasonAuditTampered, errText(err)
	}
	for _, e := range []*audit.Entry{issue, approve} {
		ok, err := log.SignedAt(ctx, keys, e.Seq, e.Hash)
		if err != nil {
			return ReasonStoreError, fmt.Sprintf("read the audit checkpoint of entry %d: %v", e.Seq, err)
		}
		if !ok {
			return ReasonAuditTampered, fmt.Sprintf("the %s entry %d of certificate %s is not covered by a signed audit checkpoint: the log or its checkpoints were changed", e.Action, e.Seq, id)
		}
	}
	return "", ""
}

// auditedHistory is the write history the guard checks: the store's
// (twin_writes) together with the writes the audit log recorded, so that
// deleting history rows does not reopen an interval or a run's count
// (deleting audit entries breaks the signed chain instead).
type auditedHistory struct{ st Store }

func (h auditedHistory) Writes(ctx context.Context, lineID string, since time.Time) ([]contract.WriteRecord, error) {
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
		k := key{a.CertificateID, a.NodeID, a.At.UnixMilli()}
		if !seen[k] {
			seen[k] = true
			rows = append(rows, a.WriteRecord)
		}
	}
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].At.Before(rows[j].At) })
	return rows, nil
}

package web

import (
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
)

// certsPage is the certificate inbox: certificates waiting for a person
// (ISSUED) first, then the rest, newest first. Approve and revoke buttons
// are shown to roles that may use them; the POST handlers check again.
func (s *server) certsPage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	l, err := s.app.CertList(r.Context(), p, app.CertListRequest{Status: strings.ToUpper(r.URL.Query().Get("status")), Limit: 500})
	if err != nil {
		return err
	}
	var inbox, rest []certRow
	for _, it := range l.Items {
		row := certRow{it, s.certExec(r, &it.CertRecord, it.Verified, it.Problem), nil}
		if st := it.Cert.Status; st == contract.CertIssued || st == contract.CertApproved {
			row.D = s.certDetailOf(r.Context(), p, it.Cert.RecommendationID)
		}
		if it.Cert.Status == contract.CertIssued {
			inbox = append(inbox, row)
		} else {
			rest = append(rest, row)
		}
	}
	s.render(w, r, http.StatusOK, "certs", &p, map[string]any{"Title": "Certificates", "Inbox": inbox, "Rest": rest,
		"CanApprove": auth.RoleAllows(p.Role, auth.ActCertApprove), "Flash": r.URL.Query().Get("done")})
	return nil
}

// certPage is one certificate with what its execution would write and its
// audit trail, all read through the application layer.
func (s *server) certPage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ctx := r.Context()
	id := app.CertRequest{ID: r.PathValue("id")}
	rec, err := s.app.CertShow(ctx, p, id)
	if err != nil {
		return err
	}
	moves, err := s.app.CertMoves(ctx, p, id)
	if err != nil {
		return err
	}
	trail, err := s.app.AuditList(ctx, p, app.AuditListRequest{Subject: rec.Cert.RecommendationID, Limit: 100})
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, "cert", &p, map[string]any{"Title": "Certificate " + rec.Cert.RecommendationID, "Rec": rec, "C": rec.Cert,
		"Exec": execView{rec.Execution, countdown(rec.Execution, s.app.Now())}, "Moves": moves.Items, "Trail": trail.Items,
		"CanApprove": auth.RoleAllows(p.Role, auth.ActCertApprove), "CanExecute": auth.RoleAllows(p.Role, auth.ActWrite), "Flash": r.URL.Query().Get("done")})
	return nil
}

// certRow is an inbox row: the certificate with its execution state.
type certRow struct {
	contract.CertListItem
	Exec execView
	// D is what an approver reviews (certificates still to decide or
	// execute).
	D *certDetail
}

// execView is a certificate's execution state with its countdown ("" when
// it cannot execute: no countdown as if it could).
type execView struct {
	app.CertExecution
	In string
}

func (s *server) certExec(r *http.Request, rec *contract.CertRecord, verified bool, problem string) execView {
	e := s.app.CertExecutionOf(r.Context(), rec, verified, problem)
	return execView{e, countdown(e, s.app.Now())}
}

// countdown is the time left until e's expiry, rounded down to the minute
// ("" when the expiry does not matter any more).
func countdown(e app.CertExecution, now time.Time) string {
	if e.ExpiresAt == nil {
		return ""
	}
	left := e.ExpiresAt.Sub(now)
	switch {
	case left <= 0:
		return "due now"
	case left < time.Minute:
		return "in under a minute"
	}
	return "in " + (left.Truncate(time.Minute)).String()
}

// certApprove approves a certificate as the logged-in person through the
// application layer (internal/app), which checks the role (an agent or
// viewer is refused with the reason) and the line scope, and whose
// certificate store enforces the rest — the requester cannot approve their
// own certificate, an expired one cannot be approved — with the
// principal's name as the audited actor.
func (s *server) certApprove(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.certStep(w, r, p, "approved", func(id string) error {
		_, err := s.app.CertApprove(r.Context(), p, app.CertRequest{ID: id})
		return err
	})
}

func (s *server) certRevoke(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	return s.certStep(w, r, p, "revoked", func(id string) error {
		_, err := s.app.CertRevoke(r.Context(), p, app.CertRevokeRequest{ID: id, Reason: reason})
		if ae := (*core.Error)(nil); errors.As(err, &ae) && ae.Code == core.CodeInvalidArgument && ae.Field == "reason" {
			return core.FieldErrorf(core.CodeInvalidArgument, "reason", "say why the certificate is revoked")
		}
		return err
	})
}

func (s *server) certStep(w http.ResponseWriter, r *http.Request, p auth.Principal, done string, step func(id string) error) error {
	id := r.PathValue("id")
	if err := step(id); err != nil {
		if core.CodeOf(err) == core.CodeForbidden {
			return forbidden(p, err)
		}
		return err
	}
	back := "/ui/certificates?done=" + url.QueryEscape(id+" "+done)
	if r.PostFormValue("back") == "cert" {
		back = "/ui/certificates/" + url.PathEscape(id) + "?done=" + url.QueryEscape(done)
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
	return nil
}

func forbidden(p auth.Principal, err error) error {
	e := core.FieldErrorf(core.CodeForbidden, "role", "%s: approving and revoking certificates is a decision a person with the approver (or admin) role signs; %s has role %s",
		auth.BodyOf(err).Message, p.Name, p.Role)
	if auth.BodyOf(err).Field == "lineId" {
		e.Field = "lineId"
		e.Message = auth.BodyOf(err).Message
	}
	return e
}

// publishCert tells live clients (the event stream) that a certificate
// changed status.
func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

package api

import (
	"encoding/json"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/retention"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/govern"
	"github.com/aml-project/aml/internal/twin/guard"
)

func (s *Server) key() (*cert.KeyPair, error) {
	if s.d.Key == nil {
		return nil, core.Errorf(core.CodeStoreUnavailable, "this server has no certificate key")
	}
	return s.d.Key, nil
}

func (s *Server) certEvent(r *twinstore.CertRecord) {
	if r == nil || r.Cert == nil {
		return
	}
	s.d.Bus.Publish(events.Event{Kind: events.CertificateUp, Line: r.LineID, ID: r.Cert.RecommendationID, Data: map[string]any{
		"status": r.Cert.Status, "trialId": r.Cert.TrialID, "requestedBy": r.Cert.CreatedBy, "approvedBy": r.Cert.ApprovedBy}})
}

func (s *Server) listCerts(c *call) (any, error) {
	f := twinstore.CertFilter{LineID: c.q("line")}
	if err := c.scopeLine(f.LineID); err != nil {
		return nil, err
	}
	if st := c.q("status"); st != "" {
		cs, err := contract.ParseCertStatus(strings.ToUpper(st))
		if err != nil {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "status", "status %q is not ISSUED, APPROVED, EXECUTED, EXPIRED or REVOKED", st)
		}
		f.Status = cs
	}
	var err error
	if f.Limit, err = c.qInt("limit", 100, 1, 1000); err != nil {
		return nil, err
	}
	k, err := s.key()
	if err != nil {
		return nil, err
	}
	items, err := s.d.Store.ListCertificates(c.ctx, f, k.Public)
	if err != nil {
		return nil, err
	}
	out := []twinstore.CertListItem{}
	for _, it := range items {
		if c.p.InScope(it.LineID) {
			out = append(out, it)
		}
	}
	return listOf(out), nil
}

func (s *Server) certKey(c *call) (any, error) {
	k, err := s.key()
	if err != nil {
		return nil, err
	}
	return map[string]string{"keyId": k.ID, "algorithm": "ed25519", "publicKeyPem": string(k.PublicPEM())}, nil
}

// certLine reads a certificate's line (unverified row) for the scope
// check before any transition.
func (s *Server) certLine(c *call, id string) error {
	r, err := s.d.Store.LoadCertificate(c.ctx, id)
	if err != nil {
		return err
	}
	return c.line(r.LineID)
}

type issueReq struct {
	Trial string `json:"trial"`
	// TTLSec is the lifetime in seconds (default 900, at most 86400).
	TTLSec int `json:"ttlSec,omitempty"`
}

func (s *Server) issueCert(c *call) (any, error) {
	var req issueReq
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if req.Trial == "" {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "trial", "trial is required")
	}
	if req.TTLSec < 0 || time.Duration(req.TTLSec)*time.Second > cert.MaxTTL {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "ttlSec", "ttlSec must be 0..%d", int(cert.MaxTTL/time.Second))
	}
	t, err := s.d.Store.GetTrial(c.ctx, req.Trial)
	if err != nil {
		return nil, err
	}
	if err := c.line(t.LineID); err != nil {
		return nil, err
	}
	k, err := s.key()
	if err != nil {
		return nil, err
	}
	r, err := s.d.Store.IssueCertificate(c.ctx, req.Trial, c.p.Name, k, time.Duration(req.TTLSec)*time.Second, s.o.Now())
	if err != nil {
		return nil, err
	}
	s.certEvent(r)
	return r, nil
}

func (s *Server) showCert(c *call) (any, error) {
	k, err := s.key()
	if err != nil {
		return nil, err
	}
	id := c.param("id")
	if err := s.certLine(c, id); err != nil {
		return nil, err
	}
	return s.d.Store.GetCertificate(c.ctx, id, k.Public)
}

func (s *Server) approveCert(c *call) (any, error) {
	id := c.param("id")
	if err := s.certLine(c, id); err != nil {
		return nil, err
	}
	k, err := s.key()
	if err != nil {
		return nil, err
	}
	r, err := s.d.Store.ApproveCertificate(c.ctx, id, c.p.Name, k.Public, s.o.Now())
	if err != nil {
		return nil, err
	}
	s.certEvent(r)
	return r, nil
}

type revokeReq struct {
	Reason string `json:"reason"`
}

func (s *Server) revokeCert(c *call) (any, error) {
	var req revokeReq
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if strings.TrimSpace(req.Reason) == "" {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "reason", "reason is required")
	}
	id := c.param("id")
	if err := s.certLine(c, id); err != nil {
		return nil, err
	}
	k, err := s.key()
	if err != nil {
		return nil, err
	}
	r, err := s.d.Store.RevokeCertificate(c.ctx, id, c.p.Name, req.Reason, k.Public, s.o.Now())
	if err != nil {
		return nil, err
	}
	s.certEvent(r)
	return r, nil
}

func (s *Server) verifyCert(c *call) (any, error) {
	id := c.param("id")
	if err := s.certLine(c, id); err != nil {
		return nil, err
	}
	k, err := s.key()
	if err != nil {
		return nil, err
	}
	rep, verr := govern.VerifyCertificate(c.ctx, s.d.Store, k.Public, id)
	if len(rep.Checks) == 0 && verr != nil {
		return nil, verr
	}
	if verr != nil {
		c.wrote = true
		writeJSON(c.w, auth.StatusOf(verr), errorWithResult(verr, rep))
		return nil, nil
	}
	return rep, nil
}

// errorWithResult is an error body that also carries the operation's
// report (a denied write, a failed verification), so the caller sees
// which check failed.
func errorWithResult(err error, result any) any {
	b := auth.BodyOf(err)
	return struct {
		auth.ErrorBody
		Result any `json:"result"`
	}{b, result}
}

type executeReq struct {
	// Run is the batch run the action counts against (default: the
	// snapshot's run).
	Run string `json:"run,omitempty"`
}

func (s *Server) executeCert(c *call) (any, error) {
	var req executeReq
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	id := c.param("id")
	if err := s.certLine(c, id); err != nil {
		return nil, err
	}
	k, err := s.key()
	if err != nil {
		return nil, err
	}
	w := guard.NewRecordingWriter(s.seedValues(c, id))
	// The write is judged on the clock the certificate was issued and
	// approved on (Options.Now; the wall clock in production).
	res, xerr := govern.Execute(c.ctx, s.d.Store, k.Public, id, w, govern.Options{Actor: c.p.Name, RunID: req.Run, Now: s.o.Now()})
	if r, err := s.d.Store.LoadCertificate(c.ctx, id); err == nil {
		s.certEvent(r)
	}
	if xerr != nil {
		c.wrote = true
		writeJSON(c.w, auth.StatusOf(xerr), errorWithResult(xerr, res))
		return nil, nil
	}
	return res, nil
}

// seedValues are the recording writer's initial node values: the
// snapshot's control values on the certificate's nodes (as the CLI does;
// a machine connector replaces the recording writer later).
func (s *Server) seedValues(c *call, id string) map[string]float64 {
	out := map[string]float64{}
	r, err := s.d.Store.LoadCertificate(c.ctx, id)
	if err != nil {
		return out
	}
	tr, err := s.d.Store.GetTrial(c.ctx, r.Cert.TrialID)
	if err != nil {
		return out
	}
	snap, err := s.d.Store.GetSnapshot(c.ctx, tr.Trial.SnapshotID)
	if err != nil {
		return out
	}
	scene, _ := s.d.Store.GetScene(c.ctx, r.Cert.SceneID, r.Cert.SceneVersion)
	for _, m := range govern.FirstStepMoves(r.Cert, scene, snap) {
		if !math.IsNaN(m.From) {
			out[m.NodeID] = m.From
		}
	}
	return out
}

// ---- channels

type channelReq struct {
	Profile       string                            `json:"profile"`       // legacy or hybrid_twin
	ControlPolicy string                            `json:"controlPolicy"` // recommendation_only, hitl_governed or bounded_auto
	ChannelID     string                            `json:"channelId,omitempty"`
	SceneID       string                            `json:"sceneId,omitempty"`
	SceneVersion  string                            `json:"sceneVersion,omitempty"`
	Bounds        map[string]twinstore.ChannelBound `json:"bounds,omitempty"`
}

func (s *Server) showChannel(c *call) (any, error) {
	line := c.param("line")
	if err := c.line(line); err != nil {
		return nil, err
	}
	return s.d.Store.GetChannel(c.ctx, line)
}

func (s *Server) setChannel(c *call) (any, error) {
	line := c.param("line")
	if err := c.line(line); err != nil {
		return nil, err
	}
	var req channelReq
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	return s.d.Store.SetChannel(c.ctx, twinstore.ChannelRecord{LineID: line, ChannelID: req.ChannelID, Profile: req.Profile, ControlPolicy: req.ControlPolicy,
		SceneID: req.SceneID, SceneVersion: req.SceneVersion, Bounds: req.Bounds}, c.p.Name)
}

// ---- audit

func (s *Server) auditLog() *audit.Log { return audit.New(s.d.Store.SQL()) }

func (s *Server) listAudit(c *call) (any, error) {
	after, err := c.qInt("after", 0, 0, math.MaxInt)
	if err != nil {
		return nil, err
	}
	limit, err := c.qInt("limit", audit.DefaultListLimit, 1, audit.MaxListLimit)
	if err != nil {
		return nil, err
	}
	es, err := s.auditLog().List(c.ctx, int64(after), limit, c.q("subject"))
	if err != nil {
		return nil, err
	}
	// A caller scoped to lines sees the entries of its lines only (entries
	// without a line — tokens, global settings — need every line).
	out := []audit.Entry{}
	for _, e := range es {
		if c.p.AllLines() || (e.LineID != "" && c.p.InScope(e.LineID)) {
			out = append(out, e)
		}
	}
	res := map[string]any{"items": out, "count": len(out)}
	if len(es) == limit {
		res["nextAfter"] = es[len(es)-1].Seq
	}
	return res, nil
}

func (s *Server) verifyAudit(c *call) (any, error) {
	l := s.auditLog()
	if eh := c.q("expectHead"); eh != "" {
		sq, h, ok := strings.Cut(eh, ":")
		n, err := strconv.ParseInt(sq, 10, 64)
		if !ok || err != nil || n < 0 || len(h) != 64 {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "expectHead", "expectHead %q is not SEQ:HASH", eh)
		}
		return l.VerifyHead(c.ctx, n, strings.ToLower(h))
	}
	return l.Verify(c.ctx)
}

// ---- administration

func (s *Server) tokens() *auth.Tokens { return auth.NewTokens(s.d.Store.SQL()) }

type tokenReq struct {
	Name  string    `json:"name"`
	Role  auth.Role `json:"role"`
	Lines []string  `json:"lines,omitempty"`
	// TTLSec > 0 makes the token expire.
	TTLSec int64 `json:"ttlSec,omitempty"`
}

func (s *Server) listTokens(c *call) (any, error) {
	ts, err := s.tokens().List(c.ctx)
	if err != nil {
		return nil, err
	}
	return listOf(ts), nil
}

func (s *Server) createToken(c *call) (any, error) {
	var req tokenReq
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	info, secret, err := s.tokens().Create(c.ctx, c.p.Name, auth.NewToken{Name: req.Name, Role: req.Role, Lines: req.Lines, TTL: time.Duration(req.TTLSec) * time.Second})
	if err != nil {
		return nil, err
	}
	return struct {
		auth.TokenInfo
		Token string `json:"token"`
	}{info, secret}, nil
}

func (s *Server) revokeToken(c *call) (any, error) {
	return s.tokens().Revoke(c.ctx, c.p.Name, c.param("id"))
}

type retentionReq struct {
	// Ages in seconds; 0 never removes that kind.
	DatasetAgeSec int64 `json:"datasetAgeSec"`
	ModelAgeSec   int64 `json:"modelAgeSec"`
	JobAgeSec     int64 `json:"jobAgeSec"`
	DryRun        bool  `json:"dryRun"`
}

func (s *Server) retention(c *call) (any, error) {
	var req retentionReq
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if req.DatasetAgeSec < 0 || req.ModelAgeSec < 0 || req.JobAgeSec < 0 {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "datasetAgeSec", "ages must not be negative")
	}
	return retention.Run(c.ctx, s.d.Store, s.d.DataDir, retention.Policy{DatasetAge: time.Duration(req.DatasetAgeSec) * time.Second,
		ModelAge: time.Duration(req.ModelAgeSec) * time.Second, JobAge: time.Duration(req.JobAgeSec) * time.Second, DryRun: req.DryRun}, s.o.Now())
}

var _ = json.Marshal
var _ = http.StatusOK

package cert

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
)

// EnvelopeDefaultTTL is an operating envelope's lifetime when none is
// given (contract.EnvelopeMaxTTL is the longest).
const EnvelopeDefaultTTL = 4 * time.Hour

// EnvelopeInput is what an operating envelope is issued from.
type EnvelopeInput struct {
	// EnvelopeID names it; a random "env-…" id when empty.
	EnvelopeID string
	// CreatedBy proposes it and can never approve it.
	CreatedBy string
	// Scene is the frozen scene it is for (its line, id, version, hash).
	Scene *contract.SceneContract
	// ModelID (required) and ObjectiveID (optional) are the model the
	// supervisor re-optimises with and the objective it optimises.
	ModelID, ObjectiveID string
	// Bounds per manipulated variable: each a control of Scene, within
	// the control's own min/max when the scene declares them.
	Bounds          map[string]contract.ChannelBound
	MaxMovesPerHour int
}

// IssueEnvelope builds the envelope certificate of in (status ISSUED,
// issuedAt = createdAt = now to the millisecond, expiresAt = issuedAt +
// ttl; ttl 0: EnvelopeDefaultTTL, at most contract.EnvelopeMaxTTL) and
// signs the hash of its body with k. Input that does not qualify is
// refused with AML_CERT_REFUSED listing every reason: a scene that is not
// frozen, a bound on a variable that is not one of its controls or
// outside the control's declared range.
func IssueEnvelope(in EnvelopeInput, k *KeyPair, now time.Time, ttl time.Duration) (*contract.EnvelopeCertificate, error) {
	if k == nil || len(k.private) != ed25519.PrivateKeySize {
		return nil, core.Errorf(core.CodeInvalidArgument, "issue: no signing key")
	}
	if ttl == 0 {
		ttl = EnvelopeDefaultTTL
	}
	if ttl < time.Second || ttl > contract.EnvelopeMaxTTL {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "ttl", "ttl %v must be within 1s…%v", ttl, contract.EnvelopeMaxTTL)
	}
	if now.IsZero() {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "now", "issue time is zero")
	}
	now = now.UTC().Truncate(time.Millisecond)
	var p []core.Problem
	add := func(field, format string, args ...any) {
		p = append(p, core.Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	s := in.Scene
	var sceneHash string
	switch {
	case s == nil:
		add("scene", "required")
	case s.Status != contract.SceneFrozen:
		add("scene.status", "the scene must be frozen, not %q", s.Status)
	default:
		if err := s.Validate(); err != nil {
			add("scene", "%v", err)
		} else if h, err := s.Hash(); err != nil {
			add("scene", "%v", err)
		} else {
			sceneHash = h
		}
	}
	if s != nil {
		for v, b := range in.Bounds {
			c := s.Control(v)
			if c == nil {
				add("bounds."+v, "%s is not a control of scene %s", v, s.SceneID)
				continue
			}
			if c.Min != nil && b.Min < *c.Min {
				add("bounds."+v, "min %v is below the control's minimum %v", b.Min, *c.Min)
			}
			if c.Max != nil && b.Max > *c.Max {
				add("bounds."+v, "max %v is above the control's maximum %v", b.Max, *c.Max)
			}
		}
	}
	if len(p) > 0 {
		return nil, core.Invalid(CodeCertRefused, p)
	}
	id := in.EnvelopeID
	if strings.TrimSpace(id) == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, core.Wrap(core.CodeInternal, err, "issue: envelope id")
		}
		id = "env-" + hex.EncodeToString(b[:])
	}
	bounds := make(map[string]contract.ChannelBound, len(in.Bounds))
	for v, b := range in.Bounds {
		bounds[v] = b
	}
	e := &contract.EnvelopeCertificate{
		SchemaVersion: contract.EnvelopeSchemaVersion, EnvelopeID: id, CreatedAt: now, CreatedBy: in.CreatedBy,
		LineID: s.LineID, SceneID: s.SceneID, SceneVersion: s.SceneVersion, SceneHash: sceneHash,
		ModelID: in.ModelID, ObjectiveID: in.ObjectiveID, Bounds: bounds, MaxMovesPerHour: in.MaxMovesPerHour,
		IssuedAt: now, ExpiresAt: now.Add(ttl), KeyID: k.ID, Status: contract.CertIssued,
	}
	h, err := e.BodyHash()
	if err != nil {
		return nil, err
	}
	e.CertificateHash = h
	if e.Signature, err = k.sign(h); err != nil {
		return nil, err
	}
	if err := e.Validate(); err != nil {
		return nil, core.Invalid(CodeCertRefused, contract.ProblemsOf(err))
	}
	return e, nil
}

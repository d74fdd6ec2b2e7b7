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

// Error codes of this package. They are part of the public contract (CLI,
// API, MCP): never rename one, only add.
const (
	// CodeCertInvalid: a certificate is malformed, its hash does not match
	// its signed body, its signature does not verify, or it was signed by
	// another key. HTTP 422.
	CodeCertInvalid = core.CodeCertInvalid
	// CodeCertExpired: the certificate's expiresAt has passed; a transition
	// that found it so also marked it EXPIRED. HTTP 410.
	CodeCertExpired = core.CodeCertExpired
	// CodeCertRefused: a certificate was not issued because its input does
	// not qualify (trial failed or does not fit the scene, no improvement,
	// scene not frozen, missing hashes). Every reason is in Problems.
	// HTTP 422.
	CodeCertRefused = core.CodeCertRefused
)

// Other failures use core codes: a transition not allowed from the current
// status is AML_CONFLICT (409), self-approval AML_FORBIDDEN (403), a bad
// argument (empty approver, TTL out of range, no key) AML_INVALID_ARGUMENT
// (400).

// TTL bounds.
const (
	// DefaultTTL is the lifetime Issue uses when given ttl 0.
	DefaultTTL = 15 * time.Minute
	// MaxTTL is the longest lifetime: a recommendation rests on a snapshot
	// that is fresh for about a minute; after a day the line has moved on.
	MaxTTL = 24 * time.Hour
)

// IssueInput is what a certificate is issued from (defined with the
// certificate, in package twin/contract).
type IssueInput = contract.CertIssueInput

// Issue certifies a passed, improving virtual trial: it builds the
// certificate (status ISSUED, issuedAt = createdAt = now truncated to the
// millisecond in UTC, expiresAt = issuedAt + ttl, keyId = k.ID), sets
// certificateHash to the hash of its signed body
// (contract.RecommendationCertificate.SignedBody) and signs the 32 hash
// bytes with k. ttl 0 means DefaultTTL; ttl must not exceed MaxTTL.
// Input that does not qualify is refused with AML_CERT_REFUSED listing
// every reason.
func Issue(in IssueInput, k *KeyPair, now time.Time, ttl time.Duration) (*contract.RecommendationCertificate, error) {
	if k == nil || len(k.private) != ed25519.PrivateKeySize {
		return nil, core.Errorf(core.CodeInvalidArgument, "issue: no signing key")
	}
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if ttl < time.Millisecond || ttl > MaxTTL {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "ttl", "ttl %v must be within 1ms…%v", ttl, MaxTTL)
	}
	if now.IsZero() {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "now", "issue time is zero")
	}
	now = now.UTC().Truncate(time.Millisecond)

	var p []core.Problem
	add := func(field, format string, args ...any) {
		p = append(p, core.Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
	addErr := func(prefix string, err error) {
		if ps := contract.ProblemsOf(err); ps != nil {
			for _, x := range ps {
				add(prefix+"."+x.Field, "%s", x.Message)
			}
		} else if err != nil {
			add(prefix, "%v", err)
		}
	}
	if strings.TrimSpace(in.CreatedBy) == "" {
		add("createdBy", "the requester is required")
	}
	var sceneHash string
	switch {
	case in.Scene == nil:
		add("scene", "required")
	case in.Scene.Status != contract.SceneFrozen:
		add("scene.status", "the scene must be frozen, not %q", in.Scene.Status)
	default:
		if err := in.Scene.Validate(); err != nil {
			addErr("scene", err)
		} else if h, err := in.Scene.Hash(); err != nil {
			addErr("scene", err)
		} else {
			sceneHash = h
		}
	}
	var trialHash, digest string
	if in.Trial == nil {
		add("trial", "required")
	} else {
		if in.Scene != nil {
			addErr("trial", in.Trial.CheckAgainst(in.Scene))
		} else {
			addErr("trial", in.Trial.Validate())
		}
		for _, r := range in.Trial.FailureReasons() {
			add("trial", "did not pass: %s", r)
		}
		b := in.Trial.BaselineComparison
		if !(b.Improvement > 0) || !(b.BaselineCost > b.CandidateCost) {
			add("trial.baselineComparison.improvement", "the candidate must improve on the baseline (improvement %v, baseline cost %v, candidate cost %v)", b.Improvement, b.BaselineCost, b.CandidateCost)
		}
		var err error
		if trialHash, err = in.Trial.Hash(); err != nil {
			addErr("trial", err)
		}
		if digest, err = in.Trial.ConstraintDigest(); err != nil {
			addErr("trial.constraintResults", err)
		}
	}
	for _, h := range []struct {
		f, v     string
		required bool
	}{{"snapshotHash", in.SnapshotHash, true}, {"modelHash", in.ModelHash, true}, {"objectiveHash", in.ObjectiveHash, true}, {"recipeHash", in.RecipeHash, false}} {
		if h.v == "" && !h.required {
			continue
		}
		if !isHexHash(h.v) {
			add(h.f, "must be a lower-case hex sha256 (64 characters)")
		}
	}
	id := in.RecommendationID
	if id == "" {
		var b [8]byte
		if _, err := rand.Read(b[:]); err != nil {
			return nil, core.Wrap(core.CodeInternal, err, "issue: recommendation id")
		}
		id = "rec-" + hex.EncodeToString(b[:])
	}
	if len(p) > 0 {
		return nil, core.Invalid(CodeCertRefused, p)
	}

	t := in.Trial
	c := &contract.RecommendationCertificate{
		SchemaVersion:              contract.CertificateSchemaVersion,
		CreatedAt:                  now,
		CreatedBy:                  in.CreatedBy,
		RecommendationID:           id,
		TrialID:                    t.TrialID,
		TrialHash:                  trialHash,
		SceneID:                    in.Scene.SceneID,
		SceneVersion:               in.Scene.SceneVersion,
		SceneHash:                  sceneHash,
		SnapshotHash:               in.SnapshotHash,
		ModelHash:                  in.ModelHash,
		ObjectiveHash:              in.ObjectiveHash,
		RecipeHash:                 in.RecipeHash,
		CandidateControlTrajectory: cloneTrajectory(t.CandidateControlTrajectory),
		ConstraintDigest:           digest,
		Uncertainty:                t.Uncertainty,
		OutOfDistribution:          t.OutOfDistribution,
		BaselineComparison:         t.BaselineComparison,
		IssuedAt:                   now,
		ExpiresAt:                  now.Add(ttl),
		KeyID:                      k.ID,
		Status:                     contract.CertIssued,
	}
	h, err := c.BodyHash()
	if err != nil {
		return nil, err
	}
	c.CertificateHash = h
	if c.Signature, err = k.sign(h); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil { // the issuer's own output must be valid
		return nil, core.Wrap(core.CodeInternal, err, "issue: built an invalid certificate")
	}
	return c, nil
}

func cloneTrajectory(tr []map[string]float64) []map[string]float64 {
	out := make([]map[string]float64, len(tr))
	for i, step := range tr {
		m := make(map[string]float64, len(step))
		for k, v := range step {
			m[k] = v
		}
		out[i] = m
	}
	return out
}

func isHexHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')) {
			return false
		}
	}
	return true
}

// Verify checks that c is well formed, that its certificateHash is the
// hash of its signed body, that keyId is the id of pub and that the
// signature is pub's Ed25519 signature of the 32 hash bytes
// (contract.RecommendationCertificate.Verify). Any change to a signed
// field, the hash, the signature or the key id fails with
// AML_CERT_INVALID. Verify does not look at status or the clock (see
// CanWrite, Authorize).
func Verify(c *contract.RecommendationCertificate, pub ed25519.PublicKey) error {
	return c.Verify(pub)
}

// The lifecycle rules are methods of the certificate
// (contract.RecommendationCertificate); the functions below apply them.

// Allowed reports whether the state machine has the transition from → to.
func Allowed(from, to contract.CertStatus) bool { return from.CanMoveTo(to) }

// Expired reports whether c's expiry has passed at now (now ≥ expiresAt).
func Expired(c *contract.RecommendationCertificate, now time.Time) bool { return c.Expired(now) }

// ExpireIfDue marks an ISSUED or APPROVED certificate whose expiry has
// passed EXPIRED (expiredAt = now) and reports whether it did. A sweeper
// calls it; the transitions call it themselves.
func ExpireIfDue(c *contract.RecommendationCertificate, now time.Time) bool {
	return c.ExpireIfDue(now)
}

// Approve moves an ISSUED certificate to APPROVED, recording approvedBy =
// by and approvedAt = now (outside the signed body: approval is a
// lifecycle record, the issuer's signature covers what was certified).
// Four-eyes rule: by may be neither the certificate's requester
// (createdBy) nor requester (the identity asking for the write, when
// given), compared ignoring case and surrounding space — AML_FORBIDDEN.
// An expired certificate is marked EXPIRED and refused with
// AML_CERT_EXPIRED. Callers verify the signature first (Verify).
func Approve(c *contract.RecommendationCertificate, by, requester string, now time.Time) error {
	return c.Approve(by, requester, now)
}

// Revoke moves an ISSUED or APPROVED certificate to REVOKED, recording
// by, now and reason (all required). It does not look at expiry: revoking
// a certificate that has lapsed but was not yet marked EXPIRED records why
// it must not be used.
func Revoke(c *contract.RecommendationCertificate, by, reason string, now time.Time) error {
	return c.Revoke(by, reason, now)
}

// MarkExecuted moves an APPROVED, unexpired certificate to EXECUTED
// (executedAt = now). An expired one is marked EXPIRED and refused with
// AML_CERT_EXPIRED.
func MarkExecuted(c *contract.RecommendationCertificate, now time.Time) error {
	return c.MarkExecuted(now)
}

// CanWrite reports whether c authorises a write at now: only an APPROVED
// certificate before its expiry does. It changes nothing (a guard, not a
// transition): expired → AML_CERT_EXPIRED, any other status →
// AML_CONFLICT. It does not verify the signature; Authorize does both.
func CanWrite(c *contract.RecommendationCertificate, now time.Time) error { return c.CanWrite(now) }

// Authorize is Verify followed by CanWrite: the check a write guard runs.
func Authorize(c *contract.RecommendationCertificate, pub ed25519.PublicKey, now time.Time) error {
	if err := Verify(c, pub); err != nil {
		return err
	}
	return CanWrite(c, now)
}

package steptest

import (
	"crypto/ed25519"
	"math"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/contract"
)

// Signer signs with the deployment key (cert.KeyPair).
type Signer interface {
	SigningKey() (id string, pub ed25519.PublicKey)
	SignDigest(hexHash string) (string, error)
}

// DefaultTTL is how long an issued step test waits for its last move.
const DefaultTTL = 8 * time.Hour

// IssueInput names the certificate a plan becomes.
type IssueInput struct {
	TestID    string
	CreatedBy string
	RecipeID  string
	Now       time.Time
	TTL       time.Duration // 0: DefaultTTL
}

// Issue turns a plan designed on scene s into a signed, ISSUED step-test
// certificate: the plan's moves and hold, its operating point, and per
// variable the bounds [base − amplitude, base + amplitude] every move's
// target lies in. A plan with problems (more actions than the write
// policy allows per run), not of s, or whose last move comes after the
// TTL (it could never be written) is refused AML_INVALID_ARGUMENT.
func Issue(p *Plan, s *contract.SceneContract, in IssueInput, key Signer) (*contract.StepTestCertificate, error) {
	if p == nil || s == nil {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "plan", "a plan and its scene are required")
	}
	if len(p.Problems) > 0 {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "plan", "the plan cannot run: %s", strings.Join(p.Problems, "; "))
	}
	h, err := s.Hash()
	if err != nil {
		return nil, err
	}
	if p.SceneID != s.SceneID || p.SceneVersion != s.SceneVersion || p.SceneHash != h || p.LineID != s.LineID {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "scene", "the plan was designed on scene %s %s (%s), not %s %s (%s)", p.SceneID, p.SceneVersion, p.SceneHash, s.SceneID, s.SceneVersion, h)
	}
	if err := p.check(s); err != nil {
		return nil, err
	}
	ph, err := core.CanonicalHash(p)
	if err != nil {
		return nil, err
	}
	ttl := in.TTL
	if ttl == 0 {
		ttl = DefaultTTL
	}
	if n := len(p.Moves); n > 0 && p.Moves[n-1].AtSec >= ttl.Seconds() {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "ttl", "the plan's last move is %gs after its start, after the test expires (ttl %s): shorten the plan or give a longer ttl", p.Moves[n-1].AtSec, ttl)
	}
	now := in.Now.UTC().Truncate(time.Millisecond)
	kid, _ := key.SigningKey()
	c := &contract.StepTestCertificate{SchemaVersion: contract.StepTestSchemaVersion, TestID: in.TestID, CreatedAt: now, CreatedBy: in.CreatedBy,
		LineID: p.LineID, SceneID: p.SceneID, SceneVersion: p.SceneVersion, SceneHash: p.SceneHash, PlanHash: ph, Signal: p.Signal,
		Base: map[string]float64{}, Bounds: map[string]contract.ChannelBound{}, HoldSec: p.HoldSec, RecipeID: in.RecipeID,
		IssuedAt: now, ExpiresAt: now.Add(ttl), KeyID: kid, Status: contract.CertIssued}
	for _, v := range p.Variables {
		b, a := p.Base[v], p.Amplitude[v]
		c.Base[v] = b
		c.Bounds[v] = contract.ChannelBound{Min: b - a, Max: b + a}
	}
	for _, m := range p.Moves {
		set := map[string]float64{}
		for v, x := range m.Set {
			set[v] = x
			// the plan's own levels lie within base ± amplitude up to rounding
			b := c.Bounds[v]
			b.Min, b.Max = math.Min(b.Min, x), math.Max(b.Max, x)
			c.Bounds[v] = b
		}
		c.Moves = append(c.Moves, contract.StepTestMove{AtSec: m.AtSec, Set: set})
	}
	if c.CertificateHash, err = c.BodyHash(); err != nil {
		return nil, err
	}
	if c.Signature, err = key.SignDigest(c.CertificateHash); err != nil {
		return nil, err
	}
	_, pub := key.SigningKey()
	if err := c.Verify(pub); err != nil {
		return nil, err
	}
	return c, nil
}

// Approve approves an ISSUED step test as by: a person with the approver
// or admin role (AML_FORBIDDEN otherwise), never its proposer, and not
// the name of an agent's API token (roles holds the roles the name
// has; "agent" among them is refused).
func Approve(c *contract.StepTestCertificate, by twinstore.Approver, roles []string, now time.Time) error {
	if c == nil {
		return core.FieldErrorf(core.CodeInvalidArgument, "testId", "no step test")
	}
	if by.Role != twinstore.RoleApprover && by.Role != twinstore.RoleAdmin {
		return core.FieldErrorf(core.CodeForbidden, "approvedBy", "%s has role %q: only a person with the approver or admin role approves a step test", by.Name, by.Role)
	}
	for _, r := range roles {
		if r == "agent" {
			return core.FieldErrorf(core.CodeForbidden, "approvedBy", "%s is the name of an agent's API token: only a person approves a step test", by.Name)
		}
	}
	return c.Approve(by.Name, now.UTC().Truncate(time.Millisecond))
}

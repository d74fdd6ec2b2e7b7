package contract

import (
	"crypto/ed25519"
	"math"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// StepTestSchemaVersion is the step-test certificate schema this package
// writes and the newest it reads.
const StepTestSchemaVersion = 1

// Limits of a step-test certificate.
const (
	// StepTestMaxTTL is the longest a step test may wait for its last
	// move after it was issued.
	StepTestMaxTTL = 24 * time.Hour
	// StepTestMaxMoves bounds its moves (as steptest.MaxMoves).
	StepTestMaxMoves = 1000
	// StepTestSlotTolerance is how late after its slot's start a move may
	// still be written, as a fraction of the hold: a move belongs to the
	// slot [atSec, atSec + tolerance·holdSec) after the test's start.
	StepTestSlotTolerance = 0.5
)

// StepTestMove is one move of a step-test certificate: at AtSec after
// the test's start, set each variable of Set.
type StepTestMove struct {
	AtSec float64            `json:"atSec"`
	Set   map[string]float64 `json:"set"`
}

// StepTestCertificate is a designed step test (package twin/steptest) a
// person approves as a whole: the line, the frozen scene (by hash), the
// operating point, the bounds every move's target lies in, and the moves
// with their time slots. The write guard executes it move by move and
// checks every move against it (value and slot) and against the scene's
// write policy and the channel's bounds. The issuer signs its body
// (every field except StepTestUnsignedFields) with the deployment key.
//
//	ISSUED ──Approve──▶ APPROVED ──Revoke──▶ REVOKED
//	  └──expiry──────────┴──expiry──▶ (expired: no write)
type StepTestCertificate struct {
	SchemaVersion int       `json:"schemaVersion"`
	TestID        string    `json:"testId"`
	CreatedAt     time.Time `json:"createdAt"`
	CreatedBy     string    `json:"createdBy"` // who proposed it; never its approver
	LineID        string    `json:"lineId"`
	SceneID       string    `json:"sceneId"`
	SceneVersion  string    `json:"sceneVersion"`
	SceneHash     string    `json:"sceneHash"`
	// PlanHash is the canonical hash of the plan the moves come from.
	PlanHash string                  `json:"planHash"`
	Signal   string                  `json:"signal"`
	Base     map[string]float64      `json:"base"`
	Bounds   map[string]ChannelBound `json:"bounds"`
	HoldSec  float64                 `json:"holdSec"`
	Moves    []StepTestMove          `json:"moves"`
	// RecipeID and Context describe the run the test is recorded as.
	RecipeID  string    `json:"recipeId,omitempty"`
	IssuedAt  time.Time `json:"issuedAt"`
	ExpiresAt time.Time `json:"expiresAt"`
	KeyID     string    `json:"keyId"`

	// Not signed:
	CertificateHash string     `json:"certificateHash"`
	Signature       string     `json:"signature"`
	Status          CertStatus `json:"status"`
	ApprovedBy      string     `json:"approvedBy,omitempty"`
	ApprovedAt      time.Time  `json:"approvedAt,omitzero"`
	RevokedBy       string     `json:"revokedBy,omitempty"`
	RevokedAt       time.Time  `json:"revokedAt,omitzero"`
	RevokeReason    string     `json:"revokeReason,omitempty"`
}

// StepTestUnsignedFields lists the top-level JSON fields outside a step
// test's signed body.
var StepTestUnsignedFields = []string{
	"certificateHash", "signature", "status", "approvedBy", "approvedAt", "revokedBy", "revokedAt", "revokeReason",
}

// BodyHash is the hex sha256 of the canonical JSON of the certificate
// without StepTestUnsignedFields, times in UTC.
func (c *StepTestCertificate) BodyHash() (string, error) {
	x := *c
	x.CreatedAt, x.IssuedAt, x.ExpiresAt = utc(x.CreatedAt), utc(x.IssuedAt), utc(x.ExpiresAt)
	return hashWithout(&x, StepTestUnsignedFields...)
}

// ParseStepTest decodes and validates a step-test certificate.
func ParseStepTest(data []byte) (*StepTestCertificate, error) {
	var c StepTestCertificate
	if err := decodeStrict(data, &c); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks the certificate's structure: moves in time order at
// least holdSec apart, each target finite and within the bounds of its
// variable, the base within the bounds, expiry after issue and at most
// StepTestMaxTTL later, the approver not the proposer, and a lifecycle
// record consistent with the status.
func (c *StepTestCertificate) Validate() error {
	var p problems
	checkSchemaVersion(&p, c.SchemaVersion, StepTestSchemaVersion)
	checkRef(&p, "testId", c.TestID)
	checkTime(&p, "createdAt", c.CreatedAt, true)
	checkRef(&p, "createdBy", c.CreatedBy)
	checkRef(&p, "lineId", c.LineID)
	checkRef(&p, "sceneId", c.SceneID)
	if _, err := parseSemver(c.SceneVersion); err != nil {
		p.add("sceneVersion", "%v", err)
	}
	checkHash(&p, "sceneHash", c.SceneHash, true)
	checkHash(&p, "planHash", c.PlanHash, true)
	checkOptRef(&p, "signal", c.Signal)
	checkOptRef(&p, "recipeId", c.RecipeID)
	if !finite(c.HoldSec) || c.HoldSec <= 0 {
		p.add("holdSec", "must be positive")
	}
	if len(c.Bounds) == 0 {
		p.add("bounds", "at least one variable is required")
	}
	for _, v := range sortedKeys(c.Bounds) {
		b := c.Bounds[v]
		if !isName(v) {
			p.add("bounds", "%q is not a variable id", truncate(v, 40))
		}
		if !finite(b.Min) || !finite(b.Max) || b.Min > b.Max {
			p.add("bounds."+v, "must be finite with min ≤ max, got [%v, %v]", b.Min, b.Max)
		}
		x, ok := c.Base[v]
		if !ok || !finite(x) || x < b.Min || x > b.Max {
			p.add("base."+v, "the operating point is required within the bounds")
		}
	}
	if len(c.Base) != len(c.Bounds) {
		p.add("base", "one operating point per bounded variable")
	}
	if len(c.Moves) == 0 || len(c.Moves) > StepTestMaxMoves {
		p.add("moves", "1…%d moves are required", StepTestMaxMoves)
	}
	for i, m := range c.Moves {
		f := "moves[" + itoa(i) + "]"
		if !finite(m.AtSec) || m.AtSec < 0 {
			p.add(f+".atSec", "must be ≥ 0")
		}
		if i > 0 && finite(c.HoldSec) && m.AtSec-c.Moves[i-1].AtSec < c.HoldSec-1e-9 {
			p.add(f+".atSec", "less than holdSec after the previous move")
		}
		if len(m.Set) == 0 {
			p.add(f+".set", "a move sets at least one variable")
		}
		for _, v := range sortedKeys(m.Set) {
			b, ok := c.Bounds[v]
			if x := m.Set[v]; !ok || !finite(x) || x < b.Min || x > b.Max {
				p.add(f+".set."+v, "target must be finite within the bounds of a bounded variable")
			}
		}
	}
	checkValidity(&p, c.IssuedAt, c.ExpiresAt, StepTestMaxTTL)
	checkSignedFields(&p, c.KeyID, c.CertificateHash, c.Signature)
	c.approval().check(&p)
	return p.err()
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// Verify checks that c is well formed, that certificateHash is the hash
// of its signed body, that keyId names pub and that the signature is
// pub's. Any change to a signed field fails with AML_CERT_INVALID.
func (c *StepTestCertificate) Verify(pub ed25519.PublicKey) error {
	if c == nil {
		return certErr(core.CodeCertInvalid, "", "no step-test certificate")
	}
	return verifySigned(pub, signedDoc{noun: "step test", sigNoun: "step-test ", validate: c.Validate,
		keyID: c.KeyID, hash: c.CertificateHash, signature: c.Signature, bodyHash: c.BodyHash})
}

// Expired reports whether the step test's expiry has passed at now.
func (c *StepTestCertificate) Expired(now time.Time) bool { return !now.Before(c.ExpiresAt) }

// Approve moves an ISSUED, unexpired step test to APPROVED by by at now.
// The proposer never approves (AML_FORBIDDEN).
func (c *StepTestCertificate) Approve(by string, now time.Time) error {
	return c.approval().approve(by, now)
}

// Revoke moves an ISSUED or APPROVED step test to REVOKED.
func (c *StepTestCertificate) Revoke(by, reason string, now time.Time) error {
	return c.approval().revoke(by, reason, now)
}

// Slot returns the window [from, to) after the test's start in which
// move i may be written.
func (c *StepTestCertificate) Slot(i int) (from, to float64) {
	at := c.Moves[i].AtSec
	return at, at + math.Max(StepTestSlotTolerance*c.HoldSec, 1e-3)
}

// StepTestActionID is the write-history certificate id of move i of
// step test id.
func StepTestActionID(id string, i int) string { return "steptest:" + id + "/" + itoa(i) }

// approval is c's lifecycle record (approval.go).
func (c *StepTestCertificate) approval() approvalRecord {
	return approvalRecord{noun: "step test", aNoun: "a step test", id: c.TestID, createdBy: c.CreatedBy, issuedAt: c.IssuedAt, expiresAt: c.ExpiresAt,
		status: &c.Status, approvedBy: &c.ApprovedBy, approvedAt: &c.ApprovedAt, revokedBy: &c.RevokedBy, revokedAt: &c.RevokedAt, revokeReason: &c.RevokeReason}
}

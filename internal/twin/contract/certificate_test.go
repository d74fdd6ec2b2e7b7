package contract

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

const hx = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func exampleCert() *RecommendationCertificate {
	tr := exampleTrial()
	return &RecommendationCertificate{
		SchemaVersion: CertificateSchemaVersion, CreatedAt: t0, CreatedBy: "alice",
		RecommendationID: "rec-1", TrialID: tr.TrialID, TrialHash: hx,
		SceneID: "injection-hold-control", SceneVersion: "1.0.0", SceneHash: hx,
		SnapshotHash: hx, ModelHash: hx, ObjectiveHash: hx,
		CandidateControlTrajectory: tr.CandidateControlTrajectory, ConstraintDigest: hx,
		Uncertainty: tr.Uncertainty, OutOfDistribution: tr.OutOfDistribution, BaselineComparison: tr.BaselineComparison,
		IssuedAt: t0, ExpiresAt: t0.Add(time.Hour), KeyID: hx[:16],
		CertificateHash: hx, Signature: base64.StdEncoding.EncodeToString(make([]byte, 64)),
		Status: CertIssued,
	}
}

func TestCertStatusOneSpelling(t *testing.T) {
	for _, s := range CertStatuses {
		if strings.ToUpper(string(s)) != string(s) {
			t.Fatalf("%s not upper case", s)
		}
		b, _ := json.Marshal(s)
		var back CertStatus
		mustNil(t, json.Unmarshal(b, &back))
		v, err := s.Value()
		mustNil(t, err)
		if v != string(s) || back != s {
			t.Fatalf("%s: JSON %s, DB %v", s, b, v)
		}
		var sc CertStatus
		mustNil(t, sc.Scan([]byte(string(s))))
		if sc != s {
			t.Fatal(sc)
		}
	}
	for _, bad := range []string{"issued", "Issued", "APPROVED ", "", "PENDING"} {
		var s CertStatus
		if err := json.Unmarshal([]byte(`"`+bad+`"`), &s); err == nil {
			t.Errorf("JSON accepted %q", bad)
		}
		if err := s.Scan(bad); err == nil {
			t.Errorf("Scan accepted %q", bad)
		}
		if _, err := CertStatus(bad).Value(); err == nil {
			t.Errorf("Value accepted %q", bad)
		}
	}
	if !CertExecuted.Final() || !CertExpired.Final() || !CertRevoked.Final() || CertIssued.Final() || CertApproved.Final() {
		t.Fatal("Final")
	}
}

func TestCertificateValidate(t *testing.T) {
	c := exampleCert()
	mustNil(t, c.Validate())
	b, _ := json.Marshal(c)
	c2, err := ParseCertificate(b)
	mustNil(t, err)
	h1, _ := c.BodyHash()
	h2, _ := c2.BodyHash()
	if h1 != h2 {
		t.Fatal("round trip changed the body hash")
	}
	for _, k := range []string{"approvedAt", "revokedAt", "executedAt", "expiredAt"} {
		if strings.Contains(string(b), k) {
			t.Errorf("ISSUED JSON has %s", k)
		}
	}

	cases := []struct {
		name   string
		mutate func(c *RecommendationCertificate)
		fields []string
	}{
		{"expiry before issue", func(c *RecommendationCertificate) { c.ExpiresAt = c.IssuedAt }, []string{"expiresAt"}},
		{"bad hash", func(c *RecommendationCertificate) { c.SnapshotHash = strings.ToUpper(hx) }, []string{"snapshotHash"}},
		{"bad key id", func(c *RecommendationCertificate) { c.KeyID = "xyz" }, []string{"keyId"}},
		{"bad signature", func(c *RecommendationCertificate) { c.Signature = "AAAA" }, []string{"signature"}},
		{"issued with approval", func(c *RecommendationCertificate) { c.ApprovedBy = "bob" }, []string{"approvedBy"}},
		{"approved without approver", func(c *RecommendationCertificate) { c.Status = CertApproved }, []string{"approvedBy", "approvedAt"}},
		{"self approval", func(c *RecommendationCertificate) {
			c.Status, c.ApprovedBy, c.ApprovedAt = CertApproved, " ALICE", t0.Add(time.Minute)
		}, []string{"approvedBy"}},
		{"approved after expiry", func(c *RecommendationCertificate) {
			c.Status, c.ApprovedBy, c.ApprovedAt = CertApproved, "bob", t0.Add(2*time.Hour)
		}, []string{"approvedAt"}},
		{"revoked without reason", func(c *RecommendationCertificate) {
			c.Status, c.RevokedBy, c.RevokedAt = CertRevoked, "bob", t0
		}, []string{"revokeReason"}},
		{"executed record on approved", func(c *RecommendationCertificate) {
			c.Status, c.ApprovedBy, c.ApprovedAt, c.ExecutedAt = CertApproved, "bob", t0, t0
		}, []string{"executedAt"}},
		{"expired too early", func(c *RecommendationCertificate) { c.Status, c.ExpiredAt = CertExpired, t0 }, []string{"expiredAt"}},
		{"lower case status", func(c *RecommendationCertificate) { c.Status = "issued" }, []string{"status"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := exampleCert()
			tc.mutate(c)
			wantProblems(t, c.Validate(), tc.fields...)
		})
	}
}

func TestCertificateSignedBodyExcludesLifecycle(t *testing.T) {
	c := exampleCert()
	body, err := c.SignedBody()
	mustNil(t, err)
	var m map[string]any
	mustNil(t, json.Unmarshal(body, &m))
	for _, k := range CertUnsignedFields {
		if _, ok := m[k]; ok {
			t.Errorf("signed body has %s", k)
		}
	}
	for _, k := range []string{"keyId", "expiresAt", "issuedAt", "candidateExecuted", "sceneHash", "candidateControlTrajectory"} {
		if _, ok := m[k]; !ok {
			t.Errorf("signed body lacks %s", k)
		}
	}
	h1, _ := c.BodyHash()
	c.Status, c.ApprovedBy, c.ApprovedAt = CertApproved, "bob", t0
	c.IssuedAt = c.IssuedAt.In(time.FixedZone("Y", -5*3600))
	if h2, _ := c.BodyHash(); h2 != h1 {
		t.Fatal("lifecycle fields or the time zone changed the body hash")
	}
}

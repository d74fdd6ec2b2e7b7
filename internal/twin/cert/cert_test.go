package cert

import (
	"encoding/base64"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
)

var t0 = time.Date(2026, 3, 1, 8, 0, 0, 123456789, time.UTC)

const (
	hSnap = "1111111111111111111111111111111111111111111111111111111111111111"
	hMod  = "2222222222222222222222222222222222222222222222222222222222222222"
	hObj  = "3333333333333333333333333333333333333333333333333333333333333333"
)

func frozenScene(t testing.TB) *contract.SceneContract {
	s := contract.DefaultInjectionScene()
	h, err := s.Hash()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Freeze("quality-lead", h, t0.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	return s
}

func passedTrial() *contract.VirtualTrial {
	return &contract.VirtualTrial{
		SchemaVersion: contract.TrialSchemaVersion, CreatedAt: t0.Add(-time.Minute), CreatedBy: "twin-runtime",
		TrialID: "trial-1", SnapshotID: "snap-1", ModelID: "hybrid-1", ObjectiveID: "weight-quality",
		CandidateControlTrajectory: []map[string]float64{
			{"hold_pressure": 65, "hold_time": 8, "melt_temperature_setpoint": 247},
			{"hold_pressure": 67, "hold_time": 8.5, "melt_temperature_setpoint": 248},
		},
		Uncertainty:       contract.Uncertainty{MaxStd: 0.1, Coverage: 0.92, EnsembleSize: 5},
		OutOfDistribution: contract.OutOfDistribution{Distance: 0.4, Disagreement: 0.05, Accepted: true},
		ConstraintResults: []contract.ConstraintResult{
			{ID: "weight", Passed: true, Detail: "ok"}, {ID: "flash_rate", Passed: true, Detail: "ok"},
			{ID: "sink_rate", Passed: true, Detail: "ok"}, {ID: "pressure", Passed: true, Detail: "ok"},
			{ID: "temperature", Passed: true, Detail: "ok"},
		},
		BaselineComparison: contract.BaselineComparison{BaselineCost: 1, CandidateCost: 0.6, Improvement: 0.4},
	}
}

func input(t testing.TB) IssueInput {
	return IssueInput{CreatedBy: "alice", Scene: frozenScene(t), Trial: passedTrial(), SnapshotHash: hSnap, ModelHash: hMod, ObjectiveHash: hObj}
}

func issue(t testing.TB, k *KeyPair) *contract.RecommendationCertificate {
	t.Helper()
	c, err := Issue(input(t), k, t0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testKey(t testing.TB) *KeyPair {
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := core.CodeOf(err); got != code {
		t.Fatalf("want %s, got %s (%v)", code, got, err)
	}
}

func TestIssueAndVerify(t *testing.T) {
	k := testKey(t)
	c := issue(t, k)
	if c.Status != contract.CertIssued || c.KeyID != k.ID || c.CandidateExecuted.Bool() {
		t.Fatalf("%+v", c)
	}
	if !c.IssuedAt.Equal(t0.Truncate(time.Millisecond)) || !c.ExpiresAt.Equal(c.IssuedAt.Add(time.Hour)) || !c.CreatedAt.Equal(c.IssuedAt) {
		t.Fatalf("times %v %v %v", c.CreatedAt, c.IssuedAt, c.ExpiresAt)
	}
	if !strings.HasPrefix(c.RecommendationID, "rec-") {
		t.Fatal(c.RecommendationID)
	}
	sh, _ := frozenScene(t).Hash()
	th, _ := passedTrial().Hash()
	dg, _ := passedTrial().ConstraintDigest()
	if c.SceneHash != sh || c.TrialHash != th || c.ConstraintDigest != dg || c.SnapshotHash != hSnap {
		t.Fatal("hashes")
	}
	if err := Verify(c, k.Public); err != nil {
		t.Fatal(err)
	}
	// Survives JSON, loaded in another time zone.
	b, _ := json.Marshal(c)
	c2, err := contract.ParseCertificate(b)
	if err != nil {
		t.Fatal(err)
	}
	loc := time.FixedZone("CST", 8*3600)
	c2.IssuedAt, c2.ExpiresAt, c2.CreatedAt = c2.IssuedAt.In(loc), c2.ExpiresAt.In(loc), c2.CreatedAt.In(loc)
	if err := Verify(c2, k.Public); err != nil {
		t.Fatal(err)
	}
	// The issued trajectory is a copy.
	in := input(t)
	c3, _ := Issue(in, k, t0, time.Hour)
	in.Trial.CandidateControlTrajectory[0]["hold_pressure"] = 70
	if err := Verify(c3, k.Public); err != nil {
		t.Fatal("certificate shares the trial's trajectory")
	}
	// An external verifier with only the PEM and the documented scheme.
	pub, _ := ParsePublicPEM(k.PublicPEM())
	if err := Verify(c, pub); err != nil {
		t.Fatal(err)
	}
}

func TestIssueRefusals(t *testing.T) {
	k := testKey(t)
	cases := []struct {
		name   string
		mutate func(in *IssueInput)
		field  string
	}{
		{"constraint failed", func(in *IssueInput) {
			n := 1
			in.Trial.ConstraintResults[0] = contract.ConstraintResult{ID: "weight", Passed: false, Detail: "34.2 > 34", FirstViolationStep: &n}
		}, "trial"},
		{"ood", func(in *IssueInput) {
			in.Trial.OutOfDistribution.Accepted, in.Trial.OutOfDistribution.RejectCode = false, "OOD"
		}, "trial"},
		{"no improvement", func(in *IssueInput) {
			in.Trial.BaselineComparison = contract.BaselineComparison{BaselineCost: 1, CandidateCost: 1, Improvement: 0}
		}, "trial.baselineComparison.improvement"},
		{"worse", func(in *IssueInput) {
			in.Trial.BaselineComparison = contract.BaselineComparison{BaselineCost: 1, CandidateCost: 1.2, Improvement: -0.2}
		}, "trial.baselineComparison.improvement"},
		{"constraint not evaluated", func(in *IssueInput) { in.Trial.ConstraintResults = in.Trial.ConstraintResults[1:] }, "trial.constraintResults"},
		{"step too big", func(in *IssueInput) { in.Trial.CandidateControlTrajectory[1]["hold_pressure"] = 70 }, "trial.candidateControlTrajectory[1].hold_pressure"},
		{"draft scene", func(in *IssueInput) { in.Scene = contract.DefaultInjectionScene() }, "scene.status"},
		{"no scene", func(in *IssueInput) { in.Scene = nil }, "scene"},
		{"no trial", func(in *IssueInput) { in.Trial = nil }, "trial"},
		{"no requester", func(in *IssueInput) { in.CreatedBy = " " }, "createdBy"},
		{"bad snapshot hash", func(in *IssueInput) { in.SnapshotHash = "abc" }, "snapshotHash"},
		{"no model hash", func(in *IssueInput) { in.ModelHash = "" }, "modelHash"},
		{"bad recipe hash", func(in *IssueInput) { in.RecipeHash = strings.ToUpper(hObj) + "x" }, "recipeHash"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := input(t)
			tc.mutate(&in)
			c, err := Issue(in, k, t0, time.Hour)
			if c != nil {
				t.Fatal("issued")
			}
			wantCode(t, err, CodeCertRefused)
			var ae *core.Error
			if !errorsAs(err, &ae) || ae.Kind() != core.KindUnprocessable {
				t.Fatalf("status %+v", ae)
			}
			found := false
			for _, p := range ae.Problems {
				found = found || p.Field == tc.field
			}
			if !found {
				t.Fatalf("no problem at %s: %v", tc.field, ae.Problems)
			}
		})
	}
	in := input(t)
	for _, ttl := range []time.Duration{-time.Second, MaxTTL + time.Second} {
		if _, err := Issue(in, k, t0, ttl); core.CodeOf(err) != core.CodeInvalidArgument {
			t.Fatalf("ttl %v: %v", ttl, err)
		}
	}
	c, err := Issue(in, k, t0, 0)
	if err != nil || c.ExpiresAt.Sub(c.IssuedAt) != DefaultTTL {
		t.Fatalf("default ttl: %v", err)
	}
	if _, err := Issue(in, &KeyPair{ID: k.ID, Public: k.Public}, t0, time.Hour); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("public-only key: %v", err)
	}
}

// signedMutations changes every signed field to another well-formed value.
var signedMutations = map[string]func(c *contract.RecommendationCertificate){
	"schemaVersion":    func(c *contract.RecommendationCertificate) { c.SchemaVersion = 0 },
	"createdAt":        func(c *contract.RecommendationCertificate) { c.CreatedAt = c.CreatedAt.Add(-time.Millisecond) },
	"createdBy":        func(c *contract.RecommendationCertificate) { c.CreatedBy = "mallory" },
	"recommendationId": func(c *contract.RecommendationCertificate) { c.RecommendationID += "x" },
	"trialId":          func(c *contract.RecommendationCertificate) { c.TrialID = "trial-2" },
	"trialHash":        func(c *contract.RecommendationCertificate) { c.TrialHash = hMod },
	"sceneId":          func(c *contract.RecommendationCertificate) { c.SceneID = "other" },
	"sceneVersion":     func(c *contract.RecommendationCertificate) { c.SceneVersion = "1.0.1" },
	"sceneHash":        func(c *contract.RecommendationCertificate) { c.SceneHash = hSnap },
	"snapshotHash":     func(c *contract.RecommendationCertificate) { c.SnapshotHash = hMod },
	"modelHash":        func(c *contract.RecommendationCertificate) { c.ModelHash = hSnap },
	"objectiveHash":    func(c *contract.RecommendationCertificate) { c.ObjectiveHash = hSnap },
	"recipeHash":       func(c *contract.RecommendationCertificate) { c.RecipeHash = hObj },
	"candidateControlTrajectory": func(c *contract.RecommendationCertificate) {
		c.CandidateControlTrajectory[1]["hold_pressure"] += 0.001
	},
	"constraintDigest":   func(c *contract.RecommendationCertificate) { c.ConstraintDigest = hObj },
	"uncertainty":        func(c *contract.RecommendationCertificate) { c.Uncertainty.Coverage = 0.95 },
	"outOfDistribution":  func(c *contract.RecommendationCertificate) { c.OutOfDistribution.Distance = 0.1 },
	"baselineComparison": func(c *contract.RecommendationCertificate) { c.BaselineComparison.Improvement = 0.5 },
	"candidateExecuted":  nil, // cannot be changed: AlwaysFalse
	"issuedAt":           func(c *contract.RecommendationCertificate) { c.IssuedAt = c.IssuedAt.Add(-time.Second) },
	"expiresAt":          func(c *contract.RecommendationCertificate) { c.ExpiresAt = c.ExpiresAt.Add(24 * time.Hour) },
	"keyId":              func(c *contract.RecommendationCertificate) { c.KeyID = "00000000000000ff" },
}

func TestTamperAnySignedFieldFails(t *testing.T) {
	k := testKey(t)
	base := issue(t, k)
	// The mutation table covers every signed field.
	body, _ := base.SignedBody()
	var m map[string]any
	_ = json.Unmarshal(body, &m)
	m["recipeHash"] = true // optional, empty in base
	for f := range m {
		if _, ok := signedMutations[f]; !ok {
			t.Errorf("no tamper test for signed field %s", f)
		}
	}
	for f, mut := range signedMutations {
		if mut == nil {
			continue
		}
		t.Run(f, func(t *testing.T) {
			c := clone(t, base)
			mut(c)
			wantCode(t, Verify(c, k.Public), CodeCertInvalid)
			// Re-hashing without re-signing fails on the signature.
			if h, err := c.BodyHash(); err == nil && f != "keyId" {
				c.CertificateHash = h
				err := Verify(c, k.Public)
				wantCode(t, err, CodeCertInvalid)
			}
		})
	}
	// Unsigned lifecycle fields may change (by the state machine).
	c := clone(t, base)
	if err := Approve(c, "bob", "", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := Verify(c, k.Public); err != nil {
		t.Fatalf("approval broke the signature: %v", err)
	}
}

func TestTamperSignatureHashAndKey(t *testing.T) {
	k := testKey(t)
	c := issue(t, k)
	sig, _ := base64.StdEncoding.DecodeString(c.Signature)
	for _, i := range []int{0, 31, 63} {
		x := clone(t, c)
		s := append([]byte(nil), sig...)
		s[i] ^= 1
		x.Signature = base64.StdEncoding.EncodeToString(s)
		wantCode(t, Verify(x, k.Public), CodeCertInvalid)
	}
	x := clone(t, c)
	x.Signature = ""
	wantCode(t, Verify(x, k.Public), CodeCertInvalid)
	x = clone(t, c)
	x.CertificateHash = hSnap
	wantCode(t, Verify(x, k.Public), CodeCertInvalid)

	other := testKey(t)
	wantCode(t, Verify(c, other.Public), CodeCertInvalid)
	// Re-signed by another key claiming the original key id: wrong signature.
	x = clone(t, c)
	x.Signature, _ = other.sign(x.CertificateHash)
	wantCode(t, Verify(x, k.Public), CodeCertInvalid)
	// Fully re-signed by another key: verifies only with that key.
	x.KeyID = other.ID
	x.CertificateHash, _ = x.BodyHash()
	x.Signature, _ = other.sign(x.CertificateHash)
	if err := Verify(x, other.Public); err != nil {
		t.Fatal(err)
	}
	wantCode(t, Verify(x, k.Public), CodeCertInvalid)
	wantCode(t, Verify(c, nil), CodeCertInvalid)
	wantCode(t, Verify(nil, k.Public), CodeCertInvalid)
}

func TestApproveRules(t *testing.T) {
	k := testKey(t)
	now := t0.Add(time.Minute)
	for _, who := range []string{"alice", "ALICE", " alice "} {
		c := issue(t, k)
		wantCode(t, Approve(c, who, "", now), core.CodeForbidden)
		if c.Status != contract.CertIssued || c.ApprovedBy != "" {
			t.Fatal("refused approval changed the certificate")
		}
	}
	c := issue(t, k)
	wantCode(t, Approve(c, "Carol", "carol", now), core.CodeForbidden)
	wantCode(t, Approve(c, "", "carol", now), core.CodeInvalidArgument)
	if err := Approve(c, "bob", "carol", now); err != nil {
		t.Fatal(err)
	}
	if c.Status != contract.CertApproved || c.ApprovedBy != "bob" || !c.ApprovedAt.Equal(now) {
		t.Fatalf("%+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	wantCode(t, Approve(c, "dave", "", now), core.CodeConflict)
}

func TestExpiry(t *testing.T) {
	k := testKey(t)
	c := issue(t, k)
	at := c.ExpiresAt
	// CanWrite refuses before approval, allows after, refuses at expiry without changing anything.
	wantCode(t, CanWrite(c, t0), core.CodeConflict)
	if err := Approve(c, "bob", "", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := CanWrite(c, at.Add(-time.Nanosecond)); err != nil {
		t.Fatal(err)
	}
	if err := Authorize(c, k.Public, at.Add(-time.Nanosecond)); err != nil {
		t.Fatal(err)
	}
	err := CanWrite(c, at)
	wantCode(t, err, CodeCertExpired)
	var ae *core.Error
	if !errorsAs(err, &ae) || ae.Kind() != core.KindExpired {
		t.Fatalf("status %+v", ae)
	}
	if c.Status != contract.CertApproved {
		t.Fatal("CanWrite changed the status")
	}
	wantCode(t, Authorize(c, k.Public, at), CodeCertExpired)
	// MarkExecuted after expiry marks EXPIRED.
	wantCode(t, MarkExecuted(c, at), CodeCertExpired)
	if c.Status != contract.CertExpired || !c.ExpiredAt.Equal(at) || c.ExecutedAt != (time.Time{}) {
		t.Fatalf("%+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := Verify(c, k.Public); err != nil {
		t.Fatal(err)
	}
	wantCode(t, CanWrite(c, t0), CodeCertExpired)

	// Approve after expiry marks EXPIRED and refuses.
	c = issue(t, k)
	wantCode(t, Approve(c, "bob", "", c.ExpiresAt.Add(time.Second)), CodeCertExpired)
	if c.Status != contract.CertExpired || c.ApprovedBy != "" {
		t.Fatalf("%+v", c)
	}
	wantCode(t, Approve(c, "bob", "", t0), core.CodeConflict)
	wantCode(t, Revoke(c, "bob", "late", t0), core.CodeConflict)

	// Execute happy path.
	c = issue(t, k)
	_ = Approve(c, "bob", "", t0.Add(time.Minute))
	if err := MarkExecuted(c, t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if c.Status != contract.CertExecuted || c.Validate() != nil {
		t.Fatalf("%+v", c)
	}
	wantCode(t, CanWrite(c, t0.Add(3*time.Minute)), core.CodeConflict)
	wantCode(t, MarkExecuted(c, t0.Add(3*time.Minute)), core.CodeConflict)
}

func TestRevoke(t *testing.T) {
	k := testKey(t)
	for _, approve := range []bool{false, true} {
		c := issue(t, k)
		if approve {
			_ = Approve(c, "bob", "", t0.Add(time.Minute))
		}
		wantCode(t, Revoke(c, "bob", " ", t0.Add(2*time.Minute)), core.CodeInvalidArgument)
		wantCode(t, Revoke(c, "", "x", t0.Add(2*time.Minute)), core.CodeInvalidArgument)
		if err := Revoke(c, "safety", "sensor drift", t0.Add(2*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if c.Status != contract.CertRevoked || c.RevokeReason != "sensor drift" || c.Validate() != nil {
			t.Fatalf("%+v", c)
		}
		wantCode(t, CanWrite(c, t0.Add(3*time.Minute)), core.CodeConflict)
		wantCode(t, Revoke(c, "safety", "again", t0.Add(3*time.Minute)), core.CodeConflict)
	}
}

func TestTransitionTable(t *testing.T) {
	want := map[[2]contract.CertStatus]bool{
		{contract.CertIssued, contract.CertApproved}:   true,
		{contract.CertIssued, contract.CertRevoked}:    true,
		{contract.CertIssued, contract.CertExpired}:    true,
		{contract.CertApproved, contract.CertExecuted}: true,
		{contract.CertApproved, contract.CertRevoked}:  true,
		{contract.CertApproved, contract.CertExpired}:  true,
	}
	for _, from := range contract.CertStatuses {
		for _, to := range contract.CertStatuses {
			if Allowed(from, to) != want[[2]contract.CertStatus{from, to}] {
				t.Errorf("Allowed(%s, %s) = %v", from, to, !want[[2]contract.CertStatus{from, to}])
			}
		}
	}
}

// TestTransitionsProperty applies random operations at random times to
// certificates and checks: every status change is an edge of the table,
// a final status never changes and a refused operation on a final
// certificate changes nothing, every reached state validates and keeps a
// valid signature, and a write is authorised only while APPROVED and
// unexpired.
func TestTransitionsProperty(t *testing.T) {
	k := testKey(t)
	base := issue(t, k)
	rng := rand.New(rand.NewPCG(1, 2))
	people := []string{"alice", "bob", "carol", ""}
	seen := map[contract.CertStatus]bool{}
	for run := 0; run < 400; run++ {
		c := clone(t, base)
		now := c.IssuedAt
		for step := 0; step < 12; step++ {
			now = now.Add(time.Duration(rng.Int64N(int64(25 * time.Minute))))
			before := clone(t, c)
			var err error
			switch op := rng.IntN(6); op {
			case 0:
				err = Approve(c, people[rng.IntN(len(people))], people[rng.IntN(len(people))], now)
			case 1:
				err = Revoke(c, people[rng.IntN(len(people))], []string{"why", ""}[rng.IntN(2)], now)
			case 2:
				err = MarkExecuted(c, now)
			case 3:
				ExpireIfDue(c, now)
			case 4:
				werr := CanWrite(c, now)
				ok := c.Status == contract.CertApproved && now.Before(c.ExpiresAt)
				if (werr == nil) != ok {
					t.Fatalf("CanWrite(%s, expired=%v) = %v", c.Status, !now.Before(c.ExpiresAt), werr)
				}
				if !reflect.DeepEqual(before, c) {
					t.Fatal("CanWrite changed the certificate")
				}
			case 5:
				_ = Authorize(c, k.Public, now)
				if !reflect.DeepEqual(before, c) {
					t.Fatal("Authorize changed the certificate")
				}
			}
			if before.Status.Final() {
				if !reflect.DeepEqual(before, c) {
					t.Fatalf("final %s changed to %s", before.Status, c.Status)
				}
			}
			if c.Status != before.Status && !Allowed(before.Status, c.Status) {
				t.Fatalf("%s → %s is not in the table", before.Status, c.Status)
			}
			if err != nil && c.Status != before.Status && !(c.Status == contract.CertExpired && core.CodeOf(err) == CodeCertExpired) {
				t.Fatalf("failed op (%v) moved %s → %s", err, before.Status, c.Status)
			}
			if verr := c.Validate(); verr != nil {
				t.Fatalf("state %s invalid: %v", c.Status, verr)
			}
			if verr := Verify(c, k.Public); verr != nil {
				t.Fatalf("state %s: %v", c.Status, verr)
			}
			seen[c.Status] = true
		}
	}
	for _, s := range contract.CertStatuses {
		if !seen[s] {
			t.Errorf("status %s never reached", s)
		}
	}
}

func clone(t testing.TB, c *contract.RecommendationCertificate) *contract.RecommendationCertificate {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var x contract.RecommendationCertificate
	if err := json.Unmarshal(b, &x); err != nil {
		t.Fatal(err)
	}
	return &x
}

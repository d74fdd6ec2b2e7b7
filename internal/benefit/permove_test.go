package benefit

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/sim"
	"github.com/aml-project/aml/internal/store/sqlite"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/guard"
)

// The per_move mode's governed path: a move the twin recommends becomes a
// certificate the engineer issues and another person approves with a
// signed approval; only what the write guard lets through reaches the
// line (read back and audited), and a denial is counted by its reason.
func TestPerMoveWritesOnlyWhatTheGuardAllows(t *testing.T) {
	ctx := context.Background()
	// ApprovalDelaySteps below the guard's freshness limit: the certified
	// snapshot is still fresh at execution (no re-validation, which needs
	// a trained twin; the study's TestBenefitWearingLine runs that path).
	g, o, scene, obj := studyGovernor(t, Options{ApprovalDelaySteps: 10}, func(st *sqlite.Store, scene *contract.SceneContract) {
		// the model the certificates name must be registered (its artifact
		// hash is signed into them)
		if err := st.InsertDataset(ctx, core.Dataset{ID: "ds", LineID: scene.LineID, ProductID: "P", RecipeID: "R", Purpose: "mpc_surrogate",
			Path: "datasets/ds", SHA256: strings.Repeat("b", 64), SpecJSON: "{}", CreatedBy: "t"}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.DB().Exec(`INSERT INTO models(id, job_id, dataset_id, line_id, product_id, recipe_id, purpose, trainer_ref, stage, artifact_kind, artifact_path, artifact_hash, created_at, stage_changed_at)
		VALUES ('model-1','job-1','ds',?, 'P','R','mpc_surrogate','hybrid_residual@1','candidate','aml.hybrid/1','models/model-1',?,1,1)`, scene.LineID, strings.Repeat("c", 64)); err != nil {
			t.Fatal(err)
		}
	})
	if err := g.setPolicy(ctx, contract.PolicyHITLGoverned); err != nil {
		t.Fatal(err)
	}
	l := &loop{o: o, name: ModePerMove, scene: g.scene, res: &ModeResult{Name: ModePerMove}, u: nominal(), gov: g, base: studyStartMs}
	certify := func(step int, hp float64) *pendingCert {
		t.Helper()
		at := l.at(step)
		id := fmt.Sprintf("s%d", step)
		w := 32.0
		snap := holdingSnapshot(scene, id, at, controlsMap(l.u),
			&contract.SnapshotWindow{RunID: l.runID(0), BeatMs: 1000, EndMs: at.UnixMilli() - 1000, Steps: 1, Values: map[string][]*float64{sim.NodePartWeight: {&w}}})
		if err := snap.Seal(); err != nil {
			t.Fatal(err)
		}
		step0 := controlsMap(l.u)
		step0[sim.NodeHoldPressure] = hp
		tr := passingTrial(id, at, obj, step0, contract.ConstraintResult{ID: "weight", Passed: true, Detail: "ok"}, contract.ConstraintResult{ID: "flash_rate", Passed: true, Detail: "ok"},
			contract.ConstraintResult{ID: "sink_rate", Passed: true, Detail: "ok"}, contract.ConstraintResult{ID: "pressure", Passed: true, Detail: "ok"}, contract.ConstraintResult{ID: "temperature", Passed: true, Detail: "ok"})
		p, err := g.issue(ctx, l, step, snap, tr)
		if err != nil || p == nil {
			t.Fatalf("issue at step %d: %v (%+v)", step, err, l.res)
		}
		return p
	}
	hp := l.u.HoldPressure
	// 1. issued at step 0, approved 10 s later by the approver: written
	// through the guard and read back
	p := certify(0, hp+1)
	if p.at != 10 {
		t.Fatalf("approval at step %d, want 10", p.at)
	}
	if err := g.execute(ctx, l, p.at, p); err != nil {
		t.Fatal(err)
	}
	if l.u.HoldPressure != hp+1 || l.res.Writes != 1 || l.res.Approvals != 1 || len(l.res.Denials) != 0 {
		t.Fatalf("an approved certificate was not written: hold pressure %g, %+v", l.u.HoldPressure, l.res)
	}
	// 2. a second move of the same control within the minimum node
	// interval: the guard denies it, the line keeps its value
	p = certify(20, hp+2)
	if err := g.execute(ctx, l, p.at, p); err != nil {
		t.Fatal(err)
	}
	if l.u.HoldPressure != hp+1 || l.res.Denials[guard.ReasonNodeInterval] != 1 {
		t.Fatalf("a move within the node interval was written: hold pressure %g, %+v", l.u.HoldPressure, l.res)
	}
	// 3. a move beyond maxDeltaPerAction, certified and approved: denied
	p = certify(200, hp+1+3*scene.WritePolicy.MaxDeltaPerAction[sim.NodeHoldPressure])
	if err := g.execute(ctx, l, p.at, p); err != nil {
		t.Fatal(err)
	}
	if l.u.HoldPressure != hp+1 || l.res.Denials[guard.ReasonDeltaTooLarge] != 1 {
		t.Fatalf("a move beyond maxDeltaPerAction was written: hold pressure %g, %+v", l.u.HoldPressure, l.res)
	}
	// 4. approved after it expired: refused, nothing written
	p = certify(400, hp)
	if err := g.execute(ctx, l, 400+int(16*60), p); err != nil {
		t.Fatal(err)
	}
	if l.u.HoldPressure != hp+1 || l.res.Denials[guard.ReasonCertExpired] != 1 || l.res.Approvals != 3 {
		t.Fatalf("an expired certificate: hold pressure %g, %+v", l.u.HoldPressure, l.res)
	}
	if l.res.Certificates != 4 || l.res.Refused != 3 || l.res.Writes != 1 {
		t.Fatalf("counts: %+v", l.res)
	}
	// the guard's writes are in the audit log: one per control of the
	// certified step
	audited, err := g.auditedWrites(ctx, studyStartMs, math.MaxInt64)
	if err != nil || audited != l.res.Moves || l.res.Moves != 3 {
		t.Fatalf("audited %d (%v), %+v", audited, err, l.res)
	}
}

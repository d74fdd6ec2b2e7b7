package auth_test

// Temporary: compares the statuses of the old path (core.StatusFor and the
// Status each package sets) with the kind mapping, before the old path is
// removed.

import (
	"errors"
	"testing"

	"github.com/aml-project/aml/internal/api"
	"github.com/aml-project/aml/internal/artifact"
	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/envlease"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/physics"
	"github.com/aml-project/aml/internal/registry"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/trainer/exec"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/engine"
	"github.com/aml-project/aml/internal/twin/govern"
	"github.com/aml-project/aml/internal/twin/snapshot"
)

func status(err error) int {
	var ae *core.Error
	if !errors.As(err, &ae) {
		panic("not a core.Error")
	}
	return ae.Status
}

func TestOldStatusesMatchKinds(t *testing.T) {
	old := map[string]int{}
	for _, c := range core.Codes() {
		old[c.Code] = core.StatusFor(c.Code)
	}
	// Codes whose errors carry their status (core.StatusFor says 500).
	old[auth.CodeUnauthenticated] = status(auth.Unauthenticated("x"))
	old[api.CodeRateLimited] = 429 // api.go: Status: http.StatusTooManyRequests
	old[core.CodeQuotaExceeded] = status(api.TooLarge(1))
	old[model.CodeModelInvalid] = status(model.Invalidf("f", "x"))
	old[contract.CodeContractInvalid] = status(contract.Invalidf("f", "x"))
	old[contract.CodeSceneFrozen] = contract.StatusSceneFrozen
	old[cert.CodeCertInvalid] = cert.StatusCertInvalid
	old[cert.CodeCertExpired] = cert.StatusCertExpired
	old[cert.CodeCertRefused] = cert.StatusCertRefused
	old[snapshot.CodeSnapshotQuality] = snapshot.StatusSnapshotQuality
	old[snapshot.CodeBindingMismatch] = snapshot.StatusBindingMismatch
	old[twinstore.CodeKeyMismatch] = status(twinstore.MissingKeyError("k"))
	old[twinstore.CodeSnapshotTampered] = 422  // snapshots.go snapshotTampered
	old[twinstore.CodeTrialTampered] = 422     // trials.go tampered
	old[twinstore.CodeObjectiveTampered] = 422 // trials.go tampered
	old[govern.CodeWriteDenied] = 403          // govern.go deniedErr
	old[govern.CodeWriteFailed] = 502          // govern.go Execute
	old[engine.CodeModelUnsupported] = 422     // twin.go errf
	old[engine.CodeWindowInvalid] = 422
	old[engine.CodeSceneMismatch] = 422
	old[extrun.CodePredictInvalid] = 422  // predict.go predictInvalid
	old[registry.CodeShadowMissing] = 409 // twin.go refusal
	old[registry.CodeTwinGateFailed] = 409
	old[audit.CodeAuditTampered] = 409 // audit.go Verify
	old[physics.CodePhysicsInvalid] = 422
	old[physics.CodePhysicsNonFinite] = 422
	_ = artifact.CodeTampered      // core.StatusFor: 500
	_ = envlease.CodeRebuildFailed // core.StatusFor: 500
	_ = extrun.CodeTrainerStartFailed

	pkg := map[string]string{auth.CodeUnauthenticated: core.CodeUnauthenticated, api.CodeRateLimited: core.CodeRateLimited,
		artifact.CodeTampered: core.CodeArtifactTampered, envlease.CodeRebuildFailed: core.CodeEnvRebuildFailed,
		extrun.CodePredictInvalid: core.CodePredictInvalid, extrun.CodeTrainerStartFailed: core.CodeTrainerStartFailed,
		registry.CodeShadowMissing: core.CodeShadowMissing, registry.CodeTwinGateFailed: core.CodeTwinGateFailed,
		twinstore.CodeKeyMismatch: core.CodeCertKeyMismatch, twinstore.CodeSnapshotTampered: core.CodeSnapshotTampered,
		twinstore.CodeTrialTampered: core.CodeTrialTampered, twinstore.CodeObjectiveTampered: core.CodeObjectiveTampered,
		snapshot.CodeSnapshotQuality: core.CodeSnapshotQuality, snapshot.CodeBindingMismatch: core.CodeBindingMismatch,
		govern.CodeWriteDenied: core.CodeWriteDenied, govern.CodeWriteFailed: core.CodeWriteFailed,
		engine.CodeModelUnsupported: core.CodeTwinModelUnsupported, engine.CodeWindowInvalid: core.CodeTwinWindowInvalid,
		engine.CodeSceneMismatch: core.CodeTwinSceneMismatch}
	for p, c := range pkg {
		if p != c {
			t.Errorf("package code %s differs from core's %s", p, c)
		}
	}
	if len(old) != len(core.Codes()) {
		t.Errorf("old table has %d codes, registry %d", len(old), len(core.Codes()))
	}
	for code, want := range old {
		info, ok := core.Lookup(code)
		if !ok {
			t.Errorf("%s not registered", code)
			continue
		}
		if got := auth.HTTPStatus(info.Kind); got != want {
			t.Errorf("%s: old status %d, kind %s → %d", code, want, info.Kind, got)
		}
	}
}

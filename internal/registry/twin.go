package registry

import (
	"context"
	"slices"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
)

// Refusal codes of a twin model's promotion to production.
const (
	// CodeShadowMissing: no shadow evidence is stored for the model (it
	// has not been compared with what the line did on a run after it was
	// made: aml twin shadow --model ID).
	CodeShadowMissing = core.CodeShadowMissing
	// CodeTwinGateFailed: the model's latest twin gate evaluation did not
	// pass, or there is none.
	CodeTwinGateFailed = core.CodeTwinGateFailed
)

// FormatHybrid is the artifact format of hybrid_residual@1 (the physics +
// residual twin model); spelled here, with the other formats the twin runs,
// so the registry need not import the trainers (engine.TwinFormats is the
// same list, checked by a test).
const FormatHybrid = "aml.hybrid/1"

// TwinFormats are the artifact formats the digital twin runs.
var TwinFormats = []string{FormatHybrid, "aml.statespace/1", "aml.arx/1", "aml.narx/1", "aml.nss/1", "aml.static-response/1", "aml.static-forest/1"}

// IsTwin says whether m is a twin model: flagged as one, a hybrid
// (aml.hybrid/1) model, or a linear or neural model the twin runs
// (aml.statespace/1, aml.arx/1, aml.narx/1, aml.nss/1) made for the twin (purpose
// mpc_surrogate). A static quality model (aml.static-response/1,
// aml.static-forest/1; purpose static_response) runs in the twin but is
// no twin model: shadow evidence (internal/twin/shadow) is measured on
// time windows only, so its promotion is a plain one. Twin models go
// candidate → shadow → production and need a verified dataset lineage,
// shadow evidence and a passing twin gate for production.
func IsTwin(m core.Model) bool {
	return m.Twin || m.ArtifactKind == FormatHybrid || (slices.Contains(TwinFormats, m.ArtifactKind) && m.Purpose == "mpc_surrogate")
}

// CheckLineage refuses a model whose dataset's lineage is not verified
// (AML_LINEAGE_UNVERIFIED): it may not go to production for the twin, drive
// the optimiser or a certificate. The message says how to verify it.
func CheckLineage(m core.Model, use string) error {
	if m.LineageVerified {
		return nil
	}
	return refusal(core.CodeLineageUnverified, "lineage", "model %s was trained on dataset %s, whose lineage is not verified: it may not %s. "+
		"Record the recipe version of its runs (aml recipe put FILE) and their run events with that recipe version (aml runs events FILE), "+
		"rebuild the dataset (aml dataset build) until its lineage verifies, then train on it (docs/lineage.md)", m.ID, m.DatasetID, use)
}

// TwinEvidence is the store side of the twin promotion rule
// (sqlite.Store implements it): the stored shadow rows and the latest
// twin gate evaluation of a model.
type TwinEvidence interface {
	TwinPromotionEvidence(ctx context.Context, modelID string) (contract.TwinPromotionEvidence, error)
}

// checkTwinEvidence requires, for a twin model's promotion to production,
// at least one stored shadow evidence row and a latest twin gate
// evaluation (twin_gate_evals) that passed. Both are computed by the
// platform (shadow.Collect, the twin gate runner), never supplied by the
// caller. A store that cannot report them refuses (fail closed).
func (r *Registry) checkTwinEvidence(ctx context.Context, m core.Model) error {
	te, ok := r.st.(TwinEvidence)
	if !ok {
		return refusal(CodeShadowMissing, "evidence", "twin model %s cannot be promoted: this store keeps no shadow evidence", m.ID)
	}
	ev, err := te.TwinPromotionEvidence(ctx, m.ID)
	if err != nil {
		return err
	}
	if ev.ShadowRuns < 1 {
		return refusal(CodeShadowMissing, "shadow", "twin model %s has no shadow evidence: compare it with runs that ended after it was made first (aml twin shadow --model %s)", m.ID, m.ID)
	}
	if ev.GateEvalID == "" {
		return refusal(CodeTwinGateFailed, "twinGate", "twin model %s has no twin gate evaluation (aml twin gate)", m.ID)
	}
	if !ev.GatePassed {
		return refusal(CodeTwinGateFailed, "twinGate", "twin model %s's latest twin gate evaluation %s did not pass", m.ID, ev.GateEvalID)
	}
	return nil
}

func refusal(code, field, format string, args ...any) error {
	return core.FieldErrorf(code, field, format, args...)
}

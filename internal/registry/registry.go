// Package registry moves models between stages (candidate → shadow →
// production, retired from any) with the checks a production model needs:
// a passing gate report, an artifact whose sha256 still matches the one
// recorded at registration, shadow first for twin models (flagged twin, or
// aml.hybrid/1) plus, for them, stored shadow evidence and a passing twin
// gate evaluation (AML_SHADOW_MISSING, AML_TWIN_GATE_FAILED), and a
// compare-and-set on the current stage so two people promoting at once
// cannot both win (AML_STAGE_RACE). The store makes the production swap
// atomic and its partial unique index keeps one production model per
// (line, product, recipe, purpose, objective).
package registry

import (
	"context"
	"os"
	"path/filepath"

	"github.com/aml-project/aml/internal/artifact"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/model"
)

// Registry applies stage rules over the store.
type Registry struct {
	st      core.Jobs
	dataDir string
	bus     *events.Bus
}

// New returns a registry over st; artifact paths are relative to dataDir.
func New(st core.Jobs, dataDir string, bus *events.Bus) *Registry {
	return &Registry{st: st, dataDir: dataDir, bus: bus}
}

// ArtifactDir is where a model's files are.
func (r *Registry) ArtifactDir(m core.Model) string {
	if filepath.IsAbs(m.ArtifactPath) {
		return m.ArtifactPath
	}
	return filepath.Join(r.dataDir, filepath.FromSlash(m.ArtifactPath))
}

// VerifyArtifact makes the model's artifact present locally (fetched from
// the back-end's shared artifact store on PostgreSQL, chunks verified on
// read) and re-hashes it (before promotion and before serving); any
// difference is AML_MODEL_TAMPERED. Loaders call it before ArtifactDir.
func (r *Registry) VerifyArtifact(ctx context.Context, m core.Model) error {
	if m.ArtifactsPruned {
		return core.FieldErrorf(core.CodeModelTampered, "artifact", "model %s's artifacts were pruned by retention", m.ID)
	}
	if _, err := artifact.Materialise(ctx, r.st, r.dataDir, m.ArtifactPath); err != nil {
		if core.CodeOf(err) == core.CodeNotFound {
			return core.FieldErrorf(core.CodeModelTampered, "artifact", "model %s's artifact is missing from the shared store: %v", m.ID, err)
		}
		return err
	}
	dir := r.ArtifactDir(m)
	if _, err := os.Stat(dir); err != nil {
		return core.FieldErrorf(core.CodeModelTampered, "artifact", "model %s's artifact directory is missing: %v", m.ID, err)
	}
	h, err := model.ArtifactHash(dir)
	if err != nil {
		return core.Wrap(core.CodeModelTampered, err, "hash model %s artifact", m.ID)
	}
	if h != m.ArtifactHash {
		return core.FieldErrorf(core.CodeModelTampered, "artifact", "model %s's artifact hash is %.12s…, registered %.12s…: the files changed after registration", m.ID, h, m.ArtifactHash)
	}
	return nil
}

// Move moves model id to stage `to`. expect, if not empty, is the stage the
// caller believes the model is in (compare-and-set against what they saw).
func (r *Registry) Move(ctx context.Context, id, to, by, reason, expect string) (core.Model, error) {
	m, err := r.st.GetModel(ctx, id)
	if err != nil {
		return m, err
	}
	from := m.Stage
	if expect != "" && expect != from {
		return m, core.FieldErrorf(core.CodeStageRace, "stage", "model %s is %s, not %s as expected", id, from, expect)
	}
	switch to {
	case core.StageProduction:
		if IsTwin(m) { // the data first: no other evidence counts on unverified data
			if err := CheckLineage(m, "go to production for the twin"); err != nil {
				return m, err
			}
		}
		if !m.GatePassed {
			return m, core.FieldErrorf(core.CodeGateFailed, "gates", "model %s did not pass its gate report; it cannot go to production", id)
		}
		if IsTwin(m) && from != core.StageShadow {
			return m, core.FieldErrorf(core.CodeGateFailed, "stage", "twin model %s must run in shadow before production (it is %s)", id, from)
		}
		if err := r.VerifyArtifact(ctx, m); err != nil {
			return m, err
		}
		if IsTwin(m) {
			if err := r.checkTwinEvidence(ctx, m); err != nil {
				return m, err
			}
		}
	case core.StageShadow:
		if err := r.VerifyArtifact(ctx, m); err != nil {
			return m, err
		}
	case core.StageRetired, core.StageCandidate:
	default:
		return m, core.FieldErrorf(core.CodeInvalidArgument, "stage", "unknown stage %q (candidate, shadow, production, retired)", to)
	}
	if err := r.st.MoveModelStage(ctx, id, from, to, by, reason); err != nil {
		return m, err
	}
	r.bus.Publish(events.Event{Kind: events.ModelStage, Line: m.LineID, ID: id, Data: map[string]any{"from": from, "to": to, "by": by}})
	return r.st.GetModel(ctx, id)
}

package engine

import (
	"context"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/registry"
)

// ModelSource is where [LoadFrom] finds a model: the registered row, the
// verified artifact directory and the manifest of the dataset it was
// trained on. [StoreSource] is the source over a back-end's store; a test
// or another host can give its own.
type ModelSource interface {
	// Model returns the registered model id (AML_NOT_FOUND when absent).
	Model(ctx context.Context, id string) (core.Model, error)
	// ArtifactDir makes m's artifact present locally, verifies it against
	// the hash recorded at registration (AML_MODEL_TAMPERED otherwise) and
	// returns the directory holding it.
	ArtifactDir(ctx context.Context, m core.Model) (string, error)
	// Manifest returns the manifest of m's dataset.
	Manifest(ctx context.Context, m core.Model) (*dataset.Manifest, error)
}

// ModelStore is what [StoreSource] reads of a back-end: the model and
// dataset rows (and, through them, the shared artifact store on
// PostgreSQL). Every store.Store is one.
type ModelStore interface {
	core.Jobs
	core.Datasets
}

// StoreSource is the ModelSource of store st, with artifact and dataset
// paths relative to dataDir: the model row (GetModel), the artifact
// verified by the registry (registry.VerifyArtifact, ArtifactDir) and the
// dataset's manifest fetched and read (dataset.FetchManifest).
func StoreSource(st ModelStore, dataDir string) ModelSource {
	return &storeSource{st: st, dataDir: dataDir, reg: registry.New(st, dataDir, nil)}
}

type storeSource struct {
	st      ModelStore
	dataDir string
	reg     *registry.Registry
}

func (s *storeSource) Model(ctx context.Context, id string) (core.Model, error) {
	return s.st.GetModel(ctx, id)
}

func (s *storeSource) ArtifactDir(ctx context.Context, m core.Model) (string, error) {
	if err := s.reg.VerifyArtifact(ctx, m); err != nil {
		return "", err
	}
	return s.reg.ArtifactDir(m), nil
}

func (s *storeSource) Manifest(ctx context.Context, m core.Model) (*dataset.Manifest, error) {
	d, err := s.st.GetDataset(ctx, m.DatasetID)
	if err != nil {
		return nil, err
	}
	return dataset.FetchManifest(ctx, s.st, s.dataDir, d)
}

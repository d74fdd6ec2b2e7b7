package artifact

import (
	"context"
	"path/filepath"
)

// Provider is a back-end's artifact capability; every back-end declares it
// (internal/store.Store requires it). Artifacts returns the store that
// dataset and model files are shared through, materialising under root
// (the local data directory, --data), or nil when the files under root are
// the truth: SQLite, one machine. PostgreSQL returns its database's store
// (Postgres), one per root and process, so that a worker on another
// machine reads datasets and writes models through it.
type Provider interface {
	Artifacts(ctx context.Context, root string) (Store, error)
}

// For is st's shared artifact store (Provider.Artifacts) for code that
// holds the store as one of the core ports (core.Datasets, core.Jobs …),
// which do not include the capability: the dataset builder, the job runner,
// the model registry, retention. A value that does not declare it — a test
// double of a port — has none: its files are local. Code that holds an
// internal/store.Store calls its Artifacts method instead.
func For(ctx context.Context, st any, root string) (Store, error) {
	p, ok := st.(Provider)
	if !ok {
		return nil, nil
	}
	return p.Artifacts(ctx, root)
}

// Materialise makes key's files present under root: fetched (and verified)
// from st's shared store when it has one, else left to the local files.
// It returns the local directory.
func Materialise(ctx context.Context, st any, root, key string) (string, error) {
	local := filepath.Join(root, filepath.FromSlash(key))
	if filepath.IsAbs(key) {
		return key, nil
	}
	arts, err := For(ctx, st, root)
	if err != nil || arts == nil {
		return local, err
	}
	return arts.Fetch(ctx, key, "")
}

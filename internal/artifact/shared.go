package artifact

import (
	"context"
	"path/filepath"
)

// Provider is implemented by stores whose artifacts (dataset files, model
// files) are shared through the database rather than the local data
// directory: postgres.Store. root is the local directory fetched artifacts
// are materialised under (the --data directory).
type Provider interface {
	SharedArtifacts(ctx context.Context, root string) (Store, error)
}

// For returns the shared artifact store of st (any store value), or nil
// when st keeps none (SQLite: the files under root are the truth). Code
// that reads or writes dataset and model files calls it with the store it
// was given, so one code path serves both back-ends.
func For(ctx context.Context, st any, root string) (Store, error) {
	p, ok := st.(Provider)
	if !ok {
		return nil, nil
	}
	return p.SharedArtifacts(ctx, root)
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

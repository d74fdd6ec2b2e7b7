package engine

import "context"

// RunTrial loads model modelID (see [Load]) and runs one virtual trial:
// the one call a CLI or API needs. The twin is not kept; to run several
// trials on one model, Load once and call [Twin.Trial] (the window's state
// is then estimated once per snapshot).
func RunTrial(ctx context.Context, st ModelStore, dataDir, modelID string, in TrialInput) (*TrialResult, error) {
	t, err := Load(ctx, st, dataDir, modelID)
	if err != nil {
		return nil, err
	}
	tr, d, err := t.Trial(ctx, in)
	if err != nil {
		return nil, err
	}
	return &TrialResult{Trial: tr, Detail: d}, nil
}

// RunOptimize loads model modelID and optimises (see [Twin.Optimize]).
func RunOptimize(ctx context.Context, st ModelStore, dataDir, modelID string, in OptimizeInput) (*OptimizeResult, error) {
	t, err := Load(ctx, st, dataDir, modelID)
	if err != nil {
		return nil, err
	}
	return t.Optimize(ctx, in)
}

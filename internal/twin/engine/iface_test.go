package engine

import "github.com/aml-project/aml/internal/twin/snapshot"

// The snapshot package estimates states through a *Twin.
var _ snapshot.StateEstimator = (*Twin)(nil)

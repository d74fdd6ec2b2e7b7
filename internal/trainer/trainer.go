// Package trainer says what a native (in-process) trainer is: the Trainer
// interface the job runner calls and the TrainContext it hands over. It
// is a leaf: the native trainers (internal/ident/trainers) implement it
// and the job system (internal/jobs) runs them without either importing
// the other; the composition root (cmd/aml) lists the trainers it offers
// and passes them to the runner. External trainers, programs run as child
// processes (exec:PATH), are run by subpackage exec (package extrun).
package trainer

import (
	"context"
	"encoding/json"
	"io"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
)

// TrainContext is what a native trainer gets.
type TrainContext struct {
	Job          core.Job
	JobDir       string
	ArtifactsDir string // write the model artifact (model.json ...) here
	Dataset      *dataset.Bundle
	Params       json.RawMessage
	Seed         int64
	// Progress reports a fraction in [0,1] and optionally a stage name; it
	// also feeds the stall watchdog.
	Progress func(frac float64, stage string)
	Log      io.Writer
	// Physics returns a stored physics model (core.PhysicsModel, with its
	// source) by id; nil when the runner's store keeps none. Trainers read
	// physics models through it, never from a path in their params.
	Physics func(ctx context.Context, id string) (core.PhysicsModel, error)
}

// Trainer is a native (in-process) trainer known by reference, such as
// "linear_state_space@1".
type Trainer interface {
	Ref() string
	// HasTrainingStep is false for trainers that only derive a model from
	// the data during provisioning (the seed allows done from provisioning).
	HasTrainingStep() bool
	Train(ctx context.Context, tc *TrainContext) error
}

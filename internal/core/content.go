package core

import (
	"context"
	"time"
)

// PhysicsModel is a stored physics model (.aml source): uploaded content,
// validated and hashed, that trainer parameters name by ID. The server
// never opens a physics file named in a request.
type PhysicsModel struct {
	ID        string    `json:"id"`
	SHA256    string    `json:"sha256"`
	Name      string    `json:"name"`
	FileName  string    `json:"fileName"`
	Size      int64     `json:"size"`
	Source    string    `json:"source,omitempty"`
	CreatedBy string    `json:"createdBy"`
	CreatedAt time.Time `json:"createdAt"`
}

// PhysicsIDPrefix starts a stored physics model's id: "phys-" and the
// first 24 hex digits of the source's sha256.
const PhysicsIDPrefix = "phys-"

// PhysicsModels is the physics-model port.
type PhysicsModels interface {
	// PutPhysics stores m (ID and SHA256 set by the caller) or returns the
	// stored model with the same hash.
	PutPhysics(ctx context.Context, m PhysicsModel) (PhysicsModel, error)
	// GetPhysics returns the model with its source; AML_NOT_FOUND if none.
	GetPhysics(ctx context.Context, id string) (PhysicsModel, error)
	// ListPhysics lists the models without their source, oldest first.
	ListPhysics(ctx context.Context) ([]PhysicsModel, error)
}

// ExtTrainer is an external trainer an admin registered: requests name it
// "ext:NAME"; the program is Command (an absolute path), run with the
// parent variables Env passed through.
type ExtTrainer struct {
	Name         string    `json:"name"`
	Command      string    `json:"command"`
	Env          []string  `json:"env"`
	RegisteredBy string    `json:"registeredBy"`
	RegisteredAt time.Time `json:"registeredAt"`
}

// ExtTrainers is the registered-trainer port.
type ExtTrainers interface {
	// RegisterTrainer creates or replaces the registration of t.Name.
	RegisterTrainer(ctx context.Context, t ExtTrainer) (ExtTrainer, error)
	// GetTrainer returns a registration; AML_NOT_FOUND if none.
	GetTrainer(ctx context.Context, name string) (ExtTrainer, error)
	ListTrainers(ctx context.Context) ([]ExtTrainer, error)
}

package core

import (
	"context"
	"time"
)

// Dataset is a registered, immutable training dataset: files under
// Path (relative to the data directory) whose combined sha256 is SHA256.
// A row exists only for a dataset whose files were completely written.
type Dataset struct {
	ID              string    `json:"id"`
	LineID          string    `json:"lineId"`
	ProductID       string    `json:"productId"`
	RecipeID        string    `json:"recipeId"`
	Purpose         string    `json:"purpose"`
	Path            string    `json:"path"`
	SHA256          string    `json:"sha256"`
	SpecJSON        string    `json:"spec"`
	TrainWindows    int       `json:"trainWindows"`
	ValWindows      int       `json:"valWindows"`
	TestWindows     int       `json:"testWindows"`
	Runs            int       `json:"runs"`
	Bytes           int64     `json:"bytes"`
	LineageVerified bool      `json:"lineageVerified"`
	Note            string    `json:"note,omitempty"`
	CreatedBy       string    `json:"createdBy"`
	CreatedAt       time.Time `json:"createdAt"`
}

// DatasetFilter selects datasets; empty fields match anything.
type DatasetFilter struct {
	Line    string
	Product string
	Recipe  string
}

// DatasetRef records that something (a job, a model) uses a dataset, which
// then may not be deleted.
type DatasetRef struct {
	DatasetID string `json:"datasetId"`
	Kind      string `json:"kind"` // "job", "model", ...
	RefID     string `json:"refId"`
}

// Datasets is the dataset registry port.
type Datasets interface {
	InsertDataset(ctx context.Context, d Dataset) error
	GetDataset(ctx context.Context, id string) (Dataset, error)
	ListDatasets(ctx context.Context, f DatasetFilter) ([]Dataset, error)
	// AddDatasetRef / RemoveDatasetRef maintain references.
	AddDatasetRef(ctx context.Context, r DatasetRef) error
	RemoveDatasetRef(ctx context.Context, r DatasetRef) error
	ListDatasetRefs(ctx context.Context, datasetID string) ([]DatasetRef, error)
	// DeleteDataset removes the row, refusing with AML_IN_USE while any
	// reference exists (checked in the same transaction).
	DeleteDataset(ctx context.Context, id string) error
}

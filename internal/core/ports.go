package core

import "context"

// Meta is the metadata port: lines, products, recipes and their versions,
// nodes, runs and context segments. Every method is one transaction.
// Ensure* methods create the row if absent and leave an existing row alone.
type Meta interface {
	EnsureLine(ctx context.Context, l Line) error
	EnsureProduct(ctx context.Context, p Product) error
	EnsureRecipe(ctx context.Context, r Recipe) error
	ListLines(ctx context.Context) ([]Line, error)

	// PutRecipeVersion stores params as the next version of the recipe (or
	// returns the existing version whose content hash is identical).
	PutRecipeVersion(ctx context.Context, recipeID string, params map[string]any) (RecipeVersion, error)
	GetRecipeVersion(ctx context.Context, recipeID string, version int) (RecipeVersion, error)
	ListRecipeVersions(ctx context.Context, recipeID string) ([]RecipeVersion, error)

	// UpsertNode creates the node or updates its descriptive fields.
	UpsertNode(ctx context.Context, n Node) error
	GetNode(ctx context.Context, id string) (Node, error)
	ListNodes(ctx context.Context, lineID string) ([]Node, error)

	// CreateRun creates a run; AML_CONFLICT if the id exists.
	CreateRun(ctx context.Context, r Run) error
	GetRun(ctx context.Context, id string) (Run, error)
	ListRuns(ctx context.Context, f RunFilter) ([]Run, error)
	// EndRun marks an active run ended at endedMs.
	EndRun(ctx context.Context, id string, endedMs int64) error

	AddContextSegment(ctx context.Context, s ContextSegment) (ContextSegment, error)
	ListContextSegments(ctx context.Context, runID string) ([]ContextSegment, error)
}

// TimeSeries is the sample port. Re-writing the same node and timestamp
// replaces the earlier sample, so re-ingesting a file is idempotent. Writing a
// sample of an unknown node creates the node (kind daq, line from the sample).
type TimeSeries interface {
	// WriteSamples writes one batch atomically.
	WriteSamples(ctx context.Context, samples []Sample) (WriteStats, error)
	// Ingest runs fn in one transaction: everything fn writes through tx is
	// committed together, or nothing is if fn (or the commit) fails.
	Ingest(ctx context.Context, fn func(tx IngestTx) error) error

	// QueryPage returns one page of one node's samples in time order.
	QueryPage(ctx context.Context, q PageQuery) (Page, error)
	// QueryMulti returns samples of several nodes, ordered by node then time.
	QueryMulti(ctx context.Context, q MultiQuery) (MultiResult, error)
	// Latest returns the newest sample of each node that has one in the
	// context (any state).
	Latest(ctx context.Context, nodes []string, f ContextFilter) ([]Sample, error)
	// Buckets aggregates a node's ok samples into fixed-width buckets.
	Buckets(ctx context.Context, q BucketQuery) ([]Bucket, error)
	// CountRunSamples returns the number of samples per node of one run.
	CountRunSamples(ctx context.Context, runID string) (map[string]int64, error)
}

// IngestTx is the write side of one ingest transaction.
type IngestTx interface {
	Write(samples []Sample) (WriteStats, error)
	// EnsureNode creates the node if it does not exist (existing nodes keep
	// their fields) and reports whether it did.
	EnsureNode(n Node) (bool, error)
	// EnsureRun creates the run (and its line, product and recipe) if it
	// does not exist and reports whether it did.
	EnsureRun(r Run) (bool, error)
}

// SeriesStore is the part of a store that holds runs and samples.
type SeriesStore interface {
	Meta
	TimeSeries
}

// Store is a complete storage back-end.
type Store interface {
	Meta
	TimeSeries
	Datasets
	Jobs
	Close() error
}

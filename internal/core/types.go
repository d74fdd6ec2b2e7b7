package core

import "time"

// Line is a production line.
type Line struct {
	ID        string    `json:"id"`
	Name      string    `json:"name,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// Product is what a line makes.
type Product struct {
	ID        string    `json:"id"`
	LineID    string    `json:"lineId"`
	Name      string    `json:"name,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// Recipe is a named set of process parameters for a product; its content
// lives in numbered versions.
type Recipe struct {
	ID        string    `json:"id"`
	LineID    string    `json:"lineId"`
	ProductID string    `json:"productId"`
	Name      string    `json:"name,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// RecipeVersion is one immutable version of a recipe's parameters. Its
// ContentHash is the sha256 of the canonical JSON of Params.
type RecipeVersion struct {
	RecipeID    string         `json:"recipeId"`
	Version     int            `json:"version"`
	Params      map[string]any `json:"params"`
	ContentHash string         `json:"contentHash"`
	CreatedAt   time.Time      `json:"createdAt"`
}

// Node kinds: a measured signal (data acquisition) or a writable setpoint
// (data control write).
const (
	NodeDAQ = "daq"
	NodeDCW = "dcw"
)

// Node is one signal of a line. Min and Max are the physically plausible
// range (nil when unknown); the dataset range filter uses them.
type Node struct {
	ID        string    `json:"id"`
	LineID    string    `json:"lineId"`
	Unit      string    `json:"unit,omitempty"`
	Min       *float64  `json:"min,omitempty"`
	Max       *float64  `json:"max,omitempty"`
	Kind      string    `json:"kind"`
	Meaning   string    `json:"physicalMeaning,omitempty"`
	CreatedAt time.Time `json:"createdAt"`
}

// Run statuses.
const (
	RunActive  = "active"
	RunEnded   = "ended"
	RunAborted = "aborted"
)

// Run is one batch run of a recipe on a line. StartedMs/EndedMs are epoch
// milliseconds; EndedMs is nil while the run is active.
type Run struct {
	ID            string `json:"id"`
	LineID        string `json:"lineId"`
	ProductID     string `json:"productId"`
	RecipeID      string `json:"recipeId"`
	RecipeVersion *int   `json:"recipeVersion,omitempty"`
	StartedMs     int64  `json:"startedAtMs"`
	EndedMs       *int64 `json:"endedAtMs,omitempty"`
	Status        string `json:"status"`
}

// RunFilter selects runs; empty fields match anything.
type RunFilter struct {
	Line    string
	Product string
	Recipe  string
	Status  string
}

// ContextSegment is a person's (or system's) confirmation of which recipe
// version and content a run actually ran with, over [FromMs, ToMs]. Dataset
// lineage is verified against these.
type ContextSegment struct {
	ID            int64     `json:"id"`
	RunID         string    `json:"runId"`
	RecipeID      string    `json:"recipeId"`
	RecipeVersion int       `json:"recipeVersion"`
	ContentHash   string    `json:"contentHash"`
	FromMs        int64     `json:"fromMs"`
	ToMs          *int64    `json:"toMs,omitempty"`
	ConfirmedBy   string    `json:"confirmedBy"`
	ConfirmedAt   time.Time `json:"confirmedAt"`
}

// RunEvent is what a plant's batch record says of one run: the recipe
// version it ran, when, and who confirmed it.
type RunEvent struct {
	RunID, LineID, RecipeID string
	RecipeVersion           int
	StartMs                 int64
	EndMs                   *int64
	ConfirmedBy             string
	ConfirmedAt             time.Time
}

// StateOK is the default sample state. Any other state marks a sample the
// source flagged (bad, uncertain, substituted, ...).
const StateOK = "ok"

// Sample is one value of one node at one instant, with the batch-run context
// it was taken in. Run context fields are empty when no run was active.
// TsUs is the instant in epoch microseconds: sample times are stored to the
// microsecond so that records sampled faster than 1 kHz, or at a period that
// is not a whole number of milliseconds (610.35 Hz), keep every sample.
type Sample struct {
	Node    string  `json:"node"`
	TsUs    int64   `json:"tsUs"`
	Value   float64 `json:"value"`
	State   string  `json:"state"`
	Line    string  `json:"line,omitempty"`
	Product string  `json:"product,omitempty"`
	Recipe  string  `json:"recipe,omitempty"`
	Run     string  `json:"run,omitempty"`
}

// Point is a sample without its context, as returned by per-node queries.
// TsUs is epoch microseconds, as in Sample.
type Point struct {
	TsUs  int64   `json:"tsUs"`
	Value float64 `json:"value"`
	State string  `json:"state"`
}

// ContextFilter restricts a query to samples taken in a context. Empty fields
// match anything.
type ContextFilter struct {
	Line    string `json:"line,omitempty"`
	Product string `json:"product,omitempty"`
	Recipe  string `json:"recipe,omitempty"`
	Run     string `json:"run,omitempty"`
}

// PageQuery asks for one page of one node's samples in time order.
// AfterTs is the cursor (exclusive, epoch µs): pass the previous page's
// NextAfterTs. FromMs/ToMs bound the time range in epoch ms, inclusive of
// every sample within the bounding milliseconds; nil means unbounded.
type PageQuery struct {
	Node    string
	Filter  ContextFilter
	AfterTs *int64
	FromMs  *int64
	ToMs    *int64
	Limit   int
}

// Query limits, the same on every back-end. MaxPageLimit caps one page
// (DefaultPageLimit applies when Limit is 0); a MultiQuery may ask for up
// to MaxMultiLimit samples (MaxPageLimit by default); MaxBuckets caps one
// bucket query's answer.
const (
	DefaultPageLimit = 1000
	MaxPageLimit     = 100_000
	MaxMultiLimit    = 10 * MaxPageLimit
	MaxBuckets       = 100_000
)

// PageLimit is q's effective limit, or AML_INVALID_ARGUMENT (field limit).
func (q PageQuery) PageLimit() (int, error) {
	limit := q.Limit
	if limit == 0 {
		limit = DefaultPageLimit
	}
	if limit < 0 || limit > MaxPageLimit {
		return 0, FieldErrorf(CodeInvalidArgument, "limit", "limit must be 1..%d, got %d", MaxPageLimit, q.Limit)
	}
	return limit, nil
}

// Check validates q and returns its effective limit.
func (q MultiQuery) Check() (int, error) {
	limit := q.Limit
	if limit == 0 {
		limit = MaxPageLimit
	}
	if limit < 0 || limit > MaxMultiLimit {
		return 0, FieldErrorf(CodeInvalidArgument, "limit", "limit must be 1..%d, got %d", MaxMultiLimit, q.Limit)
	}
	if len(q.Nodes) == 0 {
		return 0, FieldErrorf(CodeInvalidArgument, "nodes", "at least one node is required")
	}
	return limit, nil
}

// Check validates q.
func (q BucketQuery) Check() error {
	if q.BucketMs <= 0 {
		return FieldErrorf(CodeInvalidArgument, "bucket", "bucket width must be positive, got %d ms", q.BucketMs)
	}
	return nil
}

// ErrTooManyBuckets is the refusal of a bucket query whose answer would
// exceed MaxBuckets.
func ErrTooManyBuckets() error {
	return FieldErrorf(CodeInvalidArgument, "bucket", "more than %d buckets: use a wider bucket or a shorter range", MaxBuckets)
}

// Page is one page of a node's samples. HasMore is true when samples beyond
// this page exist; the caller continues with AfterTs = NextAfterTs. A page is
// never silently truncated.
type Page struct {
	Node        string  `json:"node"`
	Points      []Point `json:"points"`
	HasMore     bool    `json:"hasMore"`
	NextAfterTs int64   `json:"nextAfterTsUs,omitempty"` // epoch µs
}

// MultiQuery reads samples of several nodes in a context and time range.
// Limit caps the total; when it is hit, Truncated is reported, never hidden.
type MultiQuery struct {
	Nodes  []string
	Filter ContextFilter
	FromMs *int64
	ToMs   *int64
	Limit  int
}

// MultiResult is the answer to a MultiQuery, ordered by node then time.
type MultiResult struct {
	Samples   []Sample `json:"samples"`
	Truncated bool     `json:"truncated"`
}

// BucketQuery aggregates one node's ok samples into fixed buckets.
type BucketQuery struct {
	Node     string
	Filter   ContextFilter
	FromMs   *int64
	ToMs     *int64
	BucketMs int64
}

// Bucket is one aggregate; StartMs is aligned to a multiple of the bucket
// width. Only samples with state ok are aggregated; Bad counts the others.
type Bucket struct {
	StartMs int64   `json:"start"`
	Avg     float64 `json:"avg"`
	Min     float64 `json:"min"`
	Max     float64 `json:"max"`
	Count   int64   `json:"count"`
	Bad     int64   `json:"bad"`
}

// WriteStats reports what a write did.
type WriteStats struct {
	Samples  int `json:"samples"`
	NewNodes int `json:"newNodes"`
}

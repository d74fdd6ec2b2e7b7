package dataset

import (
	"time"

	"github.com/aml-project/aml/internal/core"
)

// FormatVersion is the version of the dataset file format written here
// (docs/dataset-format.md).
const FormatVersion = 1

// Dataset kinds: windows over time (dynamic) or one row per cycle (static).
const (
	KindDynamic = "dynamic"
	KindStatic  = "static"
)

// Manifest is manifest.json. It holds nothing that depends on when or where
// the dataset was built (no ids, no clock times), so the same spec over the
// same samples gives byte-identical files and the same hash on any back-end.
type Manifest struct {
	FormatVersion int    `json:"formatVersion"`
	Kind          string `json:"kind"`
	SpecHash      string `json:"specHash"`
	SpecVersion   int    `json:"specVersion"`
	LineID        string `json:"lineId"`
	ProductID     string `json:"productId"`
	RecipeID      string `json:"recipeId"`
	Purpose       string `json:"purpose"`

	// Nodes in array column order: controls, disturbances, features, targets.
	Nodes    []ManifestNode `json:"nodes"`
	AllNodes []string       `json:"allNodes"`
	Controls []string       `json:"controls"`
	Inputs   []string       `json:"inputs,omitempty"` // static: every non-target node
	Targets  []string       `json:"targets"`

	// BeatMs is the grid step in ms; a step that is not a whole number of
	// ms (a sub-millisecond beat) is BeatUs instead, with BeatMs 0. Use
	// Period.
	BeatMs       int64 `json:"beatMs,omitempty"`
	BeatUs       int64 `json:"beatUs,omitempty"`
	HistorySteps int   `json:"historySteps"`
	HorizonSteps int   `json:"horizonSteps"`
	Stride       int   `json:"stride"`

	Shapes map[string][]int `json:"shapes"`
	Split  ManifestSplit    `json:"split"`
	Runs   []ManifestRun    `json:"runs"`
	Norm   Norm             `json:"norm"`

	Provenance Provenance `json:"provenance"`
	Lineage    Lineage    `json:"lineage"`

	// Artifacts lists every file the dataset hash covers besides
	// manifest.json itself, in hashing order.
	Artifacts []Artifact `json:"artifacts"`
}

// ManifestNode describes one column.
type ManifestNode struct {
	NodeID    string   `json:"nodeId"`
	Role      string   `json:"role"`
	Unit      string   `json:"unit"`
	ModelUnit string   `json:"modelUnit"`
	Scale     float64  `json:"scale"`
	Offset    float64  `json:"offset"`
	DelayMs   int64    `json:"delayMs"`
	Min       *float64 `json:"min,omitempty"` // source-unit range used by the range filter
	Max       *float64 `json:"max,omitempty"`
}

// ManifestSplit tells which windows (or rows) belong to which split. Arrays
// hold the splits concatenated: train, then val, then test.
type ManifestSplit struct {
	Mode   string        `json:"mode"`
	Seed   uint64        `json:"seed"`
	Train  SplitPart     `json:"train"`
	Val    SplitPart     `json:"val"`
	Test   SplitPart     `json:"test"`
	Blocks []BlockWindow `json:"blocks,omitempty"`
}

// SplitPart is one split: its runs, and its [Offset, Offset+Count) range of
// windows (or rows) in the arrays.
type SplitPart struct {
	RunIDs []string `json:"runIds"`
	Offset int      `json:"offset"`
	Count  int      `json:"count"`
}

// BlockWindow is a split block with where its windows are in the arrays
// ([WindowOffset, WindowOffset+WindowCount)). Windows with a missing value
// are skipped, so positions inside the block are not a formula of the
// stride: read each window's times from timestamps.f64.
type BlockWindow struct {
	Block
	WindowOffset int `json:"windowOffset"`
	WindowCount  int `json:"windowCount"`
}

// ManifestRun locates one used run's aligned grid in grid.f32.
type ManifestRun struct {
	RunID      string `json:"runId"`
	Split      string `json:"split,omitempty"` // by_run mode only
	GridOffset int    `json:"gridOffset"`
	GridSteps  int    `json:"gridSteps"`
	StartMs    int64  `json:"startMs"`
	// StartUs is the exact start (epoch µs) when the beat is not a whole
	// number of ms; StartMs is then its floor.
	StartUs int64 `json:"startUs,omitempty"`
}

// Start is the time of the run's grid step 0 in epoch µs.
func (r ManifestRun) Start() int64 {
	if r.StartUs != 0 {
		return r.StartUs
	}
	return r.StartMs * 1000
}

// Period is the grid step.
func (m *Manifest) Period() time.Duration {
	if m.BeatUs != 0 {
		return time.Duration(m.BeatUs) * time.Microsecond
	}
	return time.Duration(m.BeatMs) * time.Millisecond
}

// PeriodSeconds is the grid step in seconds (0 when there is none).
func (m *Manifest) PeriodSeconds() float64 { return m.Period().Seconds() }

// WholeMsBeat is the grid step in ms, or an AML_INVALID_ARGUMENT error for
// a sub-millisecond beat: what needs whole ms (the twin's snapshot
// windows, on a line's clock) refuses such a dataset by name.
func (m *Manifest) WholeMsBeat() (int64, error) {
	if m.BeatMs > 0 {
		return m.BeatMs, nil
	}
	return 0, core.Errorf(core.CodeInvalidArgument, "the dataset's beat is %s, not a whole number of milliseconds: the twin's snapshot windows need a whole-millisecond beat (sub-millisecond beats serve identification and evaluation)", core.FormatPeriod(m.Period()))
}

// Norm holds normalisation statistics computed on train data only.
type Norm struct {
	X    Stats  `json:"x"`
	U    Stats  `json:"u"`
	Y    Stats  `json:"y"`
	Rule string `json:"rule"`
}

// Stats is a per-column mean and standard deviation.
type Stats struct {
	Mean []float64 `json:"mean"`
	Std  []float64 `json:"std"`
}

// Provenance records where the data came from.
type Provenance struct {
	LineID                string   `json:"lineId"`
	ProductID             string   `json:"productId"`
	RecipeID              string   `json:"recipeId"`
	RecipeVersions        []int    `json:"recipeVersions"`
	RecipeContentHashes   []string `json:"recipeContentHashes"`
	RunIDs                []string `json:"runIds"`
	EvidenceSource        string   `json:"evidenceSource"`
	AvailabilityWatermark int64    `json:"availabilityWatermark"`
}

// Lineage is the per-run check of confirmed context segments.
type Lineage struct {
	Verified   []string    `json:"verified"`
	Unknown    []RunReason `json:"unknown"`
	Mismatched []RunReason `json:"mismatched"`
	Excluded   []RunReason `json:"excluded"`
	// LineageVerified: every used run verified (and at least one). Models
	// from a dataset without it may not drive optimisation.
	LineageVerified bool `json:"lineageVerified"`
}

// RunReason names a run and why it is listed.
type RunReason struct {
	RunID  string `json:"runId"`
	Reason string `json:"reason"`
}

// Artifact is one hashed file.
type Artifact struct {
	Name   string `json:"name"`
	DType  string `json:"dtype,omitempty"` // "<f4", "<f8" for arrays
	Shape  []int  `json:"shape,omitempty"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

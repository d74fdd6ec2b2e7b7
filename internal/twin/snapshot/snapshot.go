package snapshot

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/guard"
)

// Error codes of this package (stable: never rename, only add).
const (
	// CodeSnapshotQuality: the data a snapshot would be taken from is not
	// good enough — in strict mode any stale or missing bound variable or
	// future sample; in every mode a control without any usable value (a
	// snapshot must carry every control's current value). Problems name
	// each variable and node. HTTP 422.
	CodeSnapshotQuality = core.CodeSnapshotQuality
	// CodeBindingMismatch: a scene variable does not match the node it is
	// bound to (kind, unit, range, line), or a control or target is not
	// bound to any node. Problems name each variable. HTTP 422.
	CodeBindingMismatch = core.CodeBindingMismatch
)

// Defaults of Options.
const (
	// DefaultMaxAge is the freshness limit of a variable's newest usable
	// sample: the write guard's snapshot age limit, so a snapshot that is
	// fresh here is not already stale for the guard's purpose.
	DefaultMaxAge = guard.DefaultSnapshotMaxAge
	// DefaultFutureTolerance is how far past the capture time a sample
	// may be stamped before it counts as a future sample (clock skew
	// between the acquisition and this host).
	DefaultFutureTolerance = 2 * time.Second
	// DefaultLookback is how far before the capture time samples are read
	// (extended to cover the window, the Hampel neighbourhood and MaxAge).
	DefaultLookback = 10 * time.Minute
	// DefaultWindowSteps and DefaultBeatMs are the window grid without an
	// estimator.
	DefaultWindowSteps = 30
	DefaultBeatMs      = 1000
	// DefaultHampelBeats and DefaultHampelThreshold are the Hampel filter
	// defaults of a dataset spec (half window 5 beats, k = 3).
	DefaultHampelBeats     = dataset.DefaultHampelBeats
	DefaultHampelThreshold = dataset.DefaultHampelThreshold
	// MaxWindowSteps bounds a window (and what an estimator may ask for).
	MaxWindowSteps = 100_000
	// maxFutureRead bounds how many future samples per node are read to
	// count them (the count is then a lower bound, Report says so).
	maxFutureRead = 1000
	// maxPointsPerNode bounds the samples read per node.
	maxPointsPerNode = 2_000_000
)

// Estimator versions.
const (
	// VersionLastValid is the estimator of measured states: the last valid
	// (cleaned) observation.
	VersionLastValid = "last-valid/v1"
	// VersionNoModel is appended when unmeasured states were omitted
	// because no estimator was given.
	VersionNoModel = "no-model"
)

// Variable statuses in a Report.
const (
	StatusOK        = "ok"        // a fresh usable value
	StatusStale     = "stale"     // a usable value older than MaxAge
	StatusMissing   = "missing"   // bound, but no usable value in the lookback
	StatusUnbound   = "unbound"   // no node plays this variable
	StatusEstimated = "estimated" // unmeasured state estimated by the model
)

// How a variable's node was found.
const (
	BoundBySceneNodeID = "scene"  // SceneVariable.NodeID
	BoundByOption      = "option" // Options.Bindings
	BoundBySameID      = "same-id"
)

// StateEstimator estimates unmeasured model states from the recent window.
// The physics/hybrid engine implements it; this package only calls it.
type StateEstimator interface {
	// Window returns the grid the estimator needs: steps rows beatMs apart,
	// for these node ids.
	Window() (steps int, beatMs int64, nodeIDs []string)
	// EstimateState returns the model states (by scene state id) at the
	// window's last row and the estimator version.
	EstimateState(ctx context.Context, w *contract.SnapshotWindow) (map[string]float64, string, error)
}

// Options configure Take. The zero value takes a non-strict snapshot now
// of the newest run of the scene's line.
type Options struct {
	// Now is the capture instant (zero: Clock()).
	Now time.Time
	// Replay says Now is a past instant the snapshot is taken "as of":
	// samples stamped after it are ignored as not yet arrived, instead of
	// counted as future samples (future samples are then not checked).
	Replay bool
	// Clock is the wall clock (nil: time.Now): createdAt, and Now when
	// zero.
	Clock func() time.Time
	// RunID selects the run; empty: the newest active run of the scene's
	// line started at or before Now, else the newest such run of any
	// status, else no run (samples of the line without run filter).
	RunID string
	// Phase is the process phase (one of the scene's phases). The store
	// records no phase; empty: the scene's phase "unknown" if it has one,
	// else its first phase (Report.PhaseSource says "default").
	Phase string
	// Strict refuses (AML_SNAPSHOT_QUALITY) any stale or missing bound
	// variable and any future sample.
	Strict bool
	// MaxAge is the freshness limit (0: DefaultMaxAge).
	MaxAge time.Duration
	// FutureTolerance (0: DefaultFutureTolerance; < 0: none).
	FutureTolerance time.Duration
	// Lookback (0: DefaultLookback).
	Lookback time.Duration
	// Bindings maps a scene variable id to a node id; it overrides
	// SceneVariable.NodeID and the same-id default.
	Bindings map[string]string
	// WindowSteps and BeatMs set the window grid when there is no
	// estimator (0: DefaultWindowSteps, DefaultBeatMs). With an estimator
	// its Window() decides.
	WindowSteps int
	BeatMs      int64
	// HampelWindowMs is the Hampel half window (0: DefaultHampelBeats ×
	// the beat; < 0 disables); HampelThreshold its k (0:
	// DefaultHampelThreshold; < 0 disables).
	HampelWindowMs  int64
	HampelThreshold float64
	// Estimator estimates unmeasured states (nil: they are omitted).
	Estimator StateEstimator
	// SnapshotID overrides the generated id ("snap-<UTC time>-<random>").
	SnapshotID string
	// CreatedBy is the snapshot's author (empty: "aml").
	CreatedBy string
}

// VariableReport is what Take found for one scene variable.
type VariableReport struct {
	VariableID string   `json:"variableId"`
	Role       string   `json:"role"`
	NodeID     string   `json:"nodeId,omitempty"`
	BoundBy    string   `json:"boundBy,omitempty"`
	Status     string   `json:"status"`
	Value      *float64 `json:"value,omitempty"`
	// TsMs is the time stamp of the value used (0 when none).
	TsMs  int64 `json:"ts,omitempty"`
	AgeMs int64 `json:"ageMs,omitempty"`
	// Clean counts what the cleaning dropped among the samples read.
	Clean dataset.CleanCounts `json:"clean"`
	// HeldBack counts newest samples not used as the current value
	// because they disagree with their recent past (one-sided Hampel
	// check; a possible spike not yet confirmed by a later sample).
	HeldBack int `json:"heldBack,omitempty"`
	// Future counts samples stamped after Now + tolerance (never used);
	// FutureAtLeast says the count is a lower bound.
	Future        int  `json:"future,omitempty"`
	FutureAtLeast bool `json:"futureAtLeast,omitempty"`
	// NewestTsMs is the newest sample of the node in the context, any
	// state or age (reported for missing variables, to tell how old the
	// data is).
	NewestTsMs int64  `json:"newestTs,omitempty"`
	Note       string `json:"note,omitempty"`
}

// Report describes how a snapshot was taken and what its data lacked.
type Report struct {
	SnapshotID  string    `json:"snapshotId"`
	RunID       string    `json:"runId,omitempty"`
	Phase       string    `json:"phase"`
	PhaseSource string    `json:"phaseSource"` // option | default
	CapturedAt  time.Time `json:"capturedAt"`
	Replay      bool      `json:"replay,omitempty"`
	Strict      bool      `json:"strict"`
	MaxAgeMs    int64     `json:"maxAgeMs"`

	Variables []VariableReport `json:"variables"`
	// Bound variables, and those with a fresh usable value.
	Bound int `json:"bound"`
	Fresh int `json:"fresh"`
	// VariableCompleteness = Fresh / Bound; WindowCompleteness = filled
	// window cells / all cells. DataQuality.Completeness is the smaller.
	VariableCompleteness float64 `json:"variableCompleteness"`
	WindowCompleteness   float64 `json:"windowCompleteness"`
	WindowCells          int     `json:"windowCells"`
	WindowFilled         int     `json:"windowFilled"`

	StaleNodeIDs   []string `json:"staleNodeIds,omitempty"`
	MissingNodeIDs []string `json:"missingNodeIds,omitempty"`
	FutureNodeIDs  []string `json:"futureNodeIds,omitempty"`
	FutureSamples  int      `json:"futureSamples"`
	// Duplicates and OutOfOrder are what the store lets us see of them:
	// nothing (see Unobservable); they are always 0 and reported so a
	// reader does not mistake "not measured" for "none".
	Duplicates   int      `json:"duplicates"`
	OutOfOrder   int      `json:"outOfOrder"`
	Unobservable []string `json:"unobservable"`

	EstimatorVersion string `json:"estimatorVersion"`
	// Binding is the binding snapshot built from the store's nodes (nil
	// when a bound node lacks the unit or line to build one).
	Binding *contract.NodeBindingSnapshot `json:"binding,omitempty"`
	Notes   []string                      `json:"notes,omitempty"`
}

// Unobservable lists what the store cannot tell, in Report.Unobservable.
var Unobservable = []string{
	"duplicates: the store keeps one value per node and instant; a re-sent sample replaces the earlier one, so duplicates within or across submitted batches are not visible after ingest",
	"out-of-order arrival: the store keeps no ingest sequence or arrival time, only sample time stamps (rows are read in time order)",
}

// Take builds a sealed snapshot of scene from the live store src: see the
// package documentation for the rules. It returns AML_BINDING_MISMATCH
// when a variable does not match its node, AML_SNAPSHOT_QUALITY when the
// data is not good enough (strict mode, or a control without value),
// AML_NOT_FOUND for an unknown run, AML_INVALID_ARGUMENT for bad options.
func Take(ctx context.Context, src core.SeriesStore, scene *contract.SceneContract, opts Options) (*contract.TwinSnapshot, *Report, error) {
	if scene == nil {
		return nil, nil, core.Errorf(core.CodeInvalidArgument, "scene is required")
	}
	if err := scene.Validate(); err != nil {
		return nil, nil, err
	}
	o, err := normalize(opts)
	if err != nil {
		return nil, nil, err
	}
	t := &taker{src: src, scene: scene, o: o, nowMs: o.Now.UnixMilli()}
	return t.take(ctx)
}

// opt is Options with defaults applied.
type opt struct {
	Options
	maxAgeMs, tolMs, lookbackMs int64
	steps                       int
	beatMs                      int64
	windowNodes                 []string
}

func normalize(in Options) (*opt, error) {
	o := &opt{Options: in}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Now.IsZero() {
		if o.Replay {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "at", "a replay needs the instant to replay (Now)")
		}
		o.Now = o.Clock()
	}
	o.Now = o.Now.UTC()
	if o.MaxAge < 0 {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "max-age", "max age must be positive, got %s", o.MaxAge)
	}
	if o.MaxAge == 0 {
		o.MaxAge = DefaultMaxAge
	}
	o.maxAgeMs = o.MaxAge.Milliseconds()
	switch {
	case o.FutureTolerance == 0:
		o.tolMs = DefaultFutureTolerance.Milliseconds()
	case o.FutureTolerance > 0:
		o.tolMs = o.FutureTolerance.Milliseconds()
	}
	if o.Lookback < 0 {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "lookback", "lookback must be positive, got %s", o.Lookback)
	}
	if o.Lookback == 0 {
		o.Lookback = DefaultLookback
	}
	o.lookbackMs = o.Lookback.Milliseconds()
	if o.Estimator != nil {
		steps, beat, nodes := o.Estimator.Window()
		if steps < 1 || steps > MaxWindowSteps || beat <= 0 {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "estimator.window", "the estimator asks for %d steps of %d ms: need 1..%d steps and a positive beat", steps, beat, MaxWindowSteps)
		}
		for _, id := range nodes {
			if strings.TrimSpace(id) == "" {
				return nil, core.FieldErrorf(core.CodeInvalidArgument, "estimator.window", "the estimator asks for an empty node id")
			}
		}
		o.steps, o.beatMs, o.windowNodes = steps, beat, nodes
	} else {
		o.steps, o.beatMs = o.WindowSteps, o.BeatMs
		if o.steps == 0 {
			o.steps = DefaultWindowSteps
		}
		if o.beatMs == 0 {
			o.beatMs = DefaultBeatMs
		}
		if o.steps < 1 || o.steps > MaxWindowSteps {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "window-steps", "window steps must be 1..%d, got %d", MaxWindowSteps, o.steps)
		}
		if o.beatMs <= 0 {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "beat", "the window beat must be positive, got %d ms", o.beatMs)
		}
	}
	if o.HampelWindowMs == 0 {
		o.HampelWindowMs = DefaultHampelBeats * o.beatMs
	}
	if o.HampelThreshold == 0 {
		o.HampelThreshold = DefaultHampelThreshold
	}
	if math.IsNaN(o.HampelThreshold) || math.IsInf(o.HampelThreshold, 0) {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "hampel-threshold", "the Hampel threshold must be finite")
	}
	if o.HampelWindowMs < 0 || o.HampelThreshold < 0 {
		o.HampelWindowMs, o.HampelThreshold = 0, 0
	}
	// The lookback covers the window, its Hampel neighbourhood and MaxAge.
	if need := int64(o.steps)*o.beatMs + 2*o.HampelWindowMs + o.maxAgeMs; o.lookbackMs < need {
		o.lookbackMs = need
	}
	if o.CreatedBy == "" {
		o.CreatedBy = "aml"
	}
	return o, nil
}

// NewSnapshotID returns "snap-<UTC yyyymmddThhmmss.mmmZ>-<8 random hex>".
func NewSnapshotID(at time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go ≥ 1.24)
	return "snap-" + at.UTC().Format("20060102T150405.000Z") + "-" + hex.EncodeToString(b[:])
}

// qualityErr builds an AML_SNAPSHOT_QUALITY error from problems.
func qualityErr(p []core.Problem) error {
	return core.Invalid(CodeSnapshotQuality, p)
}

func bindingErr(p []core.Problem) error {
	return core.Invalid(CodeBindingMismatch, p)
}

func msAge(ms int64) string {
	return (time.Duration(ms) * time.Millisecond).String()
}

func sortedUnique(s []string) []string {
	sort.Strings(s)
	out := s[:0]
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

func fmtMs(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano)
}

// CheckBindings reports every problem Take would refuse a snapshot of
// scene for because of its bindings to the store's nodes (a control or
// target bound to no node, a control on a node that is not writable or has
// no range, units or ranges that disagree, a node of another line), all at
// once and without reading any sample; bindings are Options.Bindings. A
// scene that does not validate is checked as far as its variables go. The
// error is the store's (never a finding).
func CheckBindings(ctx context.Context, src core.SeriesStore, scene *contract.SceneContract, bindings map[string]string) ([]core.Problem, error) {
	if scene == nil {
		return nil, nil
	}
	t := &taker{src: src, scene: scene, o: &opt{Options: Options{Bindings: bindings}}, rep: &Report{}}
	if err := t.resolveVars(ctx); err != nil {
		if p := problemsOf(err); p != nil {
			return p, nil
		}
		return nil, err
	}
	if _, err := t.checkBinding(); err != nil {
		if p := problemsOf(err); p != nil {
			return p, nil
		}
		return nil, err
	}
	return nil, nil
}

func problemsOf(err error) []core.Problem {
	var ae *core.Error
	if errors.As(err, &ae) && (ae.Code == core.CodeBindingMismatch || ae.Code == core.CodeInvalidArgument || ae.Code == core.CodeContractInvalid) {
		if len(ae.Problems) > 0 {
			return ae.Problems
		}
		return []core.Problem{{Field: ae.Field, Message: ae.Message}}
	}
	return nil
}

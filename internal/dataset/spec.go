package dataset

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aml-project/aml/internal/core"
)

// SpecVersion is the version of the dataset spec format parsed here.
const SpecVersion = 1

// Purposes of a dataset.
const (
	// PurposeMPCSurrogate: windows of H history and F future steps for a
	// dynamic surrogate model of the line; needs at least one control.
	PurposeMPCSurrogate = "mpc_surrogate"
	// PurposeQualityPredict: windows like mpc_surrogate, controls optional.
	PurposeQualityPredict = "quality_predict"
	// PurposeStaticResponse: one row per grid step (no window), split by row.
	PurposeStaticResponse = "static_response"
)

// Node roles in a spec.
const (
	RoleControl     = "control"
	RoleDisturbance = "disturbance"
	RoleFeature     = "feature"
	RoleTarget      = "target"
)

// Split modes.
const (
	SplitModeByRun      = "by_run"      // whole runs go to one split (default)
	SplitModeTimeBlocks = "time_blocks" // each run is cut into contiguous blocks
	SplitModeByRow      = "by_row"      // static_response only: rows are split
	SplitModeExplicit   = "explicit"    // runs are assigned by name (trainRunIds/valRunIds/testRunIds)
)

// Limits and defaults of a spec.
const (
	MaxSpecBytes    = 1 << 20
	MaxIDBytes      = 256
	MaxRuns         = 200
	MinNodes        = 2
	MaxNodes        = 64
	MaxBeatMs       = 3_600_000 // not for static_response
	MaxHistorySteps = 2048
	MaxHorizonSteps = 512
	MaxStride       = 4096
	// MaxWindowValues bounds (historySteps+horizonSteps)·len(nodes).
	MaxWindowValues    = 1 << 20
	MaxDelayMs         = 3_600_000
	MaxHampelWindowMs  = 3_600_000
	MaxHampelThreshold = 100
	MaxInterpLimitMs   = 86_400_000
	MaxSplitRatio      = 0.8
	MaxSplitRatioSum   = 0.9
	MinBlocks          = 3
	MaxBlocks          = 1000
	MaxNoteChars       = 2000

	DefaultStride          = 1
	DefaultHampelBeats     = 5 // default Hampel half window: 5·beatMs
	DefaultHampelThreshold = 3
	DefaultInterpBeats     = 3 // default maxInterpMs: 3·beatMs
	DefaultMaxDropRatio    = 0.3
	DefaultBlocks          = 10
)

// maxSpecProblems caps the problems one ParseSpec/Validate reports.
const maxSpecProblems = 100

// Spec is the JSON file a user writes to build a training dataset from
// production-line time series. [ParseSpec] reads it strictly; after
// [Spec.Normalize] every default is explicit, so the canonical JSON of a
// normalized spec is the identity of the dataset.
type Spec struct {
	LineID    string `json:"lineId"`
	ProductID string `json:"productId"`
	RecipeID  string `json:"recipeId"`
	// RunIDs selects runs (at most MaxRuns, unique). Empty means every
	// ended run of the recipe, resolved by the builder.
	RunIDs []string `json:"runIds,omitempty"`
	// Nodes lists MinNodes..MaxNodes nodes with unique IDs, at least one
	// of them a target.
	Nodes []NodeSpec `json:"nodes"`
	// FromMs/ToMs optionally bound the time range; if both are set,
	// FromMs < ToMs.
	FromMs *int64 `json:"fromMs,omitempty"`
	ToMs   *int64 `json:"toMs,omitempty"`
	// BeatMs is the grid step, 1..MaxBeatMs ms (static_response: any ≥ 1).
	// Beat gives it as a duration instead, down to 1 µs ("1.638ms",
	// "1638us", "100ms", "2min"); exactly one of the two is set. Normalize
	// turns a whole-millisecond Beat into BeatMs, so both spell one spec
	// with one hash; old specs with beatMs keep theirs.
	BeatMs int64  `json:"beatMs,omitempty"`
	Beat   string `json:"beat,omitempty"`
	// HistorySteps H is 1..MaxHistorySteps, HorizonSteps F 1..MaxHorizonSteps;
	// both are 0 for static_response.
	HistorySteps int `json:"historySteps"`
	HorizonSteps int `json:"horizonSteps"`
	// Stride between window starts in grid steps, 1..MaxStride (default 1).
	Stride   int      `json:"stride,omitempty"`
	Cleaning Cleaning `json:"cleaning,omitempty"`
	Split    Split    `json:"split"`
	// Purpose is mpc_surrogate, quality_predict or static_response.
	Purpose string `json:"purpose"`
	// Note is free text, at most MaxNoteChars characters.
	Note string `json:"note,omitempty"`
}

// NodeSpec is one node of a spec and its role.
type NodeSpec struct {
	NodeID string        `json:"nodeId"`
	Role   string        `json:"role"` // control | disturbance | feature | target
	Unit   *UnitContract `json:"unitContract,omitempty"`
}

// UnitContract converts a node's source units to model units:
// model = value·Scale + Offset, and shifts time by DelayMs: the node's
// samples are moved earlier by DelayMs (ts' = ts − DelayMs) to undo a
// measurement delay.
//
// It fails closed: Scale and Offset must be present, finite, and Scale ≠ 0 —
// AML never assumes scale 1 or offset 0. Unit is required; ModelUnit
// defaults to Unit; DelayMs is 0..MaxDelayMs.
type UnitContract struct {
	Unit      string   `json:"unit"`
	ModelUnit string   `json:"modelUnit,omitempty"`
	Scale     *float64 `json:"scale"`
	Offset    *float64 `json:"offset"`
	DelayMs   int64    `json:"delayMs,omitempty"`
}

// Cleaning configures the cleaning steps; nil fields take their defaults.
type Cleaning struct {
	// StateFilter drops samples whose state is not ok (default true).
	StateFilter *bool `json:"stateFilter,omitempty"`
	// Range drops samples outside the node's min/max (default true).
	Range *bool `json:"range,omitempty"`
	// Hampel outlier filter; default {WindowMs: 5·beatMs (at most
	// MaxHampelWindowMs), Threshold: 3}. Threshold 0 disables it.
	Hampel *Hampel `json:"hampel,omitempty"`
	// MaxInterpMs is the longest gap bridged by interpolation, 0..86_400_000
	// (default 3·beatMs, at most MaxInterpLimitMs).
	MaxInterpMs *int64 `json:"maxInterpMs,omitempty"`
	// MaxDropRatio is the largest share of a run's grid that may be lost
	// before the run is excluded, 0..1 (default 0.3).
	MaxDropRatio *float64 `json:"maxDropRatio,omitempty"`
}

// Hampel is a Hampel outlier filter: a sample further than Threshold scaled
// MADs from the median of the samples within ±WindowMs is an outlier.
type Hampel struct {
	WindowMs  int64   `json:"windowMs"`  // half window, > 0 when Threshold > 0, ≤ MaxHampelWindowMs
	Threshold float64 `json:"threshold"` // 0 (off) .. MaxHampelThreshold
}

// Split configures the train/val/test split (see [SplitRuns],
// [SplitTimeBlocks], [SplitRows]).
type Split struct {
	// ValRatio and TestRatio are each 0..MaxSplitRatio, their sum at most
	// MaxSplitRatioSum.
	ValRatio  float64 `json:"valRatio"`
	TestRatio float64 `json:"testRatio"`
	Seed      uint64  `json:"seed"`
	// Mode is by_run (default) or time_blocks; static_response always
	// splits by row (mode empty or by_row, normalized to by_row).
	Mode string `json:"mode,omitempty"`
	// Blocks is, for time_blocks only, the number of contiguous blocks per
	// run, MinBlocks..MaxBlocks (default 10).
	Blocks int `json:"blocks,omitempty"`
	// TrainRunIDs, ValRunIDs and TestRunIDs name the split of every run for
	// mode explicit (a benchmark's estimation and validation records); the
	// ratios must then be 0, and runIds defaults to their union.
	TrainRunIDs []string `json:"trainRunIds,omitempty"`
	ValRunIDs   []string `json:"valRunIds,omitempty"`
	TestRunIDs  []string `json:"testRunIds,omitempty"`
}

// ParseSpec reads a spec strictly: one JSON object, no unknown or
// duplicate keys (names match exactly, not case-insensitively), every value
// of the right JSON type. Syntax and type errors are AML_SPEC_INVALID with
// Field set to the JSON path ("nodes[2].role") and the line, column and
// byte offset in the message. The spec is then normalized and validated
// (see [Spec.Validate]).
func ParseSpec(data []byte) (*Spec, error) {
	if len(data) > MaxSpecBytes {
		return nil, core.Invalid(core.CodeSpecInvalid, []core.Problem{{Field: "$",
			Message: fmt.Sprintf("spec is %d bytes, at most %d allowed", len(data), MaxSpecBytes)}})
	}
	if probs := checkSpecShape(data); len(probs) > 0 {
		return nil, core.Invalid(core.CodeSpecInvalid, probs)
	}
	var s Spec
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		// The shape check accepts only what Decode accepts; this is a
		// safety net.
		return nil, core.Invalid(core.CodeSpecInvalid, []core.Problem{{Field: "$", Message: "invalid spec JSON: " + err.Error()}})
	}
	s.Normalize()
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}

// Normalize fills every default (idempotent): stride 1; cleaning
// stateFilter and range true, hampel {5·beatMs, 3}, maxInterpMs 3·beatMs
// (both only when beatMs ≥ 1, capped at their maxima), maxDropRatio 0.3;
// split mode by_run (static_response: by_row), blocks 10 for time_blocks;
// unit contract modelUnit = unit; an empty runIds list becomes nil.
func (s *Spec) Normalize() {
	if len(s.RunIDs) == 0 {
		s.RunIDs = nil
	}
	if s.Stride == 0 {
		s.Stride = DefaultStride
	}
	for i := range s.Nodes {
		if u := s.Nodes[i].Unit; u != nil && u.ModelUnit == "" {
			u.ModelUnit = u.Unit
		}
	}
	if s.Beat != "" && s.BeatMs == 0 {
		if d, err := core.ParsePeriod(s.Beat); err == nil && d%time.Millisecond == 0 && (d <= MaxBeatMs*time.Millisecond || s.Purpose == PurposeStaticResponse) {
			s.Beat, s.BeatMs = "", d.Milliseconds()
		}
	}
	c := &s.Cleaning
	if c.StateFilter == nil {
		c.StateFilter = specPtr(true)
	}
	if c.Range == nil {
		c.Range = specPtr(true)
	}
	if s.BeatMs >= 1 {
		if c.Hampel == nil {
			c.Hampel = &Hampel{WindowMs: specBeatsCapped(s.BeatMs, DefaultHampelBeats, MaxHampelWindowMs), Threshold: DefaultHampelThreshold}
		}
		if c.MaxInterpMs == nil {
			c.MaxInterpMs = specPtr(specBeatsCapped(s.BeatMs, DefaultInterpBeats, MaxInterpLimitMs))
		}
	} else if us := s.BeatUs(); us >= 1 && s.BeatMs == 0 {
		// A sub-millisecond beat (below 1 h): the same numbers of beats,
		// rounded up to whole ms.
		if c.Hampel == nil {
			c.Hampel = &Hampel{WindowMs: (DefaultHampelBeats*us + 999) / 1000, Threshold: DefaultHampelThreshold}
		}
		if c.MaxInterpMs == nil {
			c.MaxInterpMs = specPtr((DefaultInterpBeats*us + 999) / 1000)
		}
	}
	if c.MaxDropRatio == nil {
		c.MaxDropRatio = specPtr(DefaultMaxDropRatio)
	}
	if s.Split.Mode == "" {
		if s.Purpose == PurposeStaticResponse {
			s.Split.Mode = SplitModeByRow
		} else {
			s.Split.Mode = SplitModeByRun
		}
	}
	if s.Split.Mode == SplitModeTimeBlocks && s.Split.Blocks == 0 {
		s.Split.Blocks = DefaultBlocks
	}
}

// BeatUs is the grid step in µs (0 when neither beat nor beatMs is valid).
func (s *Spec) BeatUs() int64 {
	if s.Beat != "" {
		d, err := core.ParsePeriod(s.Beat)
		if err != nil {
			return 0
		}
		return d.Microseconds()
	}
	if s.BeatMs < 1 || s.BeatMs > math.MaxInt64/1000 {
		return 0
	}
	return s.BeatMs * 1000
}

// specBeatsCapped is min(beat·n, max) without overflow.
func specBeatsCapped(beat, n, max int64) int64 {
	if beat > max/n {
		return max
	}
	return beat * n
}

func specPtr[T any](v T) *T { return &v }

func specClonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// clone returns a deep copy of s.
func (s *Spec) clone() *Spec {
	c := *s
	c.RunIDs = slices.Clone(s.RunIDs)
	c.Nodes = slices.Clone(s.Nodes)
	for i := range c.Nodes {
		if u := c.Nodes[i].Unit; u != nil {
			uc := *u
			uc.Scale = specClonePtr(u.Scale)
			uc.Offset = specClonePtr(u.Offset)
			c.Nodes[i].Unit = &uc
		}
	}
	c.FromMs = specClonePtr(s.FromMs)
	c.ToMs = specClonePtr(s.ToMs)
	c.Cleaning.StateFilter = specClonePtr(s.Cleaning.StateFilter)
	c.Cleaning.Range = specClonePtr(s.Cleaning.Range)
	c.Cleaning.Hampel = specClonePtr(s.Cleaning.Hampel)
	c.Cleaning.MaxInterpMs = specClonePtr(s.Cleaning.MaxInterpMs)
	c.Cleaning.MaxDropRatio = specClonePtr(s.Cleaning.MaxDropRatio)
	return &c
}

// NodesByRole returns the node IDs of each role, in spec order within each
// role. Nodes of an unknown role are in none of the lists.
func (s *Spec) NodesByRole() (controls, disturbances, features, targets []string) {
	for _, n := range s.Nodes {
		switch n.Role {
		case RoleControl:
			controls = append(controls, n.NodeID)
		case RoleDisturbance:
			disturbances = append(disturbances, n.NodeID)
		case RoleFeature:
			features = append(features, n.NodeID)
		case RoleTarget:
			targets = append(targets, n.NodeID)
		}
	}
	return
}

// OrderedNodes returns the nodes in the manifest's column order: controls,
// then disturbances, then features, then targets, spec order within each
// role. Nodes of an unknown role are left out.
func (s *Spec) OrderedNodes() []NodeSpec {
	out := make([]NodeSpec, 0, len(s.Nodes))
	for _, role := range [...]string{RoleControl, RoleDisturbance, RoleFeature, RoleTarget} {
		for _, n := range s.Nodes {
			if n.Role == role {
				out = append(out, n)
			}
		}
	}
	return out
}

// specValidator collects problems; nonUnit records whether any problem is
// not a unit-contract problem.
type specValidator struct {
	problems []core.Problem
	total    int
	nonUnit  bool
}

func (v *specValidator) add(field, format string, args ...any) {
	v.nonUnit = true
	v.push(field, format, args...)
}

func (v *specValidator) addUnit(field, format string, args ...any) {
	v.push(field, format, args...)
}

func (v *specValidator) push(field, format string, args ...any) {
	v.total++
	if len(v.problems) < maxSpecProblems {
		v.problems = append(v.problems, core.Problem{Field: field, Message: fmt.Sprintf(format, args...)})
	}
}

func (v *specValidator) err() error {
	if v.total == 0 {
		return nil
	}
	probs := v.problems
	if v.total > len(probs) {
		probs = append(probs, core.Problem{Field: "$", Message: fmt.Sprintf("%d more problem(s) not shown", v.total-len(probs))})
	}
	code := core.CodeSpecInvalid
	if !v.nonUnit {
		code = core.CodeUnitContractInvalid
	}
	return core.Invalid(code, probs)
}

// Validate reports every problem of the spec at once, as an *core.Error
// whose Problems name each field by its JSON path ("nodes[3].unitContract.
// scale", "split.valRatio"). The code is UNIT_CONTRACT_INVALID when every
// problem is a unit-contract problem, else AML_SPEC_INVALID. The spec is
// checked as [Spec.Normalize] would complete it, without changing s; call
// Normalize before using a spec built in Go.
func (s *Spec) Validate() error {
	c := s.clone()
	c.Normalize()
	var v specValidator
	c.validate(&v)
	return v.err()
}

var (
	specPurposes = []string{PurposeMPCSurrogate, PurposeQualityPredict, PurposeStaticResponse}
	specRoles    = []string{RoleControl, RoleDisturbance, RoleFeature, RoleTarget}
)

func (s *Spec) validate(v *specValidator) {
	static := s.Purpose == PurposeStaticResponse
	specCheckID(v.add, "lineId", s.LineID)
	specCheckID(v.add, "productId", s.ProductID)
	specCheckID(v.add, "recipeId", s.RecipeID)

	if len(s.RunIDs) > MaxRuns {
		v.add("runIds", "at most %d run IDs allowed, got %d; leave runIds empty to use every ended run of the recipe", MaxRuns, len(s.RunIDs))
	}
	seenRun := make(map[string]int, len(s.RunIDs))
	for i, id := range s.RunIDs {
		f := fmt.Sprintf("runIds[%d]", i)
		specCheckID(v.add, f, id)
		if j, dup := seenRun[id]; dup {
			v.add(f, "duplicate run ID %q (also runIds[%d])", id, j)
		} else {
			seenRun[id] = i
		}
	}

	// Nodes.
	if len(s.Nodes) < MinNodes || len(s.Nodes) > MaxNodes {
		v.add("nodes", "need %d..%d nodes, got %d", MinNodes, MaxNodes, len(s.Nodes))
	}
	seenNode := make(map[string]int, len(s.Nodes))
	roles := map[string]int{}
	for i, n := range s.Nodes {
		p := fmt.Sprintf("nodes[%d]", i)
		specCheckID(v.add, p+".nodeId", n.NodeID)
		if j, dup := seenNode[n.NodeID]; dup && n.NodeID != "" {
			v.add(p+".nodeId", "duplicate node ID %q (also nodes[%d])", n.NodeID, j)
		} else if !dup {
			seenNode[n.NodeID] = i
		}
		switch {
		case n.Role == "":
			v.add(p+".role", "required; one of %s", strings.Join(specRoles, ", "))
		case !slices.Contains(specRoles, n.Role):
			v.add(p+".role", "unknown role %q; one of %s", n.Role, strings.Join(specRoles, ", "))
		default:
			roles[n.Role]++
		}
		if n.Unit != nil {
			n.Unit.validate(v, p+".unitContract")
		}
	}
	if len(s.Nodes) > 0 && roles[RoleTarget] == 0 {
		v.add("nodes", "need at least one node with role target")
	}
	if s.Purpose == PurposeMPCSurrogate && len(s.Nodes) > 0 && roles[RoleControl] == 0 {
		v.add("nodes", "purpose mpc_surrogate needs at least one node with role control")
	}
	if static && len(s.Nodes) > 0 && roles[RoleControl]+roles[RoleDisturbance]+roles[RoleFeature] == 0 {
		v.add("nodes", "purpose static_response needs at least one input node (role control, disturbance or feature)")
	}

	if s.FromMs != nil && s.ToMs != nil && *s.FromMs >= *s.ToMs {
		v.add("toMs", "must be after fromMs (%d), got %d", *s.FromMs, *s.ToMs)
	}

	// Grid and windows.
	switch {
	case s.Beat != "" && s.BeatMs != 0:
		v.add("beat", "give the grid step once: beat %q or beatMs %d, not both", s.Beat, s.BeatMs)
	case s.Beat != "":
		if d, err := core.ParsePeriod(s.Beat); err != nil {
			v.add("beat", "%s", core.MessageOf(err))
		} else if !static && d > MaxBeatMs*time.Millisecond {
			v.add("beat", "must be at most 1h, got %s", s.Beat)
		}
	case s.BeatMs < 1:
		v.add("beatMs", "must be at least 1 ms, got %d (a sub-millisecond grid is given as beat, e.g. \"1638us\")", s.BeatMs)
	case !static && s.BeatMs > MaxBeatMs:
		v.add("beatMs", "must be at most %d ms (1 h), got %d", MaxBeatMs, s.BeatMs)
	}
	if static {
		if s.HistorySteps != 0 {
			v.add("historySteps", "purpose static_response has no history window: omit historySteps or set it to 0, got %d", s.HistorySteps)
		}
		if s.HorizonSteps != 0 {
			v.add("horizonSteps", "purpose static_response has no horizon: omit horizonSteps or set it to 0, got %d", s.HorizonSteps)
		}
	} else {
		if s.HistorySteps < 1 || s.HistorySteps > MaxHistorySteps {
			v.add("historySteps", "must be 1..%d, got %d", MaxHistorySteps, s.HistorySteps)
		}
		if s.HorizonSteps < 1 || s.HorizonSteps > MaxHorizonSteps {
			v.add("horizonSteps", "must be 1..%d, got %d", MaxHorizonSteps, s.HorizonSteps)
		}
	}
	if h, f := s.HistorySteps, s.HorizonSteps; h > 0 && f >= 0 && len(s.Nodes) > 0 {
		// Overflow-free: (h+f)·n > MaxWindowValues.
		if h > MaxWindowValues || f > MaxWindowValues || (h+f)*len(s.Nodes) > MaxWindowValues {
			v.add("historySteps", "a window of %d+%d steps of %d nodes is too large: (historySteps+horizonSteps)·nodes must be at most %d", h, f, len(s.Nodes), MaxWindowValues)
		}
	}
	if s.Stride < 1 || s.Stride > MaxStride {
		v.add("stride", "must be 1..%d, got %d", MaxStride, s.Stride)
	}

	switch {
	case s.Purpose == "":
		v.add("purpose", "required; one of %s", strings.Join(specPurposes, ", "))
	case !slices.Contains(specPurposes, s.Purpose):
		v.add("purpose", "unknown purpose %q; one of %s", s.Purpose, strings.Join(specPurposes, ", "))
	}
	if !utf8.ValidString(s.Note) {
		v.add("note", "is not valid UTF-8")
	} else if n := utf8.RuneCountInString(s.Note); n > MaxNoteChars {
		v.add("note", "at most %d characters, got %d", MaxNoteChars, n)
	}

	s.Cleaning.validate(v)
	s.Split.validate(v, static)
}

func (u *UnitContract) validate(v *specValidator, p string) {
	specCheckID(v.addUnit, p+".unit", u.Unit)
	if u.ModelUnit != u.Unit {
		specCheckID(v.addUnit, p+".modelUnit", u.ModelUnit)
	}
	switch {
	case u.Scale == nil:
		v.addUnit(p+".scale", "required: AML never assumes scale 1; write 1 if the units already match")
	case !specFinite(*u.Scale):
		v.addUnit(p+".scale", "must be a finite number, got %v", *u.Scale)
	case *u.Scale == 0:
		v.addUnit(p+".scale", "must not be 0")
	}
	switch {
	case u.Offset == nil:
		v.addUnit(p+".offset", "required: AML never assumes offset 0; write 0 if there is none")
	case !specFinite(*u.Offset):
		v.addUnit(p+".offset", "must be a finite number, got %v", *u.Offset)
	}
	if u.DelayMs < 0 || u.DelayMs > MaxDelayMs {
		v.addUnit(p+".delayMs", "must be 0..%d ms, got %d", MaxDelayMs, u.DelayMs)
	}
}

func (c *Cleaning) validate(v *specValidator) {
	if h := c.Hampel; h != nil {
		if !specFinite(h.Threshold) || h.Threshold < 0 || h.Threshold > MaxHampelThreshold {
			v.add("cleaning.hampel.threshold", "must be 0 (off)..%d, got %v", MaxHampelThreshold, h.Threshold)
		}
		switch {
		case h.WindowMs < 0 || h.WindowMs > MaxHampelWindowMs:
			v.add("cleaning.hampel.windowMs", "must be 0..%d ms, got %d", MaxHampelWindowMs, h.WindowMs)
		case h.WindowMs == 0 && h.Threshold > 0:
			v.add("cleaning.hampel.windowMs", "must be > 0 when the Hampel filter is on (threshold %v); set threshold 0 to turn it off", h.Threshold)
		}
	}
	if m := c.MaxInterpMs; m != nil && (*m < 0 || *m > MaxInterpLimitMs) {
		v.add("cleaning.maxInterpMs", "must be 0..%d ms, got %d", MaxInterpLimitMs, *m)
	}
	if r := c.MaxDropRatio; r != nil && (!specFinite(*r) || *r < 0 || *r > 1) {
		v.add("cleaning.maxDropRatio", "must be 0..1, got %v", *r)
	}
}

func (sp *Split) validate(v *specValidator, static bool) {
	okVal := specFinite(sp.ValRatio) && sp.ValRatio >= 0 && sp.ValRatio <= MaxSplitRatio
	okTest := specFinite(sp.TestRatio) && sp.TestRatio >= 0 && sp.TestRatio <= MaxSplitRatio
	if !okVal {
		v.add("split.valRatio", "must be 0..%v, got %v", MaxSplitRatio, sp.ValRatio)
	}
	if !okTest {
		v.add("split.testRatio", "must be 0..%v, got %v", MaxSplitRatio, sp.TestRatio)
	}
	if okVal && okTest && sp.ValRatio+sp.TestRatio > MaxSplitRatioSum {
		v.add("split.testRatio", "valRatio+testRatio must be at most %v, got %v+%v", MaxSplitRatioSum, sp.ValRatio, sp.TestRatio)
	}
	if static {
		if sp.Mode != SplitModeByRow {
			v.add("split.mode", "purpose static_response splits by row: omit mode or set it to %s, got %q", SplitModeByRow, sp.Mode)
		}
	} else if sp.Mode != SplitModeByRun && sp.Mode != SplitModeTimeBlocks && sp.Mode != SplitModeExplicit {
		v.add("split.mode", "unknown mode %q; one of %s, %s, %s (%s is for static_response only)", sp.Mode, SplitModeByRun, SplitModeTimeBlocks, SplitModeExplicit, SplitModeByRow)
	}
	if sp.Mode == SplitModeExplicit {
		if len(sp.TrainRunIDs) == 0 {
			v.add("split.trainRunIds", "mode explicit needs at least one train run")
		}
		if sp.ValRatio != 0 || sp.TestRatio != 0 {
			v.add("split.valRatio", "mode explicit assigns runs by name; set valRatio and testRatio to 0")
		}
		seen := map[string]string{}
		for _, l := range []struct {
			name string
			ids  []string
		}{{"split.trainRunIds", sp.TrainRunIDs}, {"split.valRunIds", sp.ValRunIDs}, {"split.testRunIds", sp.TestRunIDs}} {
			for i, id := range l.ids {
				f := fmt.Sprintf("%s[%d]", l.name, i)
				specCheckID(v.add, f, id)
				if prev, dup := seen[id]; dup {
					v.add(f, "run %q is also in %s", id, prev)
				}
				seen[id] = l.name
			}
		}
	} else if len(sp.TrainRunIDs)+len(sp.ValRunIDs)+len(sp.TestRunIDs) > 0 {
		v.add("split.trainRunIds", "run lists are only for mode %s", SplitModeExplicit)
	}
	if sp.Mode == SplitModeTimeBlocks {
		if sp.Blocks < MinBlocks || sp.Blocks > MaxBlocks {
			v.add("split.blocks", "must be %d..%d, got %d", MinBlocks, MaxBlocks, sp.Blocks)
		}
	} else if sp.Blocks != 0 {
		v.add("split.blocks", "only for mode %s; omit it for mode %q", SplitModeTimeBlocks, sp.Mode)
	}
}

func specFinite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// specCheckID checks an identifier-like string (IDs, units): non-empty, at
// most MaxIDBytes, valid UTF-8, no control characters, no surrounding
// white space.
func specCheckID(add func(field, format string, args ...any), field, s string) {
	switch {
	case s == "":
		add(field, "required")
	case len(s) > MaxIDBytes:
		add(field, "at most %d bytes, got %d", MaxIDBytes, len(s))
	case !utf8.ValidString(s):
		add(field, "is not valid UTF-8")
	case strings.IndexFunc(s, specIsControl) >= 0:
		add(field, "%q has control characters", s)
	case strings.TrimSpace(s) != s:
		add(field, "%q has leading or trailing white space", s)
	}
}

func specIsControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) }

// ---------------------------------------------------------------------------
// Strict shape check: walks the JSON tokens against the Go type of Spec so
// that every syntax and type error gets its exact JSON path and position.

var errSpecShapeStop = errors.New("stop")

type specShape struct {
	data     []byte
	dec      *json.Decoder
	problems []core.Problem
}

// checkSpecShape returns the syntax and type problems of data as a Spec.
func checkSpecShape(data []byte) []core.Problem {
	c := &specShape{data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	c.dec.UseNumber()
	if len(bytes.TrimSpace(data)) == 0 {
		return []core.Problem{{Field: "$", Message: "empty spec: expected a JSON object"}}
	}
	if err := c.value(reflect.TypeFor[Spec](), ""); err != nil {
		if len(c.problems) >= maxSpecProblems {
			c.problems = append(c.problems, core.Problem{Field: "$", Message: fmt.Sprintf("stopped after %d problems", maxSpecProblems)})
		}
		return c.problems
	}
	start := c.pos()
	if _, err := c.dec.Token(); err != io.EOF {
		_ = c.problem("", start, "unexpected data after the spec's JSON object") // the last check: nothing left to stop
	}
	return c.problems
}

// pos is the byte offset where the next token starts.
func (c *specShape) pos() int {
	off := int(c.dec.InputOffset())
	for off < len(c.data) {
		switch c.data[off] {
		case ' ', '\t', '\n', '\r', ',', ':':
			off++
			continue
		}
		break
	}
	return off
}

func (c *specShape) where(off int) string {
	off = min(max(off, 0), len(c.data))
	line := 1 + bytes.Count(c.data[:off], []byte{'\n'})
	col := off - bytes.LastIndexByte(c.data[:off], '\n')
	return fmt.Sprintf("line %d, column %d (byte offset %d)", line, col, off)
}

func (c *specShape) problem(path string, off int, format string, args ...any) error {
	if path == "" {
		path = "$"
	}
	c.problems = append(c.problems, core.Problem{Field: path, Message: fmt.Sprintf(format, args...) + " at " + c.where(off)})
	if len(c.problems) >= maxSpecProblems {
		return errSpecShapeStop
	}
	return nil
}

// syntax records a syntax error (which ends the walk) and returns a non-nil
// error.
func (c *specShape) syntax(path string, err error) error {
	off := len(c.data)
	msg := err.Error()
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		// The streaming decoder's offsets are off by one inside literals;
		// the whole-input scanner reports the offending byte exactly
		// (Offset = its index + 1), and the first error of both is the
		// same byte.
		off = int(se.Offset)
		var raw json.RawMessage
		if err2 := json.Unmarshal(c.data, &raw); errors.As(err2, &se) {
			off = int(se.Offset) - 1
			msg = se.Error()
		}
		msg = strings.TrimPrefix(msg, "json: ")
	case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
		msg = "unexpected end of JSON input"
	}
	_ = c.problem(path, off, "invalid JSON: %s", msg) // a syntax error stops the walk whatever the count
	return errSpecShapeStop
}

func specTokKind(tok json.Token) string {
	switch t := tok.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "the number " + string(t)
	case string:
		return "a string"
	case json.Delim:
		if t == '[' {
			return "an array"
		}
		return "an object"
	}
	return fmt.Sprintf("%v", tok)
}

func specWant(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct:
		return "an object"
	case reflect.Slice:
		return "an array"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "an integer"
	case reflect.Uint64, reflect.Uint32, reflect.Uint:
		return "a non-negative integer"
	case reflect.Float64, reflect.Float32:
		return "a number"
	}
	return t.String()
}

// skip consumes the rest of a value whose first token was tok.
func (c *specShape) skip(tok json.Token) error {
	d, ok := tok.(json.Delim)
	if !ok || d == '}' || d == ']' {
		return nil
	}
	for depth := 1; depth > 0; {
		t, err := c.dec.Token()
		if err != nil {
			return c.syntax("", err)
		}
		if d, ok := t.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
	}
	return nil
}

func (c *specShape) mismatch(t reflect.Type, path string, off int, tok json.Token) error {
	if err := c.problem(path, off, "expected %s, got %s", specWant(t), specTokKind(tok)); err != nil {
		return err
	}
	return c.skip(tok)
}

func specJoin(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// value checks one value of Go type t at path. A non-nil error ends the walk.
func (c *specShape) value(t reflect.Type, path string) error {
	off := c.pos()
	tok, err := c.dec.Token()
	if err != nil {
		return c.syntax(path, err)
	}
	if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
		// Token reports a stray closing delimiter as a syntax error, so
		// this cannot happen; be safe anyway.
		return c.syntax(path, fmt.Errorf("unexpected %q", rune(d)))
	}
	if t.Kind() == reflect.Pointer {
		if tok == nil {
			return nil
		}
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if d, ok := tok.(json.Delim); !ok || d != '{' {
			return c.mismatch(t, path, off, tok)
		}
		return c.object(t, path)
	case reflect.Slice:
		if tok == nil {
			return nil
		}
		if d, ok := tok.(json.Delim); !ok || d != '[' {
			return c.mismatch(t, path, off, tok)
		}
		for i := 0; c.dec.More(); i++ {
			if err := c.value(t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		if _, err := c.dec.Token(); err != nil {
			return c.syntax(path, err)
		}
		return nil
	case reflect.String:
		if _, ok := tok.(string); !ok {
			return c.mismatch(t, path, off, tok)
		}
	case reflect.Bool:
		if _, ok := tok.(bool); !ok {
			return c.mismatch(t, path, off, tok)
		}
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, ok := tok.(json.Number)
		if !ok {
			return c.mismatch(t, path, off, tok)
		}
		if _, err := strconv.ParseInt(string(n), 10, t.Bits()); err != nil {
			return c.problem(path, off, "expected an integer of at most %d bits, got %s", t.Bits(), n)
		}
	case reflect.Uint64, reflect.Uint32, reflect.Uint:
		n, ok := tok.(json.Number)
		if !ok {
			return c.mismatch(t, path, off, tok)
		}
		if _, err := strconv.ParseUint(string(n), 10, t.Bits()); err != nil {
			return c.problem(path, off, "expected a non-negative integer of at most %d bits, got %s", t.Bits(), n)
		}
	case reflect.Float64, reflect.Float32:
		n, ok := tok.(json.Number)
		if !ok {
			return c.mismatch(t, path, off, tok)
		}
		if _, err := strconv.ParseFloat(string(n), t.Bits()); err != nil {
			return c.problem(path, off, "number %s is out of range", n)
		}
	default:
		return c.problem(path, off, "unsupported field type %s", t)
	}
	return nil
}

// object checks the members of an object whose '{' was read.
func (c *specShape) object(t reflect.Type, path string) error {
	fields := specJSONFields(t)
	seen := map[string]bool{}
	for c.dec.More() {
		off := c.pos()
		tok, err := c.dec.Token()
		if err != nil {
			return c.syntax(path, err)
		}
		key, _ := tok.(string) // Token guarantees a string key here
		fp := specJoin(path, key)
		var perr error
		switch ft, known := fields[key]; {
		case seen[key]:
			perr = c.problem(fp, off, "duplicate key %q", key)
		case !known:
			msg := fmt.Sprintf("unknown field %q", key)
			for name := range fields {
				if strings.EqualFold(name, key) {
					msg += fmt.Sprintf(" (did you mean %q? names are case-sensitive)", name)
				}
			}
			perr = c.problem(fp, off, "%s", msg)
		default:
			seen[key] = true
			if err := c.value(ft, fp); err != nil {
				return err
			}
			continue
		}
		if perr != nil {
			return perr
		}
		vt, err := c.dec.Token()
		if err != nil {
			return c.syntax(fp, err)
		}
		if err := c.skip(vt); err != nil {
			return err
		}
	}
	if _, err := c.dec.Token(); err != nil {
		return c.syntax(path, err)
	}
	return nil
}

// specJSONFields maps the JSON names of struct type t to their types.
func specJSONFields(t reflect.Type) map[string]reflect.Type {
	m := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = f.Type
	}
	return m
}

package sim

import (
	"regexp"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// Defaults and limits of [InjectionConfig].
const (
	DefaultRuns        = 12
	DefaultStepMs      = 1000
	DefaultRunDuration = 30 * time.Minute
	DefaultGap         = 10 * time.Minute
	// DefaultStartMs is 2026-01-05T06:00:00Z in epoch milliseconds.
	DefaultStartMs   = int64(1767592800000)
	DefaultLineID    = "line-injection-01"
	DefaultProductID = "product-injection-a"
	DefaultRecipeID  = "recipe-injection-a"

	MaxRuns        = 1000
	MinStepMs      = 10
	MaxStepMs      = 3_600_000
	MinRunSteps    = 10
	MaxRunSteps    = 1_000_000
	MaxRunDuration = 7 * 24 * time.Hour
	MaxGap         = 30 * 24 * time.Hour
	// MaxTotalSamples bounds one configuration: runs × steps × nodes, checked
	// before anything is simulated. [Stream] holds one batch of samples at a
	// time, so this bounds the time and disk one call takes (≈ 30 B of
	// SQLite store a sample: 1 G samples ≈ 30 GB), not its memory.
	MaxTotalSamples = 1_000_000_000
	// MaxInMemorySamples bounds what [GenerateInjection] holds in memory
	// (≈ 200 B a sample; 1000 default runs are 18 M samples).
	MaxInMemorySamples = 20_000_000
)

// Field names reported in validation errors (the CLI flag names).
const (
	FieldRuns     = "runs"
	FieldStepMs   = "step-ms"
	FieldDuration = "duration"
	FieldGap      = "gap"
	FieldStartMs  = "start-ms"
	FieldLine     = "line"
	FieldProduct  = "product"
	FieldRecipe   = "recipe"
)

// InjectionConfig configures [GenerateInjection]. A zero value of any field
// but Runs and Seed selects its default.
type InjectionConfig struct {
	// Runs is the number of runs, 1..MaxRuns (field "runs"). Zero is an
	// error, not a default: use DefaultRuns.
	Runs int
	// Seed selects the random streams; any value (0 included) is valid.
	Seed uint64
	// StepMs is the sample period in ms, MinStepMs..MaxStepMs, default
	// 1000 (field "step-ms").
	StepMs int64
	// RunDuration is the length of one run, default 30 min; it must hold
	// MinRunSteps..MaxRunSteps samples and be at most MaxRunDuration
	// (field "duration"). It is rounded down to whole steps.
	RunDuration time.Duration
	// GapBetweenRuns is the idle time between one run's last sample and the
	// next run's first, default 10 min, at most MaxGap (field "gap").
	GapBetweenRuns time.Duration
	// StartMs is the first run's first sample, epoch ms, default
	// DefaultStartMs (field "start-ms"); negative is an error.
	StartMs int64
	// LineID, ProductID, RecipeID name the context (fields "line",
	// "product", "recipe"): 1..100 characters of [A-Za-z0-9._-], starting
	// with a letter or digit. A product or a recipe id belongs to one
	// line: on a line other than DefaultLineID the defaults are
	// DefaultProductID-LINE and DefaultRecipeID-LINE.
	LineID, ProductID, RecipeID string
	// FirstRun numbers the runs from FirstRun+1 (run ids and random
	// streams), so a later batch continues a line's runs without reusing
	// an id; 0..MaxRuns. Timing still starts at StartMs.
	FirstRun int
	// AgeRuns is the line's age in runs at the batch's first run: the
	// unmeasured mould wear and the ambient drift grow with it (0: a new
	// or serviced mould); 0..MaxRuns. A batch continuing a worn line sets
	// it to FirstRun.
	AgeRuns int
}

// DefaultInjectionConfig returns the default configuration (12 runs, seed 1,
// every other field at its default).
func DefaultInjectionConfig() InjectionConfig {
	return InjectionConfig{
		Runs:           DefaultRuns,
		Seed:           1,
		StepMs:         DefaultStepMs,
		RunDuration:    DefaultRunDuration,
		GapBetweenRuns: DefaultGap,
		StartMs:        DefaultStartMs,
		LineID:         DefaultLineID,
		ProductID:      DefaultProductID,
		RecipeID:       DefaultRecipeID,
	}
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// Normalize returns the config with defaults applied, or an *core.Error
// with code AML_INVALID_ARGUMENT whose Field names the offending setting.
func (c InjectionConfig) Normalize() (InjectionConfig, error) {
	if c.StepMs == 0 {
		c.StepMs = DefaultStepMs
	}
	if c.RunDuration == 0 {
		c.RunDuration = DefaultRunDuration
	}
	if c.GapBetweenRuns == 0 {
		c.GapBetweenRuns = DefaultGap
	}
	if c.StartMs == 0 {
		c.StartMs = DefaultStartMs
	}
	if c.LineID == "" {
		c.LineID = DefaultLineID
	}
	// A product and a recipe id belong to one line (the store refuses
	// another line's), so a line other than the default one gets ids of
	// its own: DefaultProductID-LINE, DefaultRecipeID-LINE.
	if c.ProductID == "" {
		c.ProductID = lineDefault(DefaultProductID, c.LineID)
	}
	if c.RecipeID == "" {
		c.RecipeID = lineDefault(DefaultRecipeID, c.LineID)
	}

	inv := func(field, format string, args ...any) error {
		return core.FieldErrorf(core.CodeInvalidArgument, field, format, args...)
	}
	if c.Runs < 1 || c.Runs > MaxRuns {
		return c, inv(FieldRuns, "runs must be 1..%d, got %d", MaxRuns, c.Runs)
	}
	if c.FirstRun < 0 || c.FirstRun > MaxRuns {
		return c, inv(FieldRuns, "first run must be 0..%d, got %d", MaxRuns, c.FirstRun)
	}
	if c.AgeRuns < 0 || c.AgeRuns > MaxRuns {
		return c, inv(FieldRuns, "age must be 0..%d runs, got %d", MaxRuns, c.AgeRuns)
	}
	if c.StepMs < MinStepMs || c.StepMs > MaxStepMs {
		return c, inv(FieldStepMs, "step must be %d..%d ms, got %d", MinStepMs, MaxStepMs, c.StepMs)
	}
	if c.RunDuration < 0 || c.RunDuration > MaxRunDuration {
		return c, inv(FieldDuration, "run duration must be positive and at most %s, got %s", MaxRunDuration, c.RunDuration)
	}
	steps := c.steps()
	if steps < MinRunSteps {
		return c, inv(FieldDuration, "run duration %s holds %d steps of %d ms, need at least %d", c.RunDuration, steps, c.StepMs, MinRunSteps)
	}
	if steps > MaxRunSteps {
		return c, inv(FieldDuration, "run duration %s holds %d steps of %d ms, at most %d allowed", c.RunDuration, steps, c.StepMs, MaxRunSteps)
	}
	if c.GapBetweenRuns < 0 || c.GapBetweenRuns > MaxGap {
		return c, inv(FieldGap, "gap between runs must be positive and at most %s, got %s", MaxGap, c.GapBetweenRuns)
	}
	if c.StartMs < 0 {
		return c, inv(FieldStartMs, "start must be a non-negative epoch ms, got %d", c.StartMs)
	}
	if total := c.MaxSamples(); total > MaxTotalSamples {
		return c, inv(FieldRuns, "%d runs of %d steps would be up to %d samples, at most %d allowed in one call; use fewer runs, shorter runs or a longer step", c.Runs, steps, total, MaxTotalSamples)
	}
	for _, f := range []struct{ field, v string }{{FieldLine, c.LineID}, {FieldProduct, c.ProductID}, {FieldRecipe, c.RecipeID}} {
		if !idPattern.MatchString(f.v) {
			return c, inv(f.field, "id %q must be 1..100 characters of [A-Za-z0-9._-] starting with a letter or digit", f.v)
		}
	}
	return c, nil
}

// lineDefault is the default id def on the default line, def-LINE on
// another (an id too long for the pattern fails validation on its field).
func lineDefault(def, line string) string {
	if line == DefaultLineID {
		return def
	}
	return def + "-" + line
}

// MaxSamples is the number of samples of the configuration before
// dropouts and gaps: runs × steps × nodes (of a normalized config).
func (c InjectionConfig) MaxSamples() int64 {
	return int64(c.Runs) * c.steps() * int64(len(signals))
}

// steps is the number of samples of one run.
func (c InjectionConfig) steps() int64 {
	return c.RunDuration.Milliseconds() / c.StepMs
}

// runStartMs is the first sample of run r (0-based).
func (c InjectionConfig) runStartMs(r int) int64 {
	return c.StartMs + int64(r)*(c.steps()*c.StepMs+c.GapBetweenRuns.Milliseconds())
}

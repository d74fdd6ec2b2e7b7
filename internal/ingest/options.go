package ingest

import (
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// DefaultBatchSize is the number of samples per emitted batch when
// CSVOptions.BatchSize is 0.
const DefaultBatchSize = 8192

// CSVOptions control how a CSV file becomes samples.
type CSVOptions struct {
	// Line, Product, Recipe and Run are stamped on every sample. ParseCSV
	// uses Run as given; IngestFiles replaces an empty Run with the file's
	// base name without its extension.
	Line, Product, Recipe, Run string

	// TimeCol names the time column (case-insensitive). Empty: auto-detect
	// one of time, ts, timestamp, datetime, date, t, time_ms, time_s,
	// timestamp_ms, epoch_ms, epoch_s.
	TimeCol string
	// TimeUnit is "us", "ms", "s", "min", "h", "rfc3339" or "" (auto: a
	// column name ending in _us, _ms or _s; else RFC 3339 if the first time
	// is not a number; else numbers of at least 1e14 are microseconds, of
	// at least 1e11 milliseconds, smaller ones seconds). Times are kept to
	// the microsecond (RFC 3339 fractions and decimal seconds too). min and h are numbers of minutes or hours (relative times
	// of a test rig, placed with TimeOffsetMs).
	TimeUnit string
	// TZ is the IANA zone (e.g. Europe/Berlin) of times written without
	// one ("2026-11-03 06:00:00"); empty: such times are refused. A local
	// time in a daylight-saving change's repeated hour is refused as
	// ambiguous, one in its skipped hour as nonexistent.
	TZ string
	// Delimiter separates cells: "," (default), ";", "tab" (or "\t") or
	// "|".
	Delimiter string
	// DecimalComma reads "12,5" as 12.5 in value and numeric time cells
	// (needs a Delimiter other than ","); no thousands separators.
	DecimalComma bool

	// Period, for wide files without a time column: data row k (0-based,
	// counting skipped bad rows too) is at StartMs + k*Period. It must be a
	// whole number of microseconds (1638µs for a 610.5 Hz record).
	Period  time.Duration
	StartMs int64
	// TimeOffsetMs is added to every time read from a time column: files
	// whose times are relative (0, 4, 8 s …) are placed at an absolute
	// position, so two such files do not land on the same instants.
	TimeOffsetMs int64

	// Units maps node id → unit for nodes IngestFiles creates.
	Units map[string]string
	// IgnoreCols are wide-file columns not to ingest (case-insensitive).
	IgnoreCols []string
	// SkipBad skips bad rows (counted in the report) instead of failing.
	SkipBad bool
	// BatchSize is the number of samples per emitted batch (default 8192).
	BatchSize int
}

// FileReport describes what one file produced.
type FileReport struct {
	File  string `json:"file"`
	Shape string `json:"shape"` // "wide" or "long"
	// Rows counts data rows ingested (bad rows skipped are in Skipped).
	Rows int `json:"rows"`
	// Samples counts samples emitted; Missing counts empty or NaN cells.
	Samples int `json:"samples"`
	Missing int `json:"missing"`
	// Skipped counts bad rows skipped under SkipBad, by reason in
	// SkipReasons; FirstSkipped holds up to 5 "file:line: reason ..." lines.
	Skipped      int            `json:"skipped"`
	SkipReasons  map[string]int `json:"skipReasons,omitempty"`
	FirstSkipped []string       `json:"firstSkipped,omitempty"`
	// Nodes are the nodes that received samples: header order for wide
	// files, order of first appearance for long ones.
	Nodes []string `json:"nodes"`
	// FirstTs and LastTs are the epoch ms holding the smallest and largest
	// sample time (samples are kept to the µs: every sample lies in
	// [FirstTs, LastTs+1) ms); both 0 when there are no samples.
	FirstTs int64 `json:"firstTs"`
	LastTs  int64 `json:"lastTs"`
	// Run is the run id the samples carry; RunCreated and NewNodes report
	// what IngestFiles created in the store.
	Run        string `json:"run,omitempty"`
	RunCreated bool   `json:"runCreated"`
	NewNodes   int    `json:"newNodes"`
}

// Skip reasons, the keys of FileReport.SkipReasons.
const (
	ReasonBadValue    = "bad value"
	ReasonBadTime     = "bad time"
	ReasonColumnCount = "column count"
	ReasonEmptyNode   = "empty node"
	ReasonBadNode     = "bad node"
	ReasonBadState    = "bad state"
	ReasonBadQuote    = "bad quote"
	ReasonDupTime     = "duplicate time"
)

// validate checks options that do not depend on a file and returns the
// explicit time unit and the period in ms.
func (o *CSVOptions) validate() (timeUnit, int64, error) {
	var u timeUnit
	switch strings.ToLower(strings.TrimSpace(o.TimeUnit)) {
	case "":
		u = unitAuto
	case "us", "µs":
		u = unitUs
	case "ms":
		u = unitMs
	case "s":
		u = unitS
	case "min":
		u = unitMin
	case "h":
		u = unitH
	case "rfc3339":
		u = unitRFC3339
	default:
		return 0, 0, core.FieldErrorf(core.CodeInvalidArgument, "time-unit",
			"time unit %q: want us, ms, s, min, h or rfc3339", o.TimeUnit)
	}
	if _, err := o.separator(); err != nil {
		return 0, 0, err
	}
	if _, err := o.location(); err != nil {
		return 0, 0, err
	}
	for _, f := range [...][2]string{{"line", o.Line}, {"product", o.Product}, {"recipe", o.Recipe}, {"run", o.Run}} {
		if f[1] == "" {
			continue
		}
		if err := core.CheckID(f[0], f[1]); err != nil {
			return 0, 0, err
		}
	}
	if o.BatchSize < 0 {
		return 0, 0, core.FieldErrorf(core.CodeInvalidArgument, "batch-size", "batch size %d is negative", o.BatchSize)
	}
	var period int64
	if o.Period != 0 {
		if o.Period < 0 || o.Period%time.Microsecond != 0 {
			return 0, 0, core.FieldErrorf(core.CodeInvalidArgument, "period",
				"period %v: want a positive whole number of microseconds", o.Period)
		}
		if strings.TrimSpace(o.TimeCol) != "" {
			return 0, 0, core.FieldErrorf(core.CodeInvalidArgument, "period",
				"period %v and time column %q both given: use one", o.Period, o.TimeCol)
		}
		if u != unitAuto {
			return 0, 0, core.FieldErrorf(core.CodeInvalidArgument, "time-unit",
				"time unit %q needs a time column, but period %v says there is none", o.TimeUnit, o.Period)
		}
		period = int64(o.Period / time.Microsecond)
	}
	return u, period, nil
}

// separator is the cell separator Delimiter names.
func (o *CSVOptions) separator() (byte, error) {
	sep := byte(',')
	switch o.Delimiter {
	case "", ",":
	case ";", "|":
		sep = o.Delimiter[0]
	case "tab", "\t", "\\t":
		sep = '\t'
	default:
		return 0, core.FieldErrorf(core.CodeInvalidArgument, "delimiter", "delimiter %q: want \",\", \";\", \"tab\" or \"|\"", o.Delimiter)
	}
	if o.DecimalComma && sep == ',' {
		return 0, core.FieldErrorf(core.CodeInvalidArgument, "decimal-comma",
			"a decimal comma needs another cell delimiter (e.g. --delimiter ';')")
	}
	return sep, nil
}

// location is the zone TZ names (nil without one).
func (o *CSVOptions) location() (*time.Location, error) {
	if o.TZ == "" {
		return nil, nil
	}
	loc, err := time.LoadLocation(o.TZ)
	if err != nil || o.TZ == "Local" {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "tz", "time zone %q: want an IANA zone such as Europe/Berlin or UTC", o.TZ)
	}
	return loc, nil
}

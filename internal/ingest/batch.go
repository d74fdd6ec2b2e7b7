package ingest

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/aml-project/aml/internal/core"
)

// BatchRecord is one line of a plant's batch records (docs/lineage.md):
// which recipe version a run ran, from when to when, confirmed by whom.
type BatchRecord struct {
	Run           string `json:"run"`
	Recipe        string `json:"recipe"`
	RecipeVersion int    `json:"recipeVersion"`
	StartMs       int64  `json:"-"`
	EndMs         *int64 `json:"-"`
	ConfirmedBy   string `json:"confirmedBy"`
}

// MaxBatchRecords bounds one file of batch records.
const MaxBatchRecords = 10_000

// ParseBatchRecords reads batch records: a CSV with the columns
// run,recipe,recipe_version,start,end,confirmed_by (any order, names
// case-insensitive; end may be empty) or a JSON array of {run, recipe,
// recipeVersion, start, end, confirmedBy}. Times are epoch milliseconds
// or RFC 3339 with a zone. Errors name the file and line.
func ParseBatchRecords(name string, b []byte) ([]BatchRecord, error) {
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '[' {
		return parseBatchJSON(name, t)
	}
	cr := csv.NewReader(bytes.NewReader(b))
	cr.FieldsPerRecord = -1
	head, err := cr.Read()
	if err != nil {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, name, "%s: no header: %v", name, err)
	}
	col := map[string]int{}
	for i, h := range head {
		col[strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))] = i
	}
	for _, need := range []string{"run", "recipe", "recipe_version", "start", "confirmed_by"} {
		if _, ok := col[need]; !ok {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, name, "%s: no column %q (want run,recipe,recipe_version,start,end,confirmed_by)", name, need)
		}
	}
	var out []BatchRecord
	for line := 2; ; line++ {
		r, err := cr.Read()
		if err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, core.FieldErrorf(core.CodeInvalidArgument, fmt.Sprintf("%s:%d", name, line), "%s:%d: %v", name, line, err)
		}
		cell := func(c string) string {
			if j := col[c]; j < len(r) {
				return strings.TrimSpace(r[j])
			}
			return ""
		}
		end := ""
		if _, ok := col["end"]; ok {
			end = cell("end")
		}
		rec, err := batchRecord(fmt.Sprintf("%s:%d", name, line), cell("run"), cell("recipe"), cell("recipe_version"), cell("start"), end, cell("confirmed_by"))
		if err != nil {
			return nil, err
		}
		if out = append(out, rec); len(out) > MaxBatchRecords {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, name, "%s: more than %d records", name, MaxBatchRecords)
		}
	}
	if len(out) == 0 {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, name, "%s: no records", name)
	}
	return out, nil
}

func parseBatchJSON(name string, b []byte) ([]BatchRecord, error) {
	var raw []struct {
		Run           string          `json:"run"`
		Recipe        string          `json:"recipe"`
		RecipeVersion json.RawMessage `json:"recipeVersion"`
		Start, End    json.RawMessage
		ConfirmedBy   string `json:"confirmedBy"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&raw); err != nil {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, name, "%s: not a JSON array of batch records: %v", name, err)
	}
	if len(raw) == 0 || len(raw) > MaxBatchRecords {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, name, "%s: 1 to %d records, not %d", name, MaxBatchRecords, len(raw))
	}
	unq := func(m json.RawMessage) string {
		var s string
		if json.Unmarshal(m, &s) == nil {
			return s
		}
		return string(m)
	}
	out := make([]BatchRecord, 0, len(raw))
	for i, r := range raw {
		end := ""
		if len(r.End) > 0 && string(r.End) != "null" {
			end = unq(r.End)
		}
		rec, err := batchRecord(fmt.Sprintf("%s[%d]", name, i), r.Run, r.Recipe, unq(r.RecipeVersion), unq(r.Start), end, r.ConfirmedBy)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

func batchRecord(at, run, recipe, version, start, end, by string) (BatchRecord, error) {
	v, err := strconv.Atoi(version)
	if err != nil || v < 1 {
		return BatchRecord{}, core.FieldErrorf(core.CodeInvalidArgument, at, "%s: recipe version %s is not a whole number ≥ 1", at, core.Quote(version))
	}
	rec := BatchRecord{Run: run, Recipe: recipe, RecipeVersion: v, ConfirmedBy: by}
	if rec.StartMs, err = batchTime(start); err != nil {
		return rec, core.FieldErrorf(core.CodeInvalidArgument, at, "%s: start %s: %v", at, core.Quote(start), err)
	}
	if end != "" {
		ms, err := batchTime(end)
		if err != nil {
			return rec, core.FieldErrorf(core.CodeInvalidArgument, at, "%s: end %s: %v", at, core.Quote(end), err)
		}
		rec.EndMs = &ms
	}
	return rec, nil
}

// batchTime is epoch milliseconds or an RFC 3339 time with a zone.
func batchTime(s string) (int64, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return ms, core.CheckTs("time", ms)
	}
	ms, err := ParseRFC3339Ms(s)
	if err != nil {
		return 0, fmt.Errorf("want epoch milliseconds or RFC 3339 with a zone")
	}
	return ms, nil
}

package ingest

import (
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

func TestParseBatchRecords(t *testing.T) {
	csv := "Run,Recipe,Recipe_Version,Start,End,Confirmed_By\nr1,R,1,2026-11-03T06:00:00+01:00,1793714400000,Kim\nr2,R,2,1793700000000,,Lee\n"
	got, err := ParseBatchRecords("b.csv", []byte(csv))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].StartMs != 1793682000000 || *got[0].EndMs != 1793714400000 || got[1].EndMs != nil || got[1].RecipeVersion != 2 || got[1].ConfirmedBy != "Lee" {
		t.Fatalf("csv: %+v", got)
	}
	js := `[{"run":"r1","recipe":"R","recipeVersion":1,"start":"2026-11-03T06:00:00+01:00","end":1793714400000,"confirmedBy":"Kim"}]`
	got2, err := ParseBatchRecords("b.json", []byte(js))
	if err != nil || len(got2) != 1 || got2[0].StartMs != got[0].StartMs || *got2[0].EndMs != *got[0].EndMs {
		t.Fatalf("json: %+v %v", got2, err)
	}
	for _, c := range []struct{ in, field, want string }{
		{"run,recipe,start,confirmed_by\nr,R,1,K\n", "b.csv", `no column "recipe_version"`},
		{"run,recipe,recipe_version,start,confirmed_by\nr,R,zero,1,K\n", "b.csv:2", "not a whole number"},
		{"run,recipe,recipe_version,start,confirmed_by\nr,R,1,2026-11-03 06:00,K\n", "b.csv:2", "RFC 3339 with a zone"},
		{"run,recipe,recipe_version,start,confirmed_by\n", "b.csv", "no records"},
		{`[{"run":"r","colour":"red"}]`, "b.csv", "unknown field"},
	} {
		_, err := ParseBatchRecords("b.csv", []byte(c.in))
		e, ok := err.(*core.Error)
		if !ok || e.Field != c.field || !strings.Contains(e.Message, c.want) {
			t.Errorf("%q: %v (want field %q, %q)", c.in, err, c.field, c.want)
		}
	}
}

// Bad input never panics; what parses has versions ≥ 1 and times in range.
func FuzzParseBatchRecords(f *testing.F) {
	f.Add([]byte("run,recipe,recipe_version,start,end,confirmed_by\nr1,R,1,1,2,K\n"))
	f.Add([]byte(`[{"run":"r","recipe":"R","recipeVersion":"1","start":"2026-01-01T00:00:00Z","confirmedBy":"K"}]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		recs, err := ParseBatchRecords("f", b)
		if err != nil {
			return
		}
		for _, r := range recs {
			if r.RecipeVersion < 1 || core.CheckTs("", r.StartMs) != nil {
				t.Fatalf("accepted %+v", r)
			}
		}
	})
}

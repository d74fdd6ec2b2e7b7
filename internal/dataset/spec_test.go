package dataset

import (
	"encoding/json"
	"errors"
	"math"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

// specFixture is a valid, not yet normalized mpc_surrogate spec.
func specFixture() *Spec {
	one, zero := 1.0, 0.0
	return &Spec{
		LineID: "line-1", ProductID: "prod-1", RecipeID: "rec-1",
		Nodes: []NodeSpec{
			{NodeID: "u1", Role: RoleControl},
			{NodeID: "d1", Role: RoleDisturbance},
			{NodeID: "x1", Role: RoleFeature},
			{NodeID: "y1", Role: RoleTarget, Unit: &UnitContract{Unit: "g", Scale: &one, Offset: &zero}},
		},
		BeatMs: 1000, HistorySteps: 30, HorizonSteps: 10,
		Split:   Split{ValRatio: 0.2, TestRatio: 0.2, Seed: 1},
		Purpose: PurposeMPCSurrogate,
	}
}

// specStaticFixture is a valid static_response spec.
func specStaticFixture() *Spec {
	s := specFixture()
	s.Purpose = PurposeStaticResponse
	s.HistorySteps, s.HorizonSteps = 0, 0
	return s
}

func specAsError(t *testing.T, err error) *core.Error {
	t.Helper()
	var ae *core.Error
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not a *core.Error", err, err)
	}
	return ae
}

func specFields(ae *core.Error) []string {
	var fs []string
	for _, p := range ae.Problems {
		fs = append(fs, p.Field)
	}
	return fs
}

func TestSpecFixturesValid(t *testing.T) {
	for _, s := range []*Spec{specFixture(), specStaticFixture()} {
		if err := s.Validate(); err != nil {
			t.Fatalf("fixture %s: %v", s.Purpose, err)
		}
	}
}

func TestSpecValidateRules(t *testing.T) {
	nan, inf, zero, one := math.NaN(), math.Inf(1), 0.0, 1.0
	i64 := func(v int64) *int64 { return &v }
	f64 := func(v float64) *float64 { return &v }
	manyNodes := func(n int) []NodeSpec {
		ns := make([]NodeSpec, n)
		for i := range ns {
			ns[i] = NodeSpec{NodeID: "n" + strings.Repeat("x", i), Role: RoleControl}
		}
		ns[n-1].Role = RoleTarget
		return ns
	}
	cases := []struct {
		name   string
		static bool
		mut    func(s *Spec)
		field  string
		code   string
	}{
		{"empty lineId", false, func(s *Spec) { s.LineID = "" }, "lineId", core.CodeSpecInvalid},
		{"empty productId", false, func(s *Spec) { s.ProductID = "" }, "productId", core.CodeSpecInvalid},
		{"empty recipeId", false, func(s *Spec) { s.RecipeID = "" }, "recipeId", core.CodeSpecInvalid},
		{"control char in lineId", false, func(s *Spec) { s.LineID = "a\tb" }, "lineId", core.CodeSpecInvalid},
		{"space around recipeId", false, func(s *Spec) { s.RecipeID = " r" }, "recipeId", core.CodeSpecInvalid},
		{"invalid utf8 productId", false, func(s *Spec) { s.ProductID = "a\xffb" }, "productId", core.CodeSpecInvalid},
		{"long lineId", false, func(s *Spec) { s.LineID = strings.Repeat("a", MaxIDBytes+1) }, "lineId", core.CodeSpecInvalid},
		{"duplicate runId", false, func(s *Spec) { s.RunIDs = []string{"r1", "r2", "r1"} }, "runIds[2]", core.CodeSpecInvalid},
		{"empty runId", false, func(s *Spec) { s.RunIDs = []string{"r1", ""} }, "runIds[1]", core.CodeSpecInvalid},
		{"too many runIds", false, func(s *Spec) {
			for i := range MaxRuns + 1 {
				s.RunIDs = append(s.RunIDs, "r"+strings.Repeat("x", i))
			}
		}, "runIds", core.CodeSpecInvalid},
		{"one node", false, func(s *Spec) { s.Nodes = s.Nodes[3:] }, "nodes", core.CodeSpecInvalid},
		{"65 nodes", false, func(s *Spec) { s.Nodes = manyNodes(MaxNodes + 1); s.HistorySteps = 1 }, "nodes", core.CodeSpecInvalid},
		{"duplicate nodeId", false, func(s *Spec) { s.Nodes[2].NodeID = "u1" }, "nodes[2].nodeId", core.CodeSpecInvalid},
		{"empty nodeId", false, func(s *Spec) { s.Nodes[1].NodeID = "" }, "nodes[1].nodeId", core.CodeSpecInvalid},
		{"unknown role", false, func(s *Spec) { s.Nodes[2].Role = "state" }, "nodes[2].role", core.CodeSpecInvalid},
		{"missing role", false, func(s *Spec) { s.Nodes[1].Role = "" }, "nodes[1].role", core.CodeSpecInvalid},
		{"no target", false, func(s *Spec) { s.Nodes[3].Role = RoleFeature }, "nodes", core.CodeSpecInvalid},
		{"mpc without control", false, func(s *Spec) { s.Nodes[0].Role = RoleFeature }, "nodes", core.CodeSpecInvalid},
		{"static without input", true, func(s *Spec) {
			for i := range s.Nodes {
				s.Nodes[i].Role = RoleTarget
			}
		}, "nodes", core.CodeSpecInvalid},
		{"from after to", false, func(s *Spec) { s.FromMs, s.ToMs = i64(10), i64(10) }, "toMs", core.CodeSpecInvalid},
		{"beat 0", false, func(s *Spec) { s.BeatMs = 0 }, "beatMs", core.CodeSpecInvalid},
		{"beat > 1 h", false, func(s *Spec) { s.BeatMs = MaxBeatMs + 1 }, "beatMs", core.CodeSpecInvalid},
		{"beat and beatMs", false, func(s *Spec) { s.Beat = "1638us" }, "beat", core.CodeSpecInvalid},
		{"beat not whole µs", false, func(s *Spec) { s.BeatMs, s.Beat = 0, "1.6384ms" }, "beat", core.CodeSpecInvalid},
		{"beat not a duration", false, func(s *Spec) { s.BeatMs, s.Beat = 0, "fast" }, "beat", core.CodeSpecInvalid},
		{"beat duration > 1 h", false, func(s *Spec) { s.BeatMs, s.Beat = 0, "61min" }, "beat", core.CodeSpecInvalid},
		{"history 0", false, func(s *Spec) { s.HistorySteps = 0 }, "historySteps", core.CodeSpecInvalid},
		{"history too long", false, func(s *Spec) { s.HistorySteps = MaxHistorySteps + 1 }, "historySteps", core.CodeSpecInvalid},
		{"horizon 0", false, func(s *Spec) { s.HorizonSteps = 0 }, "horizonSteps", core.CodeSpecInvalid},
		{"horizon negative", false, func(s *Spec) { s.HorizonSteps = -1 }, "horizonSteps", core.CodeSpecInvalid},
		{"horizon too long", false, func(s *Spec) { s.HorizonSteps = MaxHorizonSteps + 1 }, "horizonSteps", core.CodeSpecInvalid},
		{"quality_predict needs history", false, func(s *Spec) { s.Purpose = PurposeQualityPredict; s.HistorySteps = 0 }, "historySteps", core.CodeSpecInvalid},
		{"static with history", true, func(s *Spec) { s.HistorySteps = 5 }, "historySteps", core.CodeSpecInvalid},
		{"static with horizon", true, func(s *Spec) { s.HorizonSteps = 1 }, "horizonSteps", core.CodeSpecInvalid},
		{"stride negative", false, func(s *Spec) { s.Stride = -1 }, "stride", core.CodeSpecInvalid},
		{"stride too large", false, func(s *Spec) { s.Stride = MaxStride + 1 }, "stride", core.CodeSpecInvalid},
		{"missing purpose", false, func(s *Spec) { s.Purpose = "" }, "purpose", core.CodeSpecInvalid},
		{"unknown purpose", false, func(s *Spec) { s.Purpose = "forecast" }, "purpose", core.CodeSpecInvalid},
		{"long note", false, func(s *Spec) { s.Note = strings.Repeat("é", MaxNoteChars+1) }, "note", core.CodeSpecInvalid},
		{"hampel threshold negative", false, func(s *Spec) { s.Cleaning.Hampel = &Hampel{WindowMs: 10, Threshold: -1} }, "cleaning.hampel.threshold", core.CodeSpecInvalid},
		{"hampel threshold NaN", false, func(s *Spec) { s.Cleaning.Hampel = &Hampel{WindowMs: 10, Threshold: nan} }, "cleaning.hampel.threshold", core.CodeSpecInvalid},
		{"hampel threshold too high", false, func(s *Spec) { s.Cleaning.Hampel = &Hampel{WindowMs: 10, Threshold: 101} }, "cleaning.hampel.threshold", core.CodeSpecInvalid},
		{"hampel window 0 while on", false, func(s *Spec) { s.Cleaning.Hampel = &Hampel{Threshold: 3} }, "cleaning.hampel.windowMs", core.CodeSpecInvalid},
		{"hampel window too long", false, func(s *Spec) { s.Cleaning.Hampel = &Hampel{WindowMs: MaxHampelWindowMs + 1, Threshold: 3} }, "cleaning.hampel.windowMs", core.CodeSpecInvalid},
		{"maxInterp negative", false, func(s *Spec) { s.Cleaning.MaxInterpMs = i64(-1) }, "cleaning.maxInterpMs", core.CodeSpecInvalid},
		{"maxInterp too long", false, func(s *Spec) { s.Cleaning.MaxInterpMs = i64(MaxInterpLimitMs + 1) }, "cleaning.maxInterpMs", core.CodeSpecInvalid},
		{"maxDropRatio > 1", false, func(s *Spec) { s.Cleaning.MaxDropRatio = f64(1.5) }, "cleaning.maxDropRatio", core.CodeSpecInvalid},
		{"maxDropRatio Inf", false, func(s *Spec) { s.Cleaning.MaxDropRatio = &inf }, "cleaning.maxDropRatio", core.CodeSpecInvalid},
		{"valRatio negative", false, func(s *Spec) { s.Split.ValRatio = -0.1 }, "split.valRatio", core.CodeSpecInvalid},
		{"valRatio NaN", false, func(s *Spec) { s.Split.ValRatio = nan }, "split.valRatio", core.CodeSpecInvalid},
		{"testRatio > 0.8", false, func(s *Spec) { s.Split.TestRatio = 0.81 }, "split.testRatio", core.CodeSpecInvalid},
		{"ratio sum > 0.9", false, func(s *Spec) { s.Split.ValRatio, s.Split.TestRatio = 0.5, 0.45 }, "split.testRatio", core.CodeSpecInvalid},
		{"unknown mode", false, func(s *Spec) { s.Split.Mode = "random" }, "split.mode", core.CodeSpecInvalid},
		{"by_row for windows", false, func(s *Spec) { s.Split.Mode = SplitModeByRow }, "split.mode", core.CodeSpecInvalid},
		{"static by_run", true, func(s *Spec) { s.Split.Mode = SplitModeByRun }, "split.mode", core.CodeSpecInvalid},
		{"blocks too few", false, func(s *Spec) { s.Split.Mode, s.Split.Blocks = SplitModeTimeBlocks, 2 }, "split.blocks", core.CodeSpecInvalid},
		{"blocks too many", false, func(s *Spec) { s.Split.Mode, s.Split.Blocks = SplitModeTimeBlocks, MaxBlocks+1 }, "split.blocks", core.CodeSpecInvalid},
		{"blocks for by_run", false, func(s *Spec) { s.Split.Blocks = 5 }, "split.blocks", core.CodeSpecInvalid},
		{"window too large", false, func(s *Spec) { s.HistorySteps = 1 << 20 }, "historySteps", core.CodeSpecInvalid},
		{"missing unit", false, func(s *Spec) { s.Nodes[3].Unit.Unit = "" }, "nodes[3].unitContract.unit", core.CodeUnitContractInvalid},
		{"bad modelUnit", false, func(s *Spec) { s.Nodes[3].Unit.ModelUnit = " kg" }, "nodes[3].unitContract.modelUnit", core.CodeUnitContractInvalid},
		{"missing scale", false, func(s *Spec) { s.Nodes[3].Unit.Scale = nil }, "nodes[3].unitContract.scale", core.CodeUnitContractInvalid},
		{"zero scale", false, func(s *Spec) { s.Nodes[3].Unit.Scale = &zero }, "nodes[3].unitContract.scale", core.CodeUnitContractInvalid},
		{"NaN scale", false, func(s *Spec) { s.Nodes[3].Unit.Scale = &nan }, "nodes[3].unitContract.scale", core.CodeUnitContractInvalid},
		{"Inf scale", false, func(s *Spec) { s.Nodes[3].Unit.Scale = &inf }, "nodes[3].unitContract.scale", core.CodeUnitContractInvalid},
		{"missing offset", false, func(s *Spec) { s.Nodes[3].Unit.Offset = nil }, "nodes[3].unitContract.offset", core.CodeUnitContractInvalid},
		{"NaN offset", false, func(s *Spec) { s.Nodes[3].Unit.Offset = &nan }, "nodes[3].unitContract.offset", core.CodeUnitContractInvalid},
		{"negative delay", false, func(s *Spec) { s.Nodes[3].Unit.DelayMs = -1 }, "nodes[3].unitContract.delayMs", core.CodeUnitContractInvalid},
		{"delay > 1 h", false, func(s *Spec) {
			s.Nodes[0].Unit = &UnitContract{Unit: "bar", Scale: &one, Offset: &zero, DelayMs: MaxDelayMs + 1}
		}, "nodes[0].unitContract.delayMs", core.CodeUnitContractInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := specFixture()
			if c.static {
				s = specStaticFixture()
			}
			c.mut(s)
			before, _ := json.Marshal(s)
			err := s.Validate()
			if err == nil {
				t.Fatalf("no error, want a problem at %s", c.field)
			}
			ae := specAsError(t, err)
			if ae.Code != c.code {
				t.Errorf("code %s, want %s (%v)", ae.Code, c.code, err)
			}
			if !slices.Contains(specFields(ae), c.field) {
				t.Errorf("problems %v, want one at %s", ae.Problems, c.field)
			}
			if ae.Field != ae.Problems[0].Field {
				t.Errorf("Field %q is not the first problem's %q", ae.Field, ae.Problems[0].Field)
			}
			if after, _ := json.Marshal(s); string(after) != string(before) {
				t.Errorf("Validate changed the spec:\n%s\n%s", before, after)
			}
		})
	}
}

func TestSpecValidateReportsEveryProblem(t *testing.T) {
	s := specFixture()
	s.LineID = ""
	s.Nodes[2].Role = "bogus"
	s.Nodes[3].Unit.Scale = nil
	s.BeatMs = -5
	s.Split.ValRatio = 0.9
	s.Cleaning.Hampel = &Hampel{WindowMs: -1, Threshold: 200}
	ae := specAsError(t, s.Validate())
	if ae.Code != core.CodeSpecInvalid {
		t.Errorf("mixed problems: code %s, want %s", ae.Code, core.CodeSpecInvalid)
	}
	want := []string{"lineId", "nodes[2].role", "nodes[3].unitContract.scale", "beatMs",
		"cleaning.hampel.threshold", "cleaning.hampel.windowMs", "split.valRatio"}
	if got := specFields(ae); !slices.Equal(got, want) {
		t.Errorf("fields %v, want %v", got, want)
	}
	if ae.Field != "lineId" || !strings.Contains(ae.Message, "7 problem(s)") {
		t.Errorf("Field %q Message %q", ae.Field, ae.Message)
	}
}

func TestSpecUnitContractOnlyProblems(t *testing.T) {
	nan := math.NaN()
	s := specFixture()
	s.Nodes[0].Unit = &UnitContract{Unit: "", Scale: &nan}
	s.Nodes[3].Unit.Offset = nil
	ae := specAsError(t, s.Validate())
	if ae.Code != core.CodeUnitContractInvalid {
		t.Fatalf("code %s, want %s: %v", ae.Code, core.CodeUnitContractInvalid, ae)
	}
	want := []string{"nodes[0].unitContract.unit", "nodes[0].unitContract.scale",
		"nodes[0].unitContract.offset", "nodes[3].unitContract.offset"}
	if got := specFields(ae); !slices.Equal(got, want) {
		t.Errorf("fields %v, want %v", got, want)
	}
	if ae.Kind() != core.KindUnprocessable {
		t.Errorf("kind %s", ae.Kind())
	}
}

func TestSpecProblemCap(t *testing.T) {
	s := specFixture()
	for range 300 {
		s.RunIDs = append(s.RunIDs, "")
	}
	ae := specAsError(t, s.Validate())
	if len(ae.Problems) != maxSpecProblems+1 {
		t.Fatalf("%d problems, want %d", len(ae.Problems), maxSpecProblems+1)
	}
	if last := ae.Problems[maxSpecProblems]; !strings.Contains(last.Message, "more problem") {
		t.Errorf("last problem %v", last)
	}
}

func TestSpecParseUnitContractJSON(t *testing.T) {
	base := `{"lineId":"l","productId":"p","recipeId":"r","beatMs":1000,"historySteps":2,"horizonSteps":1,
	"split":{"valRatio":0,"testRatio":0,"seed":0},"purpose":"quality_predict","nodes":[{"nodeId":"a","role":"feature"},
	{"nodeId":"b","role":"target","unitContract":%s}]}`
	cases := map[string]string{
		`{"unit":"g","offset":0}`:              "nodes[1].unitContract.scale",
		`{"unit":"g","scale":0,"offset":0}`:    "nodes[1].unitContract.scale",
		`{"unit":"g","scale":1}`:               "nodes[1].unitContract.offset",
		`{"unit":"g","scale":null,"offset":1}`: "nodes[1].unitContract.scale",
		`{"scale":2,"offset":1}`:               "nodes[1].unitContract.unit",
	}
	for uc, field := range cases {
		_, err := ParseSpec([]byte(strings.Replace(base, "%s", uc, 1)))
		ae := specAsError(t, err)
		if ae.Code != core.CodeUnitContractInvalid || ae.Field != field || len(ae.Problems) != 1 {
			t.Errorf("%s: got %v, want UNIT_CONTRACT_INVALID at %s", uc, ae, field)
		}
	}
	s, err := ParseSpec([]byte(strings.Replace(base, "%s", `{"unit":"degF","modelUnit":"degC","scale":0.5555555555555556,"offset":-17.77777777777778,"delayMs":2000}`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if u := s.Nodes[1].Unit; u.ModelUnit != "degC" || *u.Scale != 0.5555555555555556 || *u.Offset != -17.77777777777778 || u.DelayMs != 2000 {
		t.Errorf("unit contract %+v", u)
	}
}

func TestSpecNormalize(t *testing.T) {
	s := specFixture()
	s.Nodes[3].Unit.ModelUnit = ""
	s.RunIDs = []string{}
	s.Normalize()
	if s.Stride != 1 || !*s.Cleaning.StateFilter || !*s.Cleaning.Range ||
		*s.Cleaning.Hampel != (Hampel{WindowMs: 5000, Threshold: 3}) || *s.Cleaning.MaxInterpMs != 3000 ||
		*s.Cleaning.MaxDropRatio != 0.3 || s.Split.Mode != SplitModeByRun || s.Split.Blocks != 0 ||
		s.Nodes[3].Unit.ModelUnit != "g" || s.RunIDs != nil {
		b, _ := json.Marshal(s)
		t.Fatalf("defaults not filled: %s", b)
	}
	once, _ := json.Marshal(s)
	s.Normalize()
	twice, _ := json.Marshal(s)
	if string(once) != string(twice) {
		t.Errorf("Normalize not idempotent:\n%s\n%s", once, twice)
	}

	// Explicit values are kept, even "off" ones.
	f := false
	s = specFixture()
	s.Cleaning = Cleaning{StateFilter: &f, Range: &f, Hampel: &Hampel{}, MaxInterpMs: new(int64), MaxDropRatio: new(float64)}
	s.Split.Mode, s.Stride = SplitModeTimeBlocks, 7
	s.Normalize()
	if *s.Cleaning.StateFilter || *s.Cleaning.Range || *s.Cleaning.Hampel != (Hampel{}) || *s.Cleaning.MaxInterpMs != 0 ||
		*s.Cleaning.MaxDropRatio != 0 || s.Split.Blocks != DefaultBlocks || s.Stride != 7 {
		b, _ := json.Marshal(s)
		t.Errorf("explicit values changed: %s", b)
	}
	if err := s.Validate(); err != nil {
		t.Errorf("hampel off: %v", err)
	}

	// static_response: by_row; defaults of a huge beat are capped.
	s = specStaticFixture()
	s.BeatMs = 1 << 62
	s.Normalize()
	if s.Split.Mode != SplitModeByRow || s.Cleaning.Hampel.WindowMs != MaxHampelWindowMs || *s.Cleaning.MaxInterpMs != MaxInterpLimitMs {
		b, _ := json.Marshal(s)
		t.Errorf("static defaults: %s", b)
	}
	if err := s.Validate(); err != nil {
		t.Errorf("static with a huge beat: %v", err)
	}

	// An invalid beat leaves the beat-derived defaults unset.
	s = specFixture()
	s.BeatMs = 0
	s.Normalize()
	if s.Cleaning.Hampel != nil || s.Cleaning.MaxInterpMs != nil {
		t.Errorf("beat-derived defaults set for beat 0")
	}
}

func TestSpecRoundTrip(t *testing.T) {
	for _, s := range []*Spec{specFixture(), specStaticFixture()} {
		s.RunIDs = []string{"run-b", "run-a"}
		s.FromMs, s.ToMs = new(int64), new(int64)
		*s.ToMs = 1767592800000
		s.Note = "ünïcödé <&> \"quoted\"\nline 2"
		s.Split.Seed = math.MaxUint64
		s.Normalize()
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseSpec(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if !reflect.DeepEqual(got, s) {
			g, _ := json.Marshal(got)
			t.Errorf("round trip:\n%s\n%s", b, g)
		}
	}
}

func TestParseSpecStrict(t *testing.T) {
	valid, err := json.Marshal(specFixture())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ParseSpec(valid); err != nil {
		t.Fatalf("valid: %v", err)
	}
	cases := []struct {
		name, json, field, msg string
	}{
		{"empty", "  ", "$", "empty spec"},
		{"not an object", `[1]`, "$", "expected an object, got an array"},
		{"null", `null`, "$", "expected an object, got null"},
		{"unknown field", `{"lineId":"l","colour":1}`, "colour", `unknown field "colour" at line 1, column 15 (byte offset 14)`},
		{"case mismatch", `{"LineID":"l"}`, "LineID", `did you mean "lineId"?`},
		{"duplicate key", `{"lineId":"l","lineId":"m"}`, "lineId", "duplicate key"},
		{"role type", "{\"nodes\":[{},{},\n  {\"nodeId\":\"a\",\"role\":7}]}", "nodes[2].role", "expected a string, got the number 7 at line 2, column 24 (byte offset 40)"},
		{"nested unknown", `{"cleaning":{"hampel":{"window":5}}}`, "cleaning.hampel.window", "unknown field"},
		{"float for int", `{"beatMs":1.5}`, "beatMs", "expected an integer"},
		{"int overflow", `{"beatMs":9223372036854775808}`, "beatMs", "expected an integer"},
		{"negative seed", `{"split":{"seed":-1}}`, "split.seed", "non-negative integer"},
		{"float out of range", `{"split":{"valRatio":1e400}}`, "split.valRatio", "out of range"},
		{"string for bool", `{"cleaning":{"range":"yes"}}`, "cleaning.range", "expected true or false, got a string"},
		{"object for string", `{"purpose":{"a":[1,{"b":2}]}}`, "purpose", "expected a string, got an object"},
		{"null for string", `{"purpose":null}`, "purpose", "expected a string, got null"},
		{"runIds not array", `{"runIds":"r1"}`, "runIds", "expected an array"},
		{"syntax error", "{\"lineId\":\"l\",\n \"beatMs\": 10 x}", "$", "invalid JSON: invalid character 'x' after object key:value pair at line 2, column 15"},
		{"bad literal", `{"lineId": tru}`, "lineId", "invalid JSON: invalid character '}' in literal true (expecting 'e') at line 1, column 15 (byte offset 14)"},
		{"control char in string", "{\"note\":\"a\x01\"}", "note", "in string literal at line 1, column 11"},
		{"syntax in array", `{"nodes":[{"nodeId":"a",}]}`, "nodes[0]", "looking for beginning of object key string at line 1, column 25"},
		{"truncated", `{"lineId":"l","nodes":[`, "nodes", "unexpected end of JSON input"},
		{"trailing data", `{"lineId":"l"} {}`, "$", "unexpected data after the spec's JSON object at line 1, column 16"},
		{"trailing garbage", `{"lineId":"l"}]`, "$", "unexpected data after"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseSpec([]byte(c.json))
			if err == nil {
				t.Fatal("no error")
			}
			ae := specAsError(t, err)
			if ae.Code != core.CodeSpecInvalid || ae.Field != c.field || !strings.Contains(ae.Problems[0].Message, c.msg) {
				t.Errorf("got %s / %s / %q\nwant %s / %s / %q", ae.Code, ae.Field, ae.Problems[0].Message, core.CodeSpecInvalid, c.field, c.msg)
			}
		})
	}

	// Several shape problems at once.
	_, err = ParseSpec([]byte(`{"lineId":1,"productId":true,"bogus":null,"nodes":[{"role":[]}]}`))
	if got := specFields(specAsError(t, err)); !slices.Equal(got, []string{"lineId", "productId", "bogus", "nodes[0].role"}) {
		t.Errorf("fields %v", got)
	}

	// Capped.
	_, err = ParseSpec([]byte(`{"runIds":[` + strings.Repeat(`1,`, 500) + `1]}`))
	if ae := specAsError(t, err); len(ae.Problems) != maxSpecProblems+1 || ae.Problems[maxSpecProblems].Message != "stopped after 100 problems" {
		t.Errorf("cap: %d problems", len(ae.Problems))
	}

	// Too large.
	big := append([]byte(`{"note":"`), make([]byte, MaxSpecBytes)...)
	if _, err := ParseSpec(big); specAsError(t, err).Field != "$" {
		t.Errorf("too large: %v", err)
	}
}

func TestSpecRoles(t *testing.T) {
	s := &Spec{Nodes: []NodeSpec{
		{NodeID: "y2", Role: RoleTarget}, {NodeID: "x1", Role: RoleFeature}, {NodeID: "u2", Role: RoleControl},
		{NodeID: "d1", Role: RoleDisturbance}, {NodeID: "y1", Role: RoleTarget}, {NodeID: "u1", Role: RoleControl},
		{NodeID: "zz", Role: "bogus"},
	}}
	c, d, f, y := s.NodesByRole()
	if !slices.Equal(c, []string{"u2", "u1"}) || !slices.Equal(d, []string{"d1"}) || !slices.Equal(f, []string{"x1"}) || !slices.Equal(y, []string{"y2", "y1"}) {
		t.Errorf("NodesByRole %v %v %v %v", c, d, f, y)
	}
	var ids []string
	for _, n := range s.OrderedNodes() {
		ids = append(ids, n.NodeID)
	}
	if !slices.Equal(ids, []string{"u2", "u1", "d1", "x1", "y2", "y1"}) {
		t.Errorf("OrderedNodes %v", ids)
	}
}

func TestSpecExampleInjection(t *testing.T) {
	data, err := os.ReadFile("../../examples/specs/injection.json")
	if err != nil {
		t.Fatal(err)
	}
	s, err := ParseSpec(data)
	if err != nil {
		t.Fatalf("examples/specs/injection.json: %v", err)
	}
	if s.LineID != "line-injection-01" || s.ProductID != "product-injection-a" || s.RecipeID != "recipe-injection-a" ||
		s.Purpose != PurposeMPCSurrogate || s.BeatMs != 1000 || s.HistorySteps != 30 || s.HorizonSteps != 10 {
		t.Errorf("example: %+v", s)
	}
	c, d, f, y := s.NodesByRole()
	if !slices.Equal(c, []string{"hold_pressure", "hold_time", "melt_temperature_setpoint"}) ||
		!slices.Equal(d, []string{"ambient_temperature", "material_batch_factor"}) ||
		!slices.Equal(f, []string{"melt_temperature", "cavity_pressure"}) ||
		!slices.Equal(y, []string{"part_weight", "flash_rate", "sink_rate"}) {
		t.Errorf("roles %v %v %v %v", c, d, f, y)
	}
	// The example is fully explicit: normalizing changes nothing.
	var raw Spec
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&raw, s) {
		t.Errorf("example is not normalized")
	}
	// 12 runs → 2 val, 2 test.
	ids := make([]string, 12)
	for i := range ids {
		ids[i] = "run-" + string(rune('a'+i))
	}
	rs, err := SplitRuns(ids, s.Split.ValRatio, s.Split.TestRatio, s.Split.Seed)
	if err != nil || len(rs.Train) != 8 || len(rs.Val) != 2 || len(rs.Test) != 2 {
		t.Errorf("split %v %v", rs, err)
	}
}

func FuzzParseSpec(f *testing.F) {
	if data, err := os.ReadFile("../../examples/specs/injection.json"); err == nil {
		f.Add(data)
	}
	for _, s := range []*Spec{specFixture(), specStaticFixture()} {
		b, _ := json.Marshal(s)
		f.Add(b)
	}
	tb := specFixture()
	tb.Split.Mode = SplitModeTimeBlocks
	tb.RunIDs = []string{"r1", "r2"}
	b, _ := json.Marshal(tb)
	f.Add(b)
	for _, s := range []string{
		``, `{}`, `null`, `[]`, `{"lineId":1}`, `{"nodes":[{"role":7}]}`, `{"a":1}{"b":2}`,
		`{"lineId":"l","lineId":"m"}`, `{"LineID":"l"}`, `{"beatMs":1e400}`, `{"split":{"seed":-1}}`,
		`{"nodes":[{"nodeId":"a","role":"target","unitContract":{"unit":"g","scale":0,"offset":0}}]}`,
		`{"runIds":[],"note":"\u00e9\ud800"}`, `{"note":"` + "\xff\xfe" + `"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSpec(data)
		if err != nil {
			var ae *core.Error
			if !errors.As(err, &ae) || len(ae.Problems) == 0 || (ae.Code != core.CodeSpecInvalid && ae.Code != core.CodeUnitContractInvalid) {
				t.Fatalf("error %v is not a spec problem list", err)
			}
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("parsed spec does not validate: %v", err)
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("marshal: %v", err)
		}
		s2, err := ParseSpec(b)
		if err != nil {
			t.Fatalf("re-parse %s: %v", b, err)
		}
		if !reflect.DeepEqual(s, s2) {
			b2, _ := json.Marshal(s2)
			t.Fatalf("round trip differs:\n%s\n%s", b, b2)
		}
		n := s.clone()
		n.Normalize()
		if !reflect.DeepEqual(n, s) {
			t.Fatalf("parsed spec is not normalized")
		}
	})
}

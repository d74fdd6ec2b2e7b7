package core

import "testing"

func TestCheckStageMove(t *testing.T) {
	cases := []struct {
		from, to, by string
		want         string // error code, "" ok
	}{
		{StageCandidate, StageShadow, "ann", ""},
		{StageCandidate, StageProduction, "ann", ""},
		{StageShadow, StageCandidate, "ann", ""},
		{StageProduction, StageShadow, "ann", ""},
		{StageProduction, StageCandidate, "ann", CodeInvalidArgument},
		{StageRetired, StageCandidate, "ann", CodeInvalidArgument},
		{StageCandidate, StageCandidate, "ann", CodeInvalidArgument},
		{"unknown", StageShadow, "ann", CodeInvalidArgument},
		{StageCandidate, StageShadow, "  ", CodeInvalidArgument},
	}
	for _, c := range cases {
		err := CheckStageMove(c.from, c.to, c.by)
		if CodeOf(err) != c.want && !(c.want == "" && err == nil) {
			t.Errorf("%s → %s by %q: %v, want %q", c.from, c.to, c.by, err, c.want)
		}
	}
}

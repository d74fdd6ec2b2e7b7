package app

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/trainer"
)

// badParams are, per native trainer, params job.submit must refuse: an
// unknown field (the error lists the known ones), a wrong type and a
// value out of range, each naming the field as params.<name>.
var badParams = []struct {
	trainer, params, field, msg string
}{
	{"linear_state_space@1", `{"ordr":2}`, "params.ordr", "the known fields are order, maxOrder, blockRows"},
	{"linear_state_space@1", `{"order":"2"}`, "params.order", "want integer"},
	{"linear_state_space@1", `{"order":1.5}`, "params.order", "want integer"},
	{"linear_state_space@1", `{"initSteps":-1}`, "params.initSteps", "below the minimum 0"},
	{"linear_state_space@1", `{"windowX0":"mean"}`, "params.windowX0", `not one of "auto", "prior", "ls"`},
	{"one_step@1", `{"order":2}`, "params.order", "the known fields are select, maxOrder, feedthrough"},
	{"one_step@1", `{"select":"yes"}`, "params.select", "want null or boolean"},
	{"one_step@1", `{"na":-2}`, "params.na", "below the minimum 0"},
	{"one_step@1", `{"lambdas":[1,-1]}`, "params.lambdas[1]", "below the minimum 0"},
	{"one_step@1", `{"nk":1.5}`, "params.nk", "want null or integer or array"},
	{"one_step@1", `{"nk":[1,-1]}`, "params.nk[1]", "below the minimum 0"},
	{"one_step@1", `{"na":2,"nk":[1,0,0,0,0,0,0,0,0]}`, "params.nk", "one per control"},
	{"linear_state_space@1", `{"order":2,"delays":[1,0,0,0,0,0,0,0,0]}`, "params.delays", "one per control"},
	{"output_error@1", `{"nf":0}`, "params.nf", "below the minimum 1"},
	{"output_error@1", `{"nk":[1,-1]}`, "params.nk[1]", "below the minimum 0"},
	{"armax@1", `{"nc":0}`, "params.nc", "below the minimum 1"},
	{"armax@1", `{"nk":[1,-1]}`, "params.nk[1]", "below the minimum 0"},
	{"box_jenkins@1", `{"nd":0}`, "params.nd", "below the minimum 1"},
	{"box_jenkins@1", `{"nc":-1}`, "params.nc", "below the minimum 0"},
	{"process_model@1", `{"structure":"fopd"}`, "params.structure", "fopdt"},
	{"process_model@1", `{"maxTau":-1}`, "params.maxTau", "below the minimum 0"},
	{"static_response@1", `{"degree":2}`, "params.degree", "the known fields are degrees, lambdas, folds"},
	{"static_response@1", `{"folds":"5"}`, "params.folds", "want integer"},
	{"static_response@1", `{"degrees":[2,11]}`, "params.degrees[1]", "above the maximum 10"},
	{"hybrid_residual@1", `{"physics":"phys-000000000000000000000000","hiden":8}`, "params.hiden", "the known fields are physics, physicsSha256, mapping"},
	{"hybrid_residual@1", `{"physics":"phys-000000000000000000000000","ensemble":true}`, "params.ensemble", "want null or integer"},
	{"hybrid_residual@1", `{"physics":"phys-000000000000000000000000","lr":-0.1}`, "params.lr", "below the minimum 0"},
	{"hybrid_residual@1", `{"physics":"phys-000000000000000000000000","mapping":{"output":{}}}`, "params.mapping.output", "the known fields are controls, disturbances, outputs"},
	{"hybrid_residual@1", `{"mapping":{}}`, "params.physics", "required"},
	{"static_forest@1", `{"trees":0}`, "params.trees", "below the minimum 1"},
	{"static_forest@1", `{"task":"ranking"}`, "params.task", "classification"},
	{"narx_mlp@1", `{"na":0}`, "params.na", "below the minimum 1"},
	{"narx_mlp@1", `{"hidden":[32,0]}`, "params.hidden[1]", "below the minimum 1"},
	{"neural_state_space@1", `{"order":0}`, "params.order", "below the minimum 1"},
	{"neural_state_space@1", `{"hidden":[16,0]}`, "params.hidden[1]", "below the minimum 1"},
	{"neural_state_space@1", `{"linearInit":"yes"}`, "params.linearInit", "want null or boolean"},
}

// TestJobSubmitRefusesBadParams: job.submit validates a native trainer's
// params against its schema before queueing (nothing is queued), and so
// does job.retry for a job queued before the rule; valid params and an
// external trainer's params (not validated) are accepted.
func TestJobSubmitRefusesBadParams(t *testing.T) {
	a, r, _, ds := jobApp(t)
	ctx := context.Background()
	covered := map[string]bool{}
	for _, c := range badParams {
		covered[c.trainer] = true
		_, err := a.JobSubmit(ctx, engineer, JobSubmitRequest{DatasetID: ds, Trainer: c.trainer, Params: json.RawMessage(c.params)})
		checkParamErr(t, "submit "+c.trainer+" "+c.params, err, c.field, c.msg)
	}
	for _, tr := range trainers.All() {
		if !covered[tr.Ref()] {
			t.Errorf("no bad params case for %s", tr.Ref())
		}
	}
	if js, _ := a.JobList(ctx, admin, JobListRequest{}); js.Count != 0 {
		t.Fatalf("%d jobs queued with bad params", js.Count)
	}

	for _, ok := range []struct{ trainer, params string }{
		{"linear_state_space@1", `{"order":2,"refine":false,"windowX0":"ls"}`},
		{"one_step@1", `{"select":false,"na":2,"nb":2,"nk":1,"lambda":0.5}`},
		{"static_response@1", `{"degrees":[1,2],"gp":null}`},
		{"linear_state_space@1", ``},
	} {
		if _, err := a.JobSubmit(ctx, engineer, JobSubmitRequest{DatasetID: ds, Trainer: ok.trainer, Params: json.RawMessage(ok.params)}); err != nil {
			t.Errorf("submit %s %s: %v", ok.trainer, ok.params, err)
		}
	}

	// A job queued around job.submit (before the rule) is refused at retry.
	old, err := r.Submit(ctx, jobs.SubmitRequest{DatasetID: ds, TrainerRef: "linear_state_space@1", Params: json.RawMessage(`{"ordr":3}`), CreatedBy: "eve"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = a.JobRetry(ctx, engineer, JobRequest{ID: old.ID})
	checkParamErr(t, "retry", err, "params.ordr", "unknown field")
}

func checkParamErr(t *testing.T, what string, err error, field, msg string) {
	t.Helper()
	var ae *core.Error
	if !errors.As(err, &ae) || ae.Code != core.CodeInvalidArgument || ae.Field != field || !strings.Contains(ae.Message, msg) {
		t.Errorf("%s: %v, want %s on %s containing %q", what, err, core.CodeInvalidArgument, field, msg)
	}
}

// TestTrainerShow: trainer.show answers a native trainer's kind, formats
// and param schema (by reference, or by name for its only version), an
// unknown one is not found; trainer.list names every native trainer's
// params.
func TestTrainerShow(t *testing.T) {
	a, _, _, _ := jobApp(t)
	ctx := context.Background()
	for _, name := range []string{"hybrid_residual@1", "hybrid_residual"} {
		got, err := a.TrainerShow(ctx, viewer, TrainerShowRequest{Name: name})
		if err != nil || got.Name != "hybrid_residual@1" || got.Kind != TrainerNative || !slices.Equal(got.Formats, []string{trainers.FormatHybrid}) ||
			got.Params == nil || got.Params.Properties["physics"] == nil || !slices.Contains(got.Params.Required, "physics") {
			t.Fatalf("show %s: %+v %v", name, got, err)
		}
	}
	if _, err := a.TrainerShow(ctx, viewer, TrainerShowRequest{Name: "arx@1"}); core.CodeOf(err) != core.CodeNotFound || !strings.Contains(err.Error(), "one_step@1") {
		t.Fatalf("unknown trainer: %v", err)
	}
	if _, err := a.TrainerShow(ctx, viewer, TrainerShowRequest{Name: "ext:nobody"}); core.CodeOf(err) != core.CodeNotFound {
		t.Fatalf("unregistered external trainer: %v", err)
	}
	l, err := a.TrainerList(ctx, viewer, TrainerListRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range trainers.All() {
		want := trainer.PropertyNames(tr.(trainer.Described).ParamSchema())
		if !slices.Equal(l.NativeParams[tr.Ref()], want) {
			t.Errorf("list: params of %s = %v, want %v", tr.Ref(), l.NativeParams[tr.Ref()], want)
		}
	}
}

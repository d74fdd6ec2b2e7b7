package app

import (
	"context"
	"encoding/json"
	"sort"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/trainer"
)

// Native trainers' param schemas: job.submit and job.retry validate a
// job's params against them before queueing it; trainer.show presents
// them. External trainers (ext:NAME, exec:PATH) define their own params,
// which are not validated here.

// nativeTrainer returns the native trainer ref names: the runner's when
// this process runs the job system, otherwise the built-in list.
func (a *App) nativeTrainer(ref string) (trainer.Trainer, bool) {
	if a.d.Runner != nil {
		return a.d.Runner.Trainer(ref)
	}
	for _, t := range trainers.All() {
		if t.Ref() == ref {
			return t, true
		}
	}
	return nil, false
}

func (a *App) nativeRefs() []string {
	if a.d.Runner != nil {
		return a.d.Runner.TrainerRefs()
	}
	var out []string
	for _, t := range trainers.All() {
		out = append(out, t.Ref())
	}
	sort.Strings(out)
	return out
}

// paramSchema is the param schema of native trainer ref (nil when it
// publishes none).
func (a *App) paramSchema(ref string) *jsonschema.Schema {
	t, ok := a.nativeTrainer(ref)
	if !ok {
		return nil
	}
	if d, ok := t.(trainer.Described); ok {
		return d.ParamSchema()
	}
	return nil
}

// checkParams validates the params of a job of native trainer ref
// against its schema (AML_INVALID_ARGUMENT naming params.<field>).
func (a *App) checkParams(ref string, params json.RawMessage) error {
	s := a.paramSchema(ref)
	if s == nil {
		return nil
	}
	return trainer.ValidateParams(ref, s, params)
}

// checkDatasetParams lets native trainer ref check its params against
// dataset d (trainer.DatasetParamsChecker), when the dataset's manifest is
// on this machine (otherwise the trainer refuses the job when it runs).
func (a *App) checkDatasetParams(ref string, params json.RawMessage, d core.Dataset) error {
	t, ok := a.nativeTrainer(ref)
	if !ok {
		return nil
	}
	c, ok := t.(trainer.DatasetParamsChecker)
	if !ok {
		return nil
	}
	m, err := dataset.LoadManifest(a.d.DataDir, d)
	if err != nil {
		return nil
	}
	if err := c.CheckDatasetParams(params, m); err != nil {
		if core.CodeOf(err) == core.CodeInvalidArgument {
			return err
		}
		return core.FieldErrorf(core.CodeInvalidArgument, "params", "params of %s: %v", ref, err)
	}
	return nil
}

// TrainerShowRequest names a trainer.
type TrainerShowRequest struct {
	Name string `json:"name" jsonschema:"trainer reference: a native trainer (e.g. one_step@1; one_step names its only version) or a registered external one, ext:NAME"`
}

// Validate requires the name.
func (r *TrainerShowRequest) Validate() error { return required("name", r.Name) }

// TrainerShowResponse describes a trainer.
type TrainerShowResponse struct {
	Name    string   `json:"name" jsonschema:"the trainer reference jobs name it by"`
	Kind    string   `json:"kind" jsonschema:"native (in-process) or external (a registered program, ext:NAME)"`
	Summary string   `json:"summary,omitempty" jsonschema:"what the trainer fits"`
	Formats []string `json:"formats" jsonschema:"model formats of the artifacts it writes (native trainers)"`
	// Params is the JSON schema of a native trainer's params.
	Params *jsonschema.Schema `json:"params,omitempty" jsonschema:"JSON schema of the params (native trainers; job.submit validates against it; external trainers' params are not validated)"`
	// ParamNames keeps the params' declared order, which a decoded
	// schema loses.
	ParamNames []string `json:"paramNames" jsonschema:"the param names in their declared order"`
	// External is an external trainer's registration.
	External *core.ExtTrainer `json:"external,omitempty" jsonschema:"the registration of an external trainer"`
}

// Trainer kinds (TrainerShowResponse.Kind).
const (
	TrainerNative   = "native"
	TrainerExternal = "external"
)

// TrainerShow describes a native trainer (summary, formats, param
// schema) or a registered external one.
func (a *App) TrainerShow(ctx context.Context, p Principal, req TrainerShowRequest) (TrainerShowResponse, error) {
	return run(ctx, a, p, &opTrainerShow, req, func(ctx context.Context, p Principal, req TrainerShowRequest) (TrainerShowResponse, error) {
		if name, ok := jobs.IsExt(req.Name); ok {
			s, err := a.trainerStore()
			if err != nil {
				return TrainerShowResponse{}, err
			}
			t, err := s.GetTrainer(ctx, name)
			if err != nil {
				return TrainerShowResponse{}, err
			}
			return TrainerShowResponse{Name: req.Name, Kind: TrainerExternal, Formats: []string{}, ParamNames: []string{}, External: &t}, nil
		}
		ref := req.Name
		t, ok := a.nativeTrainer(ref)
		if !ok && !strings.Contains(ref, "@") {
			var match []string
			for _, r := range a.nativeRefs() {
				if strings.HasPrefix(r, ref+"@") {
					match = append(match, r)
				}
			}
			if len(match) == 1 {
				ref = match[0]
				t, ok = a.nativeTrainer(ref)
			}
		}
		if !ok {
			return TrainerShowResponse{}, core.FieldErrorf(core.CodeNotFound, "name", "no trainer %q: the native ones are %s; external ones are named ext:NAME (aml trainer list)",
				req.Name, strings.Join(a.nativeRefs(), ", "))
		}
		out := TrainerShowResponse{Name: ref, Kind: TrainerNative, Formats: []string{}, ParamNames: []string{}}
		if d, ok := t.(trainer.Described); ok {
			out.Summary, out.Formats, out.Params = d.Summary(), d.Formats(), d.ParamSchema()
			out.ParamNames = trainer.PropertyNames(out.Params)
		}
		return out, nil
	})
}

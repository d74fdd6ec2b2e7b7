package app

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
)

// Batch context from the plant: recipe versions (content-hashed
// parameter sets) and run events (which version a run ran, when, confirmed
// by whom). A dataset's lineage verifies when every run it uses has a
// confirmed context segment that names its recipe version's content
// (docs/lineage.md).

var (
	opRecipePut = Op{Name: "recipe.put", Act: auth.ActDataset, Summary: "Register a recipe's parameters as its next version (content-hashed; the same content is the same version)"}
	opRunEvents = Op{Name: "run.events", Act: auth.ActIngest, Summary: "Record a plant's batch records: each run's recipe version, end and who confirmed it (audited; the evidence a dataset's lineage verifies on)"}
)

func batchOps() []*Op {
	return []*Op{
		bind(&opRecipePut, (*App).RecipePut),
		bind(&opRunEvents, (*App).RunEvents),
	}
}

// RecipePutRequest registers a recipe version.
type RecipePutRequest struct {
	Line    string         `json:"line" yaml:"line" jsonschema:"line id"`
	Product string         `json:"product" yaml:"product" jsonschema:"product id"`
	Recipe  string         `json:"recipe" yaml:"recipe" jsonschema:"recipe id"`
	Params  map[string]any `json:"params" yaml:"params" jsonschema:"the recipe's parameters (setpoints, limits, …): hashed as canonical JSON"`
}

// Validate requires the ids and some parameters.
func (r *RecipePutRequest) Validate() error {
	if err := checkContext(r.Line, r.Product, r.Recipe, ""); err != nil {
		return err
	}
	if err := firstErr(required("line", r.Line), required("product", r.Product), required("recipe", r.Recipe)); err != nil {
		return err
	}
	if len(r.Params) == 0 {
		return core.FieldErrorf(core.CodeInvalidArgument, "params", "a recipe version needs its parameters")
	}
	return nil
}

// RecipePut registers the parameters as the recipe's next version (or
// answers the existing version with the same content hash).
func (a *App) RecipePut(ctx context.Context, p Principal, req RecipePutRequest) (core.RecipeVersion, error) {
	return run(ctx, a, p, &opRecipePut, req, func(ctx context.Context, p Principal, req RecipePutRequest) (core.RecipeVersion, error) {
		if err := p.Allow(auth.ActDataset, req.Line); err != nil {
			return core.RecipeVersion{}, err
		}
		if err := a.d.Store.EnsureRecipe(ctx, core.Recipe{ID: req.Recipe, LineID: req.Line, ProductID: req.Product}); err != nil {
			return core.RecipeVersion{}, err
		}
		return a.d.Store.PutRecipeVersion(ctx, req.Recipe, req.Params)
	})
}

// RunEvent is one batch record.
type RunEvent struct {
	Run           string   `json:"run" jsonschema:"run id (as ingested)"`
	Recipe        string   `json:"recipe" jsonschema:"recipe id"`
	RecipeVersion int      `json:"recipeVersion" jsonschema:"the recipe version the run ran (registered with recipe.put)"`
	Start         Instant  `json:"start" jsonschema:"when the recipe version took effect (epoch ms or RFC 3339)"`
	End           *Instant `json:"end,omitempty" jsonschema:"when the run ended (ends an active run)"`
	ConfirmedBy   string   `json:"confirmedBy" jsonschema:"the person who confirmed the record at the plant"`
}

// RunEventsRequest is a batch of run events of one line.
type RunEventsRequest struct {
	Line   string     `json:"line" jsonschema:"line id"`
	Events []RunEvent `json:"events" jsonschema:"the records (1 to 10 000)"`
}

// Validate checks every record.
func (r *RunEventsRequest) Validate() error {
	if err := required("line", r.Line); err != nil {
		return err
	}
	if err := core.CheckID("line", r.Line); err != nil {
		return err
	}
	if len(r.Events) == 0 || len(r.Events) > MaxLineNodes {
		return core.FieldErrorf(core.CodeInvalidArgument, "events", "1 to %d events, not %d", MaxLineNodes, len(r.Events))
	}
	for i, e := range r.Events {
		f := "events[" + strconv.Itoa(i) + "]"
		for _, v := range [...][2]string{{"run", e.Run}, {"recipe", e.Recipe}} {
			if err := core.CheckID(f+"."+v[0], v[1]); err != nil {
				return err
			}
		}
		if e.RecipeVersion < 1 {
			return core.FieldErrorf(core.CodeInvalidArgument, f+".recipeVersion", "recipe versions start at 1")
		}
		if strings.TrimSpace(e.ConfirmedBy) == "" {
			return core.FieldErrorf(core.CodeInvalidArgument, f+".confirmedBy", "who confirmed the record is required")
		}
		if err := core.CheckName(f+".confirmedBy", e.ConfirmedBy); err != nil {
			return err
		}
		if e.End != nil && *e.End < e.Start {
			return core.FieldErrorf(core.CodeInvalidArgument, f+".end", "run %q: the record ends before it starts", e.Run)
		}
	}
	return nil
}

// RunEventsResponse is what was recorded, in the request's order.
type RunEventsResponse struct {
	Runs     []core.Run            `json:"runs"`
	Segments []core.ContextSegment `json:"segments"`
}

// RunEvents records each event in its own audited transaction, stopping
// at the first refusal (the ones before it are recorded: the response
// says which).
func (a *App) RunEvents(ctx context.Context, p Principal, req RunEventsRequest) (RunEventsResponse, error) {
	return run(ctx, a, p, &opRunEvents, req, func(ctx context.Context, p Principal, req RunEventsRequest) (RunEventsResponse, error) {
		out := RunEventsResponse{Runs: []core.Run{}, Segments: []core.ContextSegment{}}
		if err := p.Allow(auth.ActIngest, req.Line); err != nil {
			return out, err
		}
		for i, e := range req.Events {
			ev := core.RunEvent{RunID: e.Run, LineID: req.Line, RecipeID: e.Recipe, RecipeVersion: e.RecipeVersion, StartMs: int64(e.Start),
				ConfirmedBy: e.ConfirmedBy, ConfirmedAt: a.o.Now().UTC()}
			if e.End != nil {
				end := int64(*e.End)
				ev.EndMs = &end
			}
			err := a.checkRun(ctx, p, req.Line, e.Run)
			var (
				r   core.Run
				seg core.ContextSegment
			)
			if err == nil {
				r, seg, err = a.d.Store.RecordRunEvent(ctx, p.Name, ev)
			}
			if err != nil {
				var ae *core.Error
				if errors.As(err, &ae) && ae.Field != "" && ae.Field != "lineId" {
					ae.Field = "events[" + strconv.Itoa(i) + "]." + ae.Field
				}
				return out, err
			}
			out.Runs, out.Segments = append(out.Runs, r), append(out.Segments, seg)
		}
		return out, nil
	})
}

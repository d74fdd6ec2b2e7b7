package web

import (
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/ingest"
	"gopkg.in/yaml.v3"
)

// Batch records: a recipe's parameters as its next version (recipe.put)
// and the runs' records — which recipe version each ran, its end, who
// confirmed it (run.events) — the evidence a dataset's lineage verifies
// on, as aml recipe put and aml runs events read them.

func batchActions(s *server) []action {
	return []action{
		{Route: "POST /ui/batch/recipe", Op: "recipe.put", h: s.recipePut},
		{Route: "POST /ui/batch/events", Op: "run.events", h: s.runEvents},
	}
}

func (s *server) batchPage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	q := r.URL.Query()
	return s.renderBatch(w, r, p, http.StatusOK, map[string]any{"Form": url.Values{"line": {q.Get("line")}}})
}

func (s *server) renderBatch(w http.ResponseWriter, r *http.Request, p auth.Principal, status int, data map[string]any) error {
	lines, err := s.app.LineList(r.Context(), p, app.LineListRequest{})
	if err != nil {
		return err
	}
	data["Title"], data["Lines"] = "Batch records", lines.Items
	data["CanRecipe"], data["CanEvents"] = auth.RoleAllows(p.Role, auth.ActDataset), auth.RoleAllows(p.Role, auth.ActIngest)
	if _, ok := data["Form"]; !ok {
		data["Form"] = url.Values{}
	}
	s.render(w, r, status, "batch", &p, data)
	return nil
}

// formText is a pasted text field, or the uploaded file of the same form
// when one was chosen.
func formText(r *http.Request, field, upload string) (string, error) {
	text := r.PostFormValue(field)
	if f, _, err := r.FormFile(upload); err == nil {
		b, err := io.ReadAll(f)
		_ = f.Close()
		if err != nil {
			return "", bodyErr(err)
		}
		if strings.TrimSpace(string(b)) != "" {
			text = string(b)
		}
	}
	return text, nil
}

// recipePut registers the pasted or uploaded parameters (a YAML or JSON
// object) as the recipe's next version.
func (s *server) recipePut(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	text, err := formText(r, "params", "upload")
	if err != nil {
		return err
	}
	req := app.RecipePutRequest{Line: strings.TrimSpace(r.PostFormValue("line")), Product: strings.TrimSpace(r.PostFormValue("product")), Recipe: strings.TrimSpace(r.PostFormValue("recipe"))}
	form := url.Values{"line": {req.Line}, "product": {req.Product}, "recipe": {req.Recipe}, "params": {text}}
	if err := yaml.Unmarshal([]byte(text), &req.Params); err != nil {
		err = core.FieldErrorf(core.CodeInvalidArgument, "params", "not a parameter object: %v", err)
		return s.renderBatch(w, r, p, auth.StatusOf(err), map[string]any{"Form": form, "RecipeErr": toFormError(p, err)})
	}
	v, err := invoke[core.RecipeVersion](s, r, p, "recipe.put", &req)
	if err != nil {
		return s.renderBatch(w, r, p, auth.StatusOf(err), map[string]any{"Form": form, "RecipeErr": toFormError(p, err)})
	}
	return s.renderBatch(w, r, p, http.StatusOK, map[string]any{"Form": form, "Recipe": v})
}

// runEvents records the pasted or uploaded batch records (CSV
// run,recipe,recipe_version,start,end,confirmed_by, or JSON).
func (s *server) runEvents(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	text, err := formText(r, "events", "upload")
	if err != nil {
		return err
	}
	line := strings.TrimSpace(r.PostFormValue("line"))
	form := url.Values{"line": {line}, "events": {text}}
	name := "batch.csv"
	if t := strings.TrimSpace(text); strings.HasPrefix(t, "[") || strings.HasPrefix(t, "{") {
		name = "batch.json"
	}
	req := app.RunEventsRequest{Line: line}
	recs, err := ingest.ParseBatchRecords(name, []byte(text))
	if err == nil {
		for _, b := range recs {
			ev := app.RunEvent{Run: b.Run, Recipe: b.Recipe, RecipeVersion: b.RecipeVersion, Start: app.Instant(b.StartMs), ConfirmedBy: b.ConfirmedBy}
			if b.EndMs != nil {
				end := app.Instant(*b.EndMs)
				ev.End = &end
			}
			req.Events = append(req.Events, ev)
		}
		var out any
		if out, err = invokeAny(s, r, p, "run.events", &req); err == nil {
			return s.renderBatch(w, r, p, http.StatusOK, map[string]any{"Form": form, "Events": out, "EventCount": len(req.Events)})
		}
	}
	return s.renderBatch(w, r, p, auth.StatusOf(err), map[string]any{"Form": form, "EventsErr": toFormError(p, err)})
}

// invokeAny runs an op whose answer is only shown.
func invokeAny(s *server, r *http.Request, p auth.Principal, name string, req any) (any, error) {
	op, ok := app.Lookup(name)
	if !ok {
		return nil, core.Errorf(core.CodeInternal, "no app op %q", name)
	}
	return op.Invoke(r.Context(), s.app, p, req)
}

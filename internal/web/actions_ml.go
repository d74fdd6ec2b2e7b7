package web

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/google/jsonschema-go/jsonschema"
)

// ---- dataset build

// datasetRoles are the roles a node of a spec may take ("" leaves it out).
var datasetRoles = []string{"", "control", "disturbance", "feature", "target"}

// datasetNewPage is the dataset form built from the node catalog of the
// chosen line (node.list): a role per node, the window (beat, history,
// horizon, stride), cleaning and split; static/forms.js checks the spec
// as it is edited (POST /ui/datasets/check).
func (s *server) datasetNewPage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	q := r.URL.Query()
	form := url.Values{"line": {q.Get("line")}, "purpose": {"mpc_surrogate"}, "beat": {"1s"}, "historySteps": {"10"}, "horizonSteps": {"5"}, "stride": {"1"},
		"valRatio": {"0.2"}, "testRatio": {"0.2"}, "seed": {"1"}, "mode": {"time_blocks"}}
	return s.renderDatasetForm(w, r, p, http.StatusOK, form, nil, nil)
}

func (s *server) renderDatasetForm(w http.ResponseWriter, r *http.Request, p auth.Principal, status int, form url.Values, ferr *formError, built *app.DatasetBuildResponse) error {
	ctx := r.Context()
	lines, err := s.app.LineList(ctx, p, app.LineListRequest{})
	if err != nil {
		return err
	}
	line := form.Get("line")
	var nodes []core.Node
	var products, recipes []string
	if line != "" {
		nl, err := s.app.NodeList(ctx, p, app.NodeListRequest{Line: line})
		if err != nil {
			return err
		}
		nodes = nl.Items
		rl, err := s.app.RunList(ctx, p, app.RunListRequest{Line: line})
		if err != nil {
			return err
		}
		pr, rc := map[string]bool{}, map[string]bool{}
		for _, run := range rl.Items {
			pr[run.ProductID], rc[run.RecipeID] = true, true
		}
		products, recipes = sortedKeys(pr), sortedKeys(rc)
		if form.Get("product") == "" && len(products) == 1 {
			form.Set("product", products[0])
		}
		if form.Get("recipe") == "" && len(recipes) == 1 {
			form.Set("recipe", recipes[0])
		}
	}
	s.render(w, r, status, "datasetnew", &p, map[string]any{"Title": "New dataset", "Lines": lines.Items, "Line": line, "Nodes": nodes, "Roles": datasetRoles,
		"Products": products, "Recipes": recipes, "Form": form, "Err": ferr, "Built": built, "CanBuild": auth.RoleAllows(p.Role, auth.ActDataset)})
	return nil
}

// datasetRequest turns the form into dataset.build's request through the
// request's own JSON decoding (the dataset's strict spec parser, as the
// API and a spec file are read).
func datasetRequest(form url.Values) (app.DatasetBuildRequest, error) {
	var req app.DatasetBuildRequest
	b, err := datasetJSON(form)
	if err != nil {
		return req, err
	}
	if err := json.Unmarshal(b, &req); err != nil {
		var ae *core.Error
		if errors.As(err, &ae) {
			return req, ae
		}
		return req, core.FieldErrorf(core.CodeInvalidArgument, "spec", "%v", err)
	}
	return req, nil
}

// datasetJSON is the form as dataset.build's JSON request body: the
// spec's fields from the form's, numbers parsed (a field that is not a
// number is refused here, naming it).
func datasetJSON(form url.Values) ([]byte, error) {
	spec := map[string]any{"lineId": strings.TrimSpace(form.Get("line")), "productId": strings.TrimSpace(form.Get("product")), "recipeId": strings.TrimSpace(form.Get("recipe")),
		"purpose": form.Get("purpose"), "note": form.Get("note")}
	if b := strings.TrimSpace(form.Get("beat")); b != "" {
		spec["beat"] = b
	}
	num := func(name string, v string, integer bool) (any, error) {
		v = strings.TrimSpace(v)
		if integer {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, core.FieldErrorf(core.CodeInvalidArgument, name, "%s: want a whole number, got %q", name, v)
			}
			return n, nil
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, name, "%s: want a number, got %q", name, v)
		}
		return f, nil
	}
	for _, k := range []string{"historySteps", "horizonSteps", "stride"} {
		if form.Get(k) == "" && k == "stride" {
			continue
		}
		v, err := num(k, form.Get(k), true)
		if err != nil {
			return nil, err
		}
		spec[k] = v
	}
	split := map[string]any{}
	for _, k := range []string{"valRatio", "testRatio", "seed"} {
		v, err := num("split."+k, form.Get(k), k == "seed")
		if err != nil {
			return nil, err
		}
		split[k] = v
	}
	if m := form.Get("mode"); m != "" {
		split["mode"] = m
	}
	spec["split"] = split
	if v := strings.TrimSpace(form.Get("maxDropRatio")); v != "" {
		f, err := num("cleaning.maxDropRatio", v, false)
		if err != nil {
			return nil, err
		}
		spec["cleaning"] = map[string]any{"maxDropRatio": f}
	}
	var nodes []map[string]any
	var keys []string
	for k := range form {
		if strings.HasPrefix(k, "role.") {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if role := form.Get(k); role != "" {
			nodes = append(nodes, map[string]any{"nodeId": strings.TrimPrefix(k, "role."), "role": role})
		}
	}
	spec["nodes"] = nodes
	b, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "encode the spec")
	}
	return b, nil
}

// datasetCheck runs the application's dataset.check on the form's spec
// (the strict parser, dataset.build's validation and work budget; nothing
// read or stored) and answers its JSON for static/forms.js. A field that
// is not a number is the form's own refusal, answered the same way.
func (s *server) datasetCheck(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if err := r.ParseForm(); err != nil {
		return bodyErr(err)
	}
	var out app.DatasetCheckResponse
	b, err := datasetJSON(r.PostForm)
	if err == nil {
		var req app.DatasetCheckRequest
		if err = json.Unmarshal(b, &req); err == nil {
			out, err = invoke[app.DatasetCheckResponse](s, r, p, "dataset.check", &req)
		}
	}
	if err != nil {
		out = app.CheckAnswer(err)
		if fe := toFormError(p, err); fe != nil {
			out.Message = fe.Message
		}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	return json.NewEncoder(w).Encode(out)
}

// datasetBuild runs dataset.build and shows what was built (or why not)
// on the form.
func (s *server) datasetBuild(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if err := r.ParseForm(); err != nil {
		return bodyErr(err)
	}
	req, err := datasetRequest(r.PostForm)
	if err == nil {
		var res app.DatasetBuildResponse
		if res, err = invoke[app.DatasetBuildResponse](s, r, p, "dataset.build", &req); err == nil {
			return s.renderDatasetForm(w, r, p, http.StatusOK, r.PostForm, nil, &res)
		}
	}
	return s.renderDatasetForm(w, r, p, auth.StatusOf(err), r.PostForm, toFormError(p, err), nil)
}

// ---- jobs

// paramField is one trainer param as a form field, from its JSON schema.
type paramField struct {
	Name, Type, Description, Default, Value string
	Enum                                    []string
	Min, Max                                string
	Multi                                   bool // arrays and objects: JSON in a textarea
}

func paramFields(schema *jsonschema.Schema, names []string, form url.Values) []paramField {
	if schema == nil {
		return nil
	}
	var out []paramField
	for _, n := range names {
		ps := schema.Properties[n]
		if ps == nil {
			continue
		}
		f := paramField{Name: n, Type: ps.Type, Description: ps.Description, Value: form.Get("param." + n)}
		if f.Type == "" && len(ps.Types) > 0 {
			f.Type = ps.Types[0]
		}
		if len(ps.Default) > 0 {
			f.Default = string(ps.Default)
			var str string
			if json.Unmarshal(ps.Default, &str) == nil {
				f.Default = str
			}
		}
		for _, e := range ps.Enum {
			f.Enum = append(f.Enum, strings.Trim(mustJSON(e), `"`))
		}
		if ps.Minimum != nil {
			f.Min = strconv.FormatFloat(*ps.Minimum, 'g', -1, 64)
		}
		if ps.Maximum != nil {
			f.Max = strconv.FormatFloat(*ps.Maximum, 'g', -1, 64)
		}
		f.Multi = f.Type == "array" || f.Type == "object" || f.Type == ""
		out = append(out, f)
	}
	return out
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}

// jobParams builds the params object from the param.* fields by their
// schema types (an empty field takes the trainer's default: left out).
func jobParams(fields []paramField, form url.Values) (json.RawMessage, error) {
	params := map[string]any{}
	for _, f := range fields {
		v := strings.TrimSpace(form.Get("param." + f.Name))
		if v == "" {
			continue
		}
		switch f.Type {
		case "string":
			params[f.Name] = v
		case "boolean":
			params[f.Name] = v == "true"
		default: // numbers, arrays, objects: JSON (the schema check names a wrong one)
			var x any
			if err := json.Unmarshal([]byte(v), &x); err != nil {
				return nil, core.FieldErrorf(core.CodeInvalidArgument, "params."+f.Name, "params.%s: %q is not a JSON %s", f.Name, v, or(f.Type, "value"))
			}
			params[f.Name] = x
		}
	}
	b, err := json.Marshal(params)
	return b, err
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// jobNewPage is the job form: a dataset, a trainer and the trainer's
// params as fields generated from its schema (trainer.show).
func (s *server) jobNewPage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.renderJobForm(w, r, p, http.StatusOK, r.URL.Query(), nil)
}

func (s *server) renderJobForm(w http.ResponseWriter, r *http.Request, p auth.Principal, status int, form url.Values, ferr *formError) error {
	ctx := r.Context()
	tl, err := s.app.TrainerList(ctx, p, app.TrainerListRequest{})
	if err != nil {
		return err
	}
	ds, err := s.app.DatasetList(ctx, p, app.DatasetListRequest{})
	if err != nil {
		return err
	}
	trainer := form.Get("trainer")
	if trainer == "" && len(tl.Native) > 0 {
		trainer = tl.Native[0]
	}
	var fields []paramField
	var summary string
	if trainer != "" {
		ts, err := s.app.TrainerShow(ctx, p, app.TrainerShowRequest{Name: trainer})
		if err != nil && ferr == nil {
			ferr = toFormError(p, err)
		}
		fields, summary = paramFields(ts.Params, ts.ParamNames, form), ts.Summary
	}
	s.render(w, r, status, "jobnew", &p, map[string]any{"Title": "New training job", "Trainers": tl, "Trainer": trainer, "Summary": summary, "Fields": fields,
		"Datasets": ds.Items, "Form": form, "Err": ferr, "CanSubmit": auth.RoleAllows(p.Role, auth.ActJob)})
	return nil
}

// jobSubmit runs job.submit with the generated params and sends the
// browser to the job's page, which follows it live (the event stream).
func (s *server) jobSubmit(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	if err := r.ParseForm(); err != nil {
		return bodyErr(err)
	}
	form := r.PostForm
	req := app.JobSubmitRequest{DatasetID: form.Get("datasetId"), Trainer: form.Get("trainer"), Note: form.Get("note"), GateProfile: form.Get("gateProfile")}
	if v := strings.TrimSpace(form.Get("seed")); v != "" {
		if err := app.SetParam(&req, "seed", v); err != nil {
			return s.renderJobForm(w, r, p, auth.StatusOf(err), form, toFormError(p, err))
		}
	}
	if v := strings.TrimSpace(form.Get("timeout")); v != "" {
		if err := app.SetParam(&req, "timeout", v); err != nil {
			return s.renderJobForm(w, r, p, auth.StatusOf(err), form, toFormError(p, err))
		}
	}
	if req.Trainer != "" {
		ts, err := s.app.TrainerShow(r.Context(), p, app.TrainerShowRequest{Name: req.Trainer})
		if err == nil {
			if req.Params, err = jobParams(paramFields(ts.Params, ts.ParamNames, form), form); err != nil {
				return s.renderJobForm(w, r, p, auth.StatusOf(err), form, toFormError(p, err))
			}
		}
	}
	j, err := invoke[core.Job](s, r, p, "job.submit", &req)
	if err != nil {
		return s.renderJobForm(w, r, p, auth.StatusOf(err), form, toFormError(p, err))
	}
	http.Redirect(w, r, "/ui/jobs/"+url.PathEscape(j.ID)+"?done=submitted", http.StatusSeeOther)
	return nil
}

func (s *server) jobCancel(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.jobStep(w, r, p, "job.cancel", "cancelled")
}

func (s *server) jobRetry(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.jobStep(w, r, p, "job.retry", "retried")
}

func (s *server) jobStep(w http.ResponseWriter, r *http.Request, p auth.Principal, op, done string) error {
	j, err := invoke[core.Job](s, r, p, op, &app.JobRequest{ID: r.PathValue("id")})
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/ui/jobs/"+url.PathEscape(j.ID)+"?done="+done, http.StatusSeeOther)
	return nil
}

// ---- model stage

// modelPromote moves a model to shadow or production (model.promote: the
// role rule for production, compare-and-set on the stage the page showed).
func (s *server) modelPromote(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	req := app.ModelPromoteRequest{ID: r.PathValue("id"), To: r.PostFormValue("to"), Expect: r.PostFormValue("expect"), Reason: strings.TrimSpace(r.PostFormValue("reason"))}
	m, err := invoke[core.Model](s, r, p, "model.promote", &req)
	return s.stageDone(w, r, p, m, err, "moved to "+req.To)
}

func (s *server) modelRetire(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	req := app.ModelRetireRequest{ID: r.PathValue("id"), Expect: r.PostFormValue("expect"), Reason: strings.TrimSpace(r.PostFormValue("reason"))}
	m, err := invoke[core.Model](s, r, p, "model.retire", &req)
	return s.stageDone(w, r, p, m, err, "retired")
}

// stageDone sends the browser back to the card; a refusal is shown on the
// card itself, beside the stage buttons, with its status.
func (s *server) stageDone(w http.ResponseWriter, r *http.Request, p auth.Principal, m core.Model, err error, done string) error {
	if err != nil {
		r = r.WithContext(context.WithValue(r.Context(), stageErrKey{}, toFormError(p, err)))
		if perr := s.modelPage(w, r, p); perr != nil {
			return err // no card to show it on (an unknown model): the refusal itself
		}
		return nil
	}
	http.Redirect(w, r, "/ui/models/"+url.PathEscape(m.ID)+"?done="+url.QueryEscape(done)+"#stage", http.StatusSeeOther)
	return nil
}

// stageErrKey carries a refused stage change to the model card.
type stageErrKey struct{}

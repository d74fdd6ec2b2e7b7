package web

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
)

// The twin and approver actions: a scene drafted from a model, edited,
// checked live, stored and frozen; a snapshot, trials with a field and a
// slider per move, the optimiser; a certificate requested from a trial,
// approved, revoked or executed after a confirmation page. Each is one app
// op, run through app.Lookup(op).Invoke like every action (actionRoutes).

func init() {
	funcs["sub"] = func(a, b float64) float64 { return a - b }
}

// twinActions are the twin and approver actions (appended to
// actionRoutes).
func twinActions(s *server) []action {
	return []action{
		{Route: "POST /ui/scenes/draft", Op: "scene.draft", Read: true, h: s.sceneDraft},
		{Route: "POST /ui/scenes/check", Op: "scene.check", Read: true, h: s.sceneCheck},
		{Route: "POST /ui/scenes", Op: "scene.put", h: s.scenePut},
		{Route: "POST /ui/scenes/{id}/{version}/freeze", Op: "scene.freeze", h: s.sceneFreeze},
		{Route: "POST /ui/channels", Op: "channel.set", h: s.channelSet},
		{Route: "POST /ui/snapshots", Op: "snapshot.take", h: s.snapshotTake},
		{Route: "POST /ui/trials", Op: "trial.run", h: s.trialRun},
		{Route: "POST /ui/optimize", Op: "optimize", h: s.optimizeAction},
		{Route: "POST /ui/certificates", Op: "cert.issue", h: s.certIssue},
		{Route: "POST /ui/certificates/{id}/execute", Op: "cert.execute", h: s.certExecute},
	}
}

// twinAndBatchActions are the actions of this file and actions_batch.go.
func twinAndBatchActions(s *server) []action { return append(batchActions(s), twinActions(s)...) }

// twinPages are the GET pages of those actions.
func twinPages(s *server) map[string]func(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return map[string]func(w http.ResponseWriter, r *http.Request, p auth.Principal) error{
		"GET /ui/scenes/new":                 s.sceneEditPage,
		"GET /ui/snapshots/{id}":             s.snapshotPage,
		"GET /ui/certificates/{id}/confirm":  s.certConfirmPage,
		"GET /ui/scenes/{id}/{version}/edit": s.sceneEditStored,
		"GET /ui/batch":                      s.batchPage,
	}
}

// ---- scenes

// sceneEditPage is the scene editor: a model to draft from, the scene
// file (YAML or JSON) in a text area checked live, save.
func (s *server) sceneEditPage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	q := r.URL.Query()
	return s.renderSceneEdit(w, r, p, http.StatusOK, url.Values{"model": {q.Get("model")}, "id": {q.Get("id")}}, nil, nil)
}

// sceneEditStored opens a stored scene (with the objective stored with
// it) in the editor.
func (s *server) sceneEditStored(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	sh, err := s.app.SceneShow(r.Context(), p, app.SceneShowRequest{ID: r.PathValue("id"), Version: r.PathValue("version")})
	if err != nil {
		return err
	}
	f := contract.SceneFile{Scene: sh.Scene}
	if ids := sh.Scene.ObjectiveProfileIDs; len(ids) > 0 {
		if o, err := s.app.ObjectiveShow(r.Context(), p, app.ObjectiveShowRequest{ID: ids[0]}); err == nil {
			f.Objective = o.Objective
		}
	}
	doc, err := contract.MarshalSceneFile(&f, nil)
	if err != nil {
		return err
	}
	form := url.Values{"document": {string(doc)}}
	if f.Objective != nil {
		form.Set("model", f.Objective.TwinModelID)
	}
	return s.renderSceneEdit(w, r, p, http.StatusOK, form, nil, nil)
}

func (s *server) renderSceneEdit(w http.ResponseWriter, r *http.Request, p auth.Principal, status int, form url.Values, ferr *formError, notes []string) error {
	ms, err := s.app.ModelList(r.Context(), p, app.ModelListRequest{})
	if err != nil {
		return err
	}
	s.render(w, r, status, "sceneedit", &p, map[string]any{"Title": "Scene editor", "Models": ms.Items, "Form": form, "Err": ferr, "Notes": notes,
		"CanPut": auth.RoleAllows(p.Role, auth.ActTrial)})
	return nil
}

// sceneDraft drafts a scene file from a model (scene.draft) into the
// editor.
func (s *server) sceneDraft(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	req := app.SceneDraftRequest{Model: strings.TrimSpace(r.PostFormValue("model")), ID: strings.TrimSpace(r.PostFormValue("id"))}
	form := url.Values{"model": {req.Model}, "id": {req.ID}}
	d, err := invoke[app.SceneDraftResponse](s, r, p, "scene.draft", &req)
	if err != nil {
		return s.renderSceneEdit(w, r, p, auth.StatusOf(err), form, toFormError(p, err), nil)
	}
	doc, err := contract.MarshalSceneFile(&d.File, nil)
	if err != nil {
		return err
	}
	form.Set("document", string(doc))
	return s.renderSceneEdit(w, r, p, http.StatusOK, form, nil, d.Notes)
}

// sceneCheckResult is the live check's answer: every finding with its
// path in the file.
type sceneCheckResult struct {
	OK       bool           `json:"ok"`
	Message  string         `json:"message"`
	Checked  []string       `json:"checked,omitempty"`
	Problems []core.Problem `json:"problems,omitempty"`
}

// sceneCheck runs scene.check on the editor's text (contract, bindings to
// the line's nodes, fit to the model) and answers JSON for
// static/scene.js, or, posted without scripts, the editor with the
// findings.
func (s *server) sceneCheck(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	req := app.SceneCheckRequest{Document: r.PostFormValue("document"), Model: strings.TrimSpace(r.PostFormValue("model"))}
	res, err := invoke[app.SceneCheckResponse](s, r, p, "scene.check", &req)
	out := sceneCheckResult{OK: err == nil, Checked: res.Checked}
	if err == nil {
		out.Message = "The scene file passed every check (" + strings.Join(res.Checked, "; ") + ")."
	} else {
		fe := toFormError(p, err)
		out.Message, out.Problems = fe.Message, fe.Problems
		if len(out.Problems) == 0 {
			out.Problems = []core.Problem{{Field: fe.Field, Message: fe.Message}}
		}
	}
	if r.PostFormValue("live") == "" {
		form := url.Values{"document": {req.Document}, "model": {req.Model}}
		if err != nil {
			fe := toFormError(p, err)
			fe.Problems = out.Problems
			return s.renderSceneEdit(w, r, p, http.StatusOK, form, fe, []string{out.Message})
		}
		return s.renderSceneEdit(w, r, p, http.StatusOK, form, nil, []string{out.Message})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	return json.NewEncoder(w).Encode(out)
}

// scenePut stores the edited scene file as a draft (scene.put, its
// objective with it) and shows the stored scene.
func (s *server) scenePut(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	doc := r.PostFormValue("document")
	form := url.Values{"document": {doc}, "model": {r.PostFormValue("model")}}
	var req app.ScenePutRequest
	f, err := contract.ParseSceneFile([]byte(doc))
	if err == nil {
		req.Scene, req.Objective = f.Scene, f.Objective
		var sum app.SceneSummary
		if sum, err = invoke[app.SceneSummary](s, r, p, "scene.put", &req); err == nil {
			http.Redirect(w, r, "/ui/scenes/"+url.PathEscape(sum.SceneID)+"/"+url.PathEscape(sum.SceneVersion)+"?done=saved+as+a+draft#scene-actions", http.StatusSeeOther)
			return nil
		}
	}
	return s.renderSceneEdit(w, r, p, auth.StatusOf(err), form, toFormError(p, err), nil)
}

// sceneFreeze freezes the draft whose hash the approver reviewed
// (scene.freeze: approvers only); a refusal is shown on the scene page.
func (s *server) sceneFreeze(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	req := app.SceneFreezeRequest{ID: r.PathValue("id"), Version: r.PathValue("version"), ExpectHash: strings.TrimSpace(r.PostFormValue("expectHash"))}
	sum, err := invoke[app.SceneSummary](s, r, p, "scene.freeze", &req)
	if err != nil {
		return s.sceneRefused(w, r, p, err)
	}
	http.Redirect(w, r, "/ui/scenes/"+url.PathEscape(sum.SceneID)+"/"+url.PathEscape(sum.SceneVersion)+"?done=frozen#scene-actions", http.StatusSeeOther)
	return nil
}

// sceneRefused shows a refused scene action on the scene page, with its
// status.
func (s *server) sceneRefused(w http.ResponseWriter, r *http.Request, p auth.Principal, err error) error {
	fe := toFormError(p, err)
	if fe.Code == core.CodeForbidden && fe.Field != "lineId" {
		fe.Message = "Freezing a scene and choosing the scene that governs a line's writes are an approver's decisions: " + fe.Message
	}
	rw := &statusWriter{ResponseWriter: w, status: fe.Status}
	r = r.WithContext(context.WithValue(r.Context(), sceneErrKey{}, fe))
	if perr := s.scenePage(rw, r, p); perr != nil {
		return err
	}
	return nil
}

// statusWriter writes a page with another status (a refusal shown on the
// page it was made from).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(int) { w.ResponseWriter.WriteHeader(w.status) }

type sceneErrKey struct{}

// sceneActs is what the scene page offers: edit and freeze a draft
// (approvers freeze), set the line's channel to a frozen scene
// (approvers), take a snapshot (engineers).
type sceneActs struct {
	CanFreeze, CanTrial, CanChannel bool
	Err                             *formError
	Flash                           string
	Models                          []core.Model
	Runs                            []core.Run
	Channel                         *contract.ChannelRecord
}

func (s *server) sceneActions(r *http.Request, p auth.Principal, sc *contract.SceneContract) sceneActs {
	ctx := r.Context()
	a := sceneActs{CanFreeze: p.Allow(auth.ActSceneFreeze, sc.LineID) == nil, CanTrial: p.Allow(auth.ActTrial, sc.LineID) == nil,
		CanChannel: p.Allow(auth.ActWrite, sc.LineID) == nil, Flash: r.URL.Query().Get("done")}
	a.Err, _ = ctx.Value(sceneErrKey{}).(*formError)
	if ms, err := s.app.ModelList(ctx, p, app.ModelListRequest{Line: sc.LineID}); err == nil {
		a.Models = ms.Items
	}
	if rl, err := s.app.RunList(ctx, p, app.RunListRequest{Line: sc.LineID}); err == nil {
		a.Runs = rl.Items
		sort.SliceStable(a.Runs, func(i, j int) bool { return a.Runs[i].StartedMs > a.Runs[j].StartedMs })
	}
	if ch, err := s.app.ChannelShow(ctx, p, app.ChannelShowRequest{Line: sc.LineID}); err == nil {
		a.Channel = ch
	}
	return a
}

// channelSet lets the frozen scene govern the line's writes: the hybrid
// twin profile with person-approved (hitl_governed) writes (channel.set,
// approvers).
func (s *server) channelSet(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	req := app.ChannelSetRequest{Line: r.PostFormValue("line"), Profile: contract.ProfileHybridTwin, ControlPolicy: contract.PolicyHITLGoverned,
		SceneID: r.PostFormValue("sceneId"), SceneVersion: r.PostFormValue("sceneVersion")}
	if _, err := invoke[*contract.ChannelRecord](s, r, p, "channel.set", &req); err != nil {
		r.SetPathValue("id", req.SceneID)
		r.SetPathValue("version", req.SceneVersion)
		return s.sceneRefused(w, r, p, err)
	}
	http.Redirect(w, r, "/ui/scenes/"+url.PathEscape(req.SceneID)+"/"+url.PathEscape(req.SceneVersion)+"?done="+url.QueryEscape("now governs the writes of line "+req.Line)+"#scene-actions", http.StatusSeeOther)
	return nil
}

// ---- snapshots, trials, optimisation

// snapshotTake records a snapshot of the scene's variables (snapshot.take)
// and opens it, with the model that will run trials on it.
func (s *server) snapshotTake(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	req := app.SnapshotTakeRequest{Scene: r.PostFormValue("scene"), SceneVersion: r.PostFormValue("sceneVersion"), Run: r.PostFormValue("run"),
		Model: r.PostFormValue("model"), Phase: strings.TrimSpace(r.PostFormValue("phase"))}
	if at := strings.TrimSpace(r.PostFormValue("at")); at != "" {
		if err := app.SetParam(&req, "at", at); err != nil {
			return s.sceneRefusedAt(w, r, p, req.Scene, req.SceneVersion, err)
		}
	}
	res, err := invoke[app.SnapshotTakeResponse](s, r, p, "snapshot.take", &req)
	if err != nil {
		return s.sceneRefusedAt(w, r, p, req.Scene, req.SceneVersion, err)
	}
	http.Redirect(w, r, "/ui/snapshots/"+url.PathEscape(res.Snapshot.SnapshotID)+"?model="+url.QueryEscape(req.Model), http.StatusSeeOther)
	return nil
}

func (s *server) sceneRefusedAt(w http.ResponseWriter, r *http.Request, p auth.Principal, id, version string, err error) error {
	if version == "" {
		if sh, serr := s.app.SceneShow(r.Context(), p, app.SceneShowRequest{ID: id}); serr == nil {
			version = sh.Scene.SceneVersion
		}
	}
	r.SetPathValue("id", id)
	r.SetPathValue("version", version)
	return s.sceneRefused(w, r, p, err)
}

// moveField is one control of a trial form: its value now (the
// snapshot's), the value tried, its range and largest step, with unit.
type moveField struct {
	ID, Unit            string
	Now, Value          float64
	Min, Max, Step      float64
	HasNow, HasRange    bool
	MaxStep             *float64
	ScaleMin, ScaleMax  float64 // the slider's range
	PhysicalMeaning     string
	SnapshotHasNoValues bool
}

// moveFields are the trial form's fields: a slider and a number per
// control of the scene, starting at values (else the snapshot's).
func moveFields(scene *contract.SceneContract, snap *contract.TwinSnapshot, values map[string]float64) []moveField {
	var out []moveField
	for _, c := range scene.Controls {
		f := moveField{ID: c.ID, Unit: c.Unit, MaxStep: c.MaxStep, PhysicalMeaning: c.PhysicalMeaning}
		if v, ok := snap.ControlValues[c.ID]; ok {
			f.Now, f.HasNow, f.Value = v, true, v
		}
		if v, ok := values[c.ID]; ok {
			f.Value = v
		}
		f.ScaleMin, f.ScaleMax = f.Now-1, f.Now+1
		if c.Min != nil && c.Max != nil {
			f.Min, f.Max, f.HasRange = *c.Min, *c.Max, true
			f.ScaleMin, f.ScaleMax = *c.Min, *c.Max
		}
		f.Step = (f.ScaleMax - f.ScaleMin) / 200
		if f.Step <= 0 || math.IsNaN(f.Step) {
			f.Step = 0.01
		}
		out = append(out, f)
	}
	return out
}

// snapshotPage shows a snapshot's values and the trial and optimiser
// forms on it.
func (s *server) snapshotPage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ctx := r.Context()
	sh, err := s.app.SnapshotShow(ctx, p, app.SnapshotShowRequest{ID: r.PathValue("id")})
	if err != nil {
		return err
	}
	sc, err := s.app.SceneShow(ctx, p, app.SceneShowRequest{ID: sh.Snapshot.SceneID, Version: sh.Snapshot.SceneVersion})
	if err != nil {
		return err
	}
	return s.renderSnapshot(w, r, p, http.StatusOK, sh, sc.Scene, r.URL.Query().Get("model"), nil, nil)
}

func (s *server) renderSnapshot(w http.ResponseWriter, r *http.Request, p auth.Principal, status int, sh app.SnapshotShowResponse, scene *contract.SceneContract, model string, values map[string]float64, ferr *formError) error {
	ms, err := s.app.ModelList(r.Context(), p, app.ModelListRequest{Line: sh.Snapshot.LineID})
	if err != nil {
		return err
	}
	s.render(w, r, status, "snapshot", &p, map[string]any{"Title": "Snapshot " + sh.Snapshot.SnapshotID, "Snap": sh.Snapshot, "Info": sh.Info, "Scene": scene,
		"Moves": moveFields(scene, sh.Snapshot, values), "Models": ms.Items, "Model": model, "Err": ferr,
		"CanTrial": p.Allow(auth.ActTrial, sh.Snapshot.LineID) == nil})
	return nil
}

// movesOf reads the move.<control> fields of a trial form.
func movesOf(form url.Values) (map[string]float64, error) {
	set := map[string]float64{}
	for k, v := range form {
		id, ok := strings.CutPrefix(k, "move.")
		if !ok || len(v) == 0 || strings.TrimSpace(v[0]) == "" {
			continue
		}
		f, err := strconv.ParseFloat(strings.TrimSpace(v[0]), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "set."+id, "%s: want a number, got %q", id, v[0])
		}
		set[id] = f
	}
	return set, nil
}

// trialRun runs one virtual trial of the moves (trial.run, each control
// set and held) and opens it: the tube redrawn for the moves tried.
func (s *server) trialRun(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	req := app.TrialRunRequest{Model: r.PostFormValue("model"), Snapshot: r.PostFormValue("snapshot"), Objective: strings.TrimSpace(r.PostFormValue("objective"))}
	set, err := movesOf(r.PostForm)
	if err == nil {
		req.Set = set
		var res app.TrialRunResponse
		if res, err = invoke[app.TrialRunResponse](s, r, p, "trial.run", &req); err == nil {
			http.Redirect(w, r, "/ui/trials/"+url.PathEscape(res.Record.Trial.TrialID)+"?done=run#trial-moves", http.StatusSeeOther)
			return nil
		}
	}
	return s.snapshotRefused(w, r, p, req.Snapshot, req.Model, set, err)
}

func (s *server) snapshotRefused(w http.ResponseWriter, r *http.Request, p auth.Principal, id, model string, values map[string]float64, err error) error {
	sh, serr := s.app.SnapshotShow(r.Context(), p, app.SnapshotShowRequest{ID: id})
	if serr != nil {
		return err
	}
	sc, serr := s.app.SceneShow(r.Context(), p, app.SceneShowRequest{ID: sh.Snapshot.SceneID, Version: sh.Snapshot.SceneVersion})
	if serr != nil {
		return err
	}
	return s.renderSnapshot(w, r, p, auth.StatusOf(err), sh, sc.Scene, model, values, toFormError(p, err))
}

// optimizeAction searches the best passing move (optimize) and shows it:
// the moves, and each objective target's prediction against its target
// in its unit.
func (s *server) optimizeAction(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	req := app.OptimizeRequest{Model: r.PostFormValue("model"), Snapshot: r.PostFormValue("snapshot"), Mode: r.PostFormValue("mode")}
	for _, k := range []string{"seed", "maxCandidates"} {
		if v := strings.TrimSpace(r.PostFormValue(k)); v != "" {
			if err := app.SetParam(&req, k, v); err != nil {
				return s.snapshotRefused(w, r, p, req.Snapshot, req.Model, nil, err)
			}
		}
	}
	res, err := invoke[app.OptimizeResponse](s, r, p, "optimize", &req)
	if err != nil {
		return s.snapshotRefused(w, r, p, req.Snapshot, req.Model, nil, err)
	}
	ctx := r.Context()
	data := map[string]any{"Title": "Optimisation", "Res": res, "Req": req, "CanRequest": false}
	if res.Record != nil {
		t := res.Record.Trial
		sh, err := s.app.SnapshotShow(ctx, p, app.SnapshotShowRequest{ID: t.SnapshotID})
		if err != nil {
			return err
		}
		sc, err := s.app.SceneShow(ctx, p, app.SceneShowRequest{ID: sh.Snapshot.SceneID, Version: sh.Snapshot.SceneVersion})
		if err != nil {
			return err
		}
		var first map[string]float64
		if len(t.CandidateControlTrajectory) > 0 {
			first = t.CandidateControlTrajectory[0]
		}
		data["Moves"] = moveFields(sc.Scene, sh.Snapshot, first)
		data["Targets"] = s.trialTargets(ctx, p, t, sc.Scene)
		data["CanRequest"] = p.Allow(auth.ActCertRequest, res.Record.LineID) == nil
	}
	s.render(w, r, http.StatusOK, "optimized", &p, data)
	return nil
}

// targetView is an objective target against the trial's prediction at the
// end of the horizon (mean and tube), in the target's unit.
type targetView struct {
	ID, Unit           string
	Target             float64
	Mean, Lower, Upper float64
	Inside             bool // the target lies inside the tube
}

func (s *server) trialTargets(ctx context.Context, p auth.Principal, t *contract.VirtualTrial, scene *contract.SceneContract) []targetView {
	o, err := s.app.ObjectiveShow(ctx, p, app.ObjectiveShowRequest{ID: t.ObjectiveID})
	if err != nil || o.Objective == nil {
		return nil
	}
	n := len(t.PredictedTrajectory)
	var out []targetView
	for _, id := range sortedKeysF(o.Objective.Targets) {
		tv := targetView{ID: id, Unit: unitOf(scene, id), Target: o.Objective.Targets[id], Mean: math.NaN(), Lower: math.NaN(), Upper: math.NaN()}
		if n > 0 {
			if v, ok := t.PredictedTrajectory[n-1][id]; ok {
				tv.Mean = v
			}
			if len(t.PredictedLower) == n {
				if v, ok := t.PredictedLower[n-1][id]; ok {
					tv.Lower = v
				}
			}
			if len(t.PredictedUpper) == n {
				if v, ok := t.PredictedUpper[n-1][id]; ok {
					tv.Upper = v
				}
			}
		}
		tv.Inside = tv.Lower <= tv.Target && tv.Target <= tv.Upper
		out = append(out, tv)
	}
	return out
}

func sortedKeysF(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// trialMoves is the trial page's "try another move" form: the trial's
// first step as the starting values.
func (s *server) trialMoves(ctx context.Context, p auth.Principal, t *contract.VirtualTrial) map[string]any {
	sh, err := s.app.SnapshotShow(ctx, p, app.SnapshotShowRequest{ID: t.SnapshotID})
	if err != nil {
		return nil
	}
	sc, err := s.app.SceneShow(ctx, p, app.SceneShowRequest{ID: sh.Snapshot.SceneID, Version: sh.Snapshot.SceneVersion})
	if err != nil {
		return nil
	}
	var first map[string]float64
	if len(t.CandidateControlTrajectory) > 0 {
		first = t.CandidateControlTrajectory[0]
	}
	return map[string]any{"Moves": moveFields(sc.Scene, sh.Snapshot, first), "Snapshot": t.SnapshotID, "Model": t.ModelID,
		"CanTrial": p.Allow(auth.ActTrial, sh.Snapshot.LineID) == nil, "Targets": s.trialTargets(ctx, p, t, sc.Scene)}
}

// ---- certificates

// certIssue requests a certificate for a passing trial (cert.issue): it
// waits in the approvers' inbox.
func (s *server) certIssue(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	req := app.CertIssueRequest{Trial: r.PostFormValue("trial")}
	if v := strings.TrimSpace(r.PostFormValue("ttl")); v != "" {
		if err := app.SetParam(&req, "ttl", v); err != nil {
			return err
		}
	}
	rec, err := invoke[*contract.CertRecord](s, r, p, "cert.issue", &req)
	if err != nil {
		return err
	}
	http.Redirect(w, r, "/ui/certificates/"+url.PathEscape(rec.Cert.RecommendationID)+"?done=requested", http.StatusSeeOther)
	return nil
}

// certDetail is what an approver reviews per certificate: each objective
// target's predicted band at the end of the horizon against the target in
// its unit, the moves with the controls' ranges, and the evidence (the
// model's twin gate, its shadow runs flagged against the gate profile, the
// trial's out-of-distribution check).
type certDetail struct {
	Targets []certTargetView
	Moves   []certMoveView
	Gate    *app.GateLatestResponse
	Shadow  struct {
		Runs    int
		Flagged []string
	}
	OOD   *contract.OutOfDistribution
	Model string
}

type certTargetView struct {
	app.CertTarget
	Mean, Lower, Upper float64
	Inside             bool
}

type certMoveView struct {
	app.CertMove
	Unit     string
	Min, Max *float64
	MaxStep  *float64
}

func (s *server) certDetailOf(ctx context.Context, p auth.Principal, id string) *certDetail {
	d := &certDetail{}
	sh, err := s.app.CertShow(ctx, p, app.CertRequest{ID: id})
	if err != nil {
		return nil
	}
	for _, t := range sh.Targets {
		tv := certTargetView{CertTarget: t, Mean: math.NaN(), Lower: math.NaN(), Upper: math.NaN()}
		if n := len(t.Mean); n > 0 {
			tv.Mean = t.Mean[n-1]
			if len(t.Lower) == n && len(t.Upper) == n {
				tv.Lower, tv.Upper = t.Lower[n-1], t.Upper[n-1]
			}
		}
		tv.Inside = tv.Lower <= tv.Target && tv.Target <= tv.Upper
		d.Targets = append(d.Targets, tv)
	}
	var scene *contract.SceneContract
	if sc, err := s.app.SceneShow(ctx, p, app.SceneShowRequest{ID: sh.Cert.SceneID, Version: sh.Cert.SceneVersion}); err == nil {
		scene = sc.Scene
	}
	if mv, err := s.app.CertMoves(ctx, p, app.CertRequest{ID: id}); err == nil {
		for _, m := range mv.Items {
			v := certMoveView{CertMove: m}
			if scene != nil {
				for _, c := range scene.Controls {
					if c.ID == m.VariableID {
						v.Unit, v.Min, v.Max, v.MaxStep = c.Unit, c.Min, c.Max, c.MaxStep
					}
				}
			}
			d.Moves = append(d.Moves, v)
		}
	}
	tr, err := s.app.TrialShow(ctx, p, app.TrialShowRequest{ID: sh.Cert.TrialID})
	if err != nil {
		return d
	}
	d.Model = tr.Trial.ModelID
	ood := tr.Trial.OutOfDistribution
	d.OOD = &ood
	if g, err := s.app.GateLatest(ctx, p, app.GateLatestRequest{Model: d.Model}); err == nil {
		d.Gate = &g
	}
	// Each run flagged by the op against the latest gate's profile (else
	// the newest).
	if sl, err := s.app.ShadowList(ctx, p, app.ShadowListRequest{Model: d.Model}); err == nil {
		d.Shadow.Runs = len(sl.Items)
		for _, rec := range sl.Items {
			for _, f := range rec.Flags {
				d.Shadow.Flagged = append(d.Shadow.Flagged, rec.RunID+": "+f)
			}
		}
	}
	return d
}

// confirmActs are the decisions a confirmation page takes, with the
// action each needs.
var confirmActs = map[string]auth.Action{"approve": auth.ActCertApprove, "revoke": auth.ActCertApprove, "execute": auth.ActWrite}

// certConfirmPage is the confirmation step of approve, revoke and
// execute: what the decision is about (band against target, moves with
// ranges, evidence, whether it can still execute) and the one button that
// posts it. A principal whose role may not take the decision sees why,
// and no button.
func (s *server) certConfirmPage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	ctx := r.Context()
	do := r.URL.Query().Get("do")
	act, ok := confirmActs[do]
	if !ok {
		return core.FieldErrorf(core.CodeInvalidArgument, "do", "do must be approve, revoke or execute")
	}
	rec, err := s.app.CertShow(ctx, p, app.CertRequest{ID: r.PathValue("id")})
	if err != nil {
		return err
	}
	var refused string
	if err := p.Allow(act, rec.LineID); err != nil {
		refused = forbiddenMsg(p, do, auth.BodyOf(err).Message)
	}
	s.render(w, r, http.StatusOK, "certconfirm", &p, map[string]any{"Title": "Confirm: " + do + " " + rec.Cert.RecommendationID, "Do": do, "Rec": rec, "C": rec.Cert,
		"Exec": execView{rec.Execution, countdown(rec.Execution, s.app.Now())}, "D": s.certDetailOf(ctx, p, rec.Cert.RecommendationID), "Refused": refused})
	return nil
}

func forbiddenMsg(p auth.Principal, do, msg string) string {
	who := "a person with the approver (or admin) role"
	return fmt.Sprintf("%s: to %s a certificate is a decision %s signs; %s has role %s", msg, do, who, p.Name, p.Role)
}

// certExecute writes an approved certificate's first step through the
// write guard (cert.execute: approvers, never an agent) and shows what was
// written and read back.
func (s *server) certExecute(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	req := app.CertExecuteRequest{ID: r.PathValue("id")}
	res, err := invoke[app.CertExecuteResult](s, r, p, "cert.execute", &req)
	if err != nil && core.CodeOf(err) == core.CodeForbidden {
		body := auth.BodyOf(err)
		e := core.FieldErrorf(core.CodeForbidden, body.Field, "%s", forbiddenMsg(p, "execute", body.Message))
		if body.Field == "lineId" {
			e.Message = body.Message
		}
		return e
	}
	if err != nil && res.CertificateID == "" {
		return err
	}
	return s.renderExec(w, r, p, auth.StatusOf(err), req.ID, &res, toFormError(p, err))
}

func (s *server) renderExec(w http.ResponseWriter, r *http.Request, p auth.Principal, status int, id string, res *app.CertExecuteResult, ferr *formError) error {
	rec, err := s.app.CertShow(r.Context(), p, app.CertRequest{ID: id})
	if err != nil {
		return err
	}
	if status == 0 {
		status = http.StatusOK
	}
	s.render(w, r, status, "certexec", &p, map[string]any{"Title": "Execution of " + id, "C": rec.Cert, "Rec": rec, "Res": res, "Err": ferr})
	return nil
}

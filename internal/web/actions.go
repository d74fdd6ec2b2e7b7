package web

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/ingest"
)

// An action is a UI route that changes state (a POST form): the app op it
// runs, the op the API's route of the same use case names. The handler is
// a thin adapter: it decodes the form into the op's request type and runs
// the op through app.Lookup(Op).Invoke, the entry point the API's routes
// take, so role, line scope, validation, limits and audit are the
// application's, once. Check routes run an op that stores nothing and
// answer JSON for a form's live check.
type action struct {
	Route string
	Op    string
	Check bool
	// Read: the op only reads (a viewer may run it; nothing is stored).
	Read bool
	// Upload: a multipart body read as a stream (the CSRF token is its
	// first part), under the CSV limit.
	Upload bool
	h      func(w http.ResponseWriter, r *http.Request, p auth.Principal) error
}

// actionRoutes is every UI action (s may be nil to read the table).
func actionRoutes(s *server) []action {
	return append([]action{
		{Route: "POST /ui/ingest/csv", Op: "ingest.csv", Upload: true, h: s.ingestCSV},
		{Route: "POST /ui/lines/apply", Op: "line.apply", h: s.lineApply},
		{Route: "POST /ui/datasets/check", Op: "dataset.check", Check: true, h: s.datasetCheck},
		{Route: "POST /ui/datasets", Op: "dataset.build", h: s.datasetBuild},
		{Route: "POST /ui/jobs", Op: "job.submit", h: s.jobSubmit},
		{Route: "POST /ui/jobs/{id}/cancel", Op: "job.cancel", h: s.jobCancel},
		{Route: "POST /ui/jobs/{id}/retry", Op: "job.retry", h: s.jobRetry},
		{Route: "POST /ui/models/{id}/promote", Op: "model.promote", h: s.modelPromote},
		{Route: "POST /ui/models/{id}/retire", Op: "model.retire", h: s.modelRetire},
		{Route: "POST /ui/certificates/{id}/approve", Op: "cert.approve", h: s.certApprove},
		{Route: "POST /ui/certificates/{id}/revoke", Op: "cert.revoke", h: s.certRevoke},
		{Route: "POST /ui/benefit", Op: "benefit.run", h: s.benefitRun},
	}, twinAndBatchActions(s)...)
}

// limits are the request body limits of forms and uploads (the API's,
// passed on by api.NewServer through SetBodyLimits; defaults app's).
type limits struct{ body, csv atomic.Int64 }

// ui is the handler New returns: it takes the API's body limits.
type ui struct {
	http.Handler
	s *server
}

// SetBodyLimits sets the limits of form bodies and CSV uploads (values ≤ 0
// keep the current ones); api.NewServer calls it with its own.
func (u *ui) SetBodyLimits(maxBody, maxCSV int64) {
	if maxBody > 0 {
		u.s.lim.body.Store(maxBody)
	}
	if maxCSV > 0 {
		u.s.lim.csv.Store(maxCSV)
	}
}

// invoke runs the op named name with req, as the API does.
func invoke[Resp any](s *server, r *http.Request, p auth.Principal, name string, req any) (Resp, error) {
	var zero Resp
	op, ok := app.Lookup(name)
	if !ok {
		return zero, core.Errorf(core.CodeInternal, "no app op %q", name)
	}
	out, err := op.Invoke(r.Context(), s.app, p, req)
	if err != nil {
		return zero, err
	}
	v, ok := out.(Resp)
	if !ok {
		return zero, core.Errorf(core.CodeInternal, "op %s answered %T", name, out)
	}
	return v, nil
}

// formError is a refused action shown on its form: the code, the message
// (a role refusal names the rule and the role) and every problem found.
type formError struct {
	Status   int
	Code     string
	Field    string
	Message  string
	Problems []core.Problem
}

func toFormError(p auth.Principal, err error) *formError {
	if err == nil {
		return nil
	}
	b := auth.BodyOf(err)
	fe := &formError{Status: auth.StatusOf(err), Code: b.Code, Field: b.Field, Message: b.Message}
	var ae *core.Error
	if errors.As(err, &ae) && len(ae.Problems) > 1 {
		fe.Problems = ae.Problems
	}
	if b.Code == core.CodeForbidden && b.Field != "lineId" {
		fe.Message += " (" + p.Name + " has role " + string(p.Role) + ")"
	}
	return fe
}

// readUpload reads a multipart form as a stream: the parts before the
// first file are fields (bounded), the CSRF token among them, checked
// before the file is read; the file part is returned unread (nil if the
// form has none). The body is already under its limit (the caller's).
func (s *server) readUpload(r *http.Request) (url.Values, *multipart.Part, error) {
	ct, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || ct != "multipart/form-data" {
		return nil, nil, core.FieldErrorf(core.CodeInvalidArgument, "body", "an upload is a multipart/form-data form")
	}
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, nil, core.FieldErrorf(core.CodeInvalidArgument, "body", "read the form: %v", err)
	}
	vals := url.Values{}
	const maxField, maxFields = 64 << 10, 64
	for n := 0; ; n++ {
		part, err := mr.NextPart()
		if err == io.EOF {
			return vals, nil, s.hosts.CheckCSRF(r, vals.Get("csrf"))
		}
		if err != nil {
			return nil, nil, bodyErr(err)
		}
		if n >= maxFields {
			return nil, nil, core.FieldErrorf(core.CodeInvalidArgument, "body", "more than %d form fields", maxFields)
		}
		if part.FileName() != "" {
			// The token arrives before the file (the forms put the file
			// input last): nothing of the file is read without it.
			if err := s.hosts.CheckCSRF(r, vals.Get("csrf")); err != nil {
				return nil, nil, err
			}
			return vals, part, nil
		}
		b, err := io.ReadAll(io.LimitReader(part, maxField+1))
		if err != nil {
			return nil, nil, bodyErr(err)
		}
		if len(b) > maxField {
			return nil, nil, core.FieldErrorf(core.CodeInvalidArgument, part.FormName(), "form field %s is longer than %d bytes", part.FormName(), maxField)
		}
		vals.Add(part.FormName(), string(b))
	}
}

// bodyErr turns a body over its limit into the API's 413.
func bodyErr(err error) error {
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return &core.Error{Code: core.CodeQuotaExceeded, Field: "body", Message: "request body larger than " + strconv.FormatInt(mbe.Limit, 10) + " bytes"}
	}
	var ae *core.Error
	if errors.As(err, &ae) {
		return err
	}
	return core.FieldErrorf(core.CodeInvalidArgument, "body", "read the form: %v", err)
}

// csvFields are the ingest.csv request fields the upload form carries
// (the CLI's and the API's plant options), by their json names.
var csvFields = []string{"line", "product", "recipe", "run", "timeCol", "timeUnit", "tz", "delimiter", "decimalComma", "period", "start", "timeOffset", "unit", "ignoreCol", "skipBad"}

// ingestPage is the upload form (CSV with its plant options) and the line
// file form, with the lines in scope and the result of the last action.
func (s *server) ingestPage(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	return s.renderIngest(w, r, p, http.StatusOK, map[string]any{"Form": url.Values{"line": {r.URL.Query().Get("line")}}})
}

func (s *server) renderIngest(w http.ResponseWriter, r *http.Request, p auth.Principal, status int, data map[string]any) error {
	lines, err := s.app.LineList(r.Context(), p, app.LineListRequest{})
	if err != nil {
		return err
	}
	data["Title"] = "Ingest"
	data["Lines"] = lines.Items
	data["CanIngest"] = auth.RoleAllows(p.Role, auth.ActIngest)
	data["MaxCSV"] = s.lim.csv.Load()
	if _, ok := data["Form"]; !ok {
		data["Form"] = url.Values{}
	}
	s.render(w, r, status, "ingest", &p, data)
	return nil
}

// ingestCSV streams the uploaded file into ingest.csv (the body under the
// CSV limit before a byte is read) and shows the file report.
func (s *server) ingestCSV(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	vals, file, err := s.readUpload(r)
	if err != nil {
		if core.CodeOf(err) == core.CodeForbidden { // CSRF or origin: nothing was done
			return err
		}
		return s.renderIngest(w, r, p, auth.StatusOf(err), map[string]any{"CSVErr": toFormError(p, err), "Form": vals})
	}
	var req app.IngestCSVRequest
	for _, name := range csvFields {
		v := vals[name]
		if name == "unit" || name == "ignoreCol" {
			v = splitList(strings.Join(v, "\n"))
		} else if len(v) == 0 || strings.TrimSpace(v[0]) == "" {
			continue
		} else {
			v = []string{strings.TrimSpace(v[0])}
		}
		if len(v) == 0 {
			continue
		}
		if err := app.SetParam(&req, name, v...); err != nil {
			return s.renderIngest(w, r, p, auth.StatusOf(err), map[string]any{"CSVErr": toFormError(p, err), "Form": vals})
		}
	}
	if file != nil {
		req.Body, req.Name = file, "upload:"+file.FileName()
	}
	rep, err := invoke[ingest.FileReport](s, r, p, "ingest.csv", &req)
	if err != nil {
		return s.renderIngest(w, r, p, auth.StatusOf(bodyErr(err)), map[string]any{"CSVErr": toFormError(p, bodyErr(err)), "Form": vals})
	}
	return s.renderIngest(w, r, p, http.StatusOK, map[string]any{"Report": rep, "Form": vals})
}

// splitList splits a textarea of node=unit or column names (one per line
// or comma separated).
func splitList(s string) []string {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == ',' || r == '\r' }) {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// lineApply applies a line file, pasted or uploaded (app.ParseLineFile
// reads it as aml line apply does); a line given in the form is the line
// the file must be for.
func (s *server) lineApply(w http.ResponseWriter, r *http.Request, p auth.Principal) error {
	line := strings.TrimSpace(r.PostFormValue("line"))
	text := r.PostFormValue("file")
	if f, _, err := r.FormFile("upload"); err == nil {
		b, err := io.ReadAll(f)
		_ = f.Close()
		if err != nil {
			return bodyErr(err)
		}
		if len(bytes.TrimSpace(b)) > 0 {
			text = string(b)
		}
	}
	form := url.Values{"line": {line}, "file": {text}}
	req, err := app.ParseLineFile([]byte(text), line)
	if err == nil {
		var nodes app.List[core.Node]
		if nodes, err = invoke[app.List[core.Node]](s, r, p, "line.apply", &req); err == nil {
			return s.renderIngest(w, r, p, http.StatusOK, map[string]any{"Applied": nodes.Items, "Form": form})
		}
	}
	return s.renderIngest(w, r, p, auth.StatusOf(err), map[string]any{"LineErr": toFormError(p, err), "Form": form})
}

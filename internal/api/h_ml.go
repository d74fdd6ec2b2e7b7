package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/registry"
	extrun "github.com/aml-project/aml/internal/trainer/exec"
)

// ---- datasets

func (s *Server) buildDataset(c *call) (any, error) {
	b, err := c.rawBody()
	if err != nil {
		return nil, err
	}
	spec, err := dataset.ParseSpec(b)
	if err != nil {
		return nil, err
	}
	if err := c.line(spec.LineID); err != nil {
		return nil, err
	}
	maxW, err := c.qInt("maxWindows", dataset.DefaultMaxWindows, 1, math.MaxInt32)
	if err != nil {
		return nil, err
	}
	maxMiB, err := c.qInt("maxBytesMiB", int(dataset.DefaultMaxBytes>>20), 1, 1<<20)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	res, err := dataset.Build(c.ctx, s.d.Store, spec, dataset.Options{DataDir: s.d.DataDir, MaxWindows: maxW, MaxBytes: int64(maxMiB) << 20,
		CreatedBy: c.p.Name, Bus: s.d.Bus})
	if err != nil {
		return nil, err
	}
	return map[string]any{"dataset": res.Dataset, "dropped": res.Report.Dropped, "lineage": res.Manifest.Lineage, "shapes": res.Manifest.Shapes,
		"seconds": time.Since(t0).Seconds()}, nil
}

func (s *Server) listDatasets(c *call) (any, error) {
	f := core.DatasetFilter{Line: c.q("line"), Product: c.q("product"), Recipe: c.q("recipe")}
	if err := c.scopeLine(f.Line); err != nil {
		return nil, err
	}
	ds, err := s.d.Store.ListDatasets(c.ctx, f)
	if err != nil {
		return nil, err
	}
	out := []core.Dataset{}
	for _, d := range ds {
		if c.p.InScope(d.LineID) {
			out = append(out, d)
		}
	}
	return listOf(out), nil
}

// dataset reads a dataset and checks the caller's line scope.
func (s *Server) dataset(c *call) (core.Dataset, error) {
	d, err := s.d.Store.GetDataset(c.ctx, c.param("id"))
	if err != nil {
		return d, err
	}
	return d, c.line(d.LineID)
}

func (s *Server) showDataset(c *call) (any, error) {
	d, err := s.dataset(c)
	if err != nil {
		return nil, err
	}
	m, err := dataset.FetchManifest(c.ctx, s.d.Store, s.d.DataDir, d)
	if err != nil {
		return nil, err
	}
	refs, err := s.d.Store.ListDatasetRefs(c.ctx, d.ID)
	if err != nil {
		return nil, err
	}
	if refs == nil {
		refs = []core.DatasetRef{}
	}
	return map[string]any{"dataset": d, "manifest": m, "references": refs}, nil
}

func (s *Server) verifyDataset(c *call) (any, error) {
	d, err := s.dataset(c)
	if err != nil {
		return nil, err
	}
	return dataset.FetchVerify(c.ctx, s.d.Store, s.d.DataDir, d)
}

func (s *Server) datasetReport(c *call) (any, error) {
	d, err := s.dataset(c)
	if err != nil {
		return nil, err
	}
	return dataset.FetchReport(c.ctx, s.d.Store, s.d.DataDir, d)
}

func (s *Server) deleteDataset(c *call) (any, error) {
	d, err := s.dataset(c)
	if err != nil {
		return nil, err
	}
	if err := dataset.Delete(c.ctx, s.d.Store, s.d.DataDir, d.ID); err != nil {
		return nil, err
	}
	return map[string]any{"deleted": d.ID}, nil
}

// ---- jobs

type submitReq struct {
	DatasetID  string          `json:"datasetId"`
	TrainerRef string          `json:"trainer"`
	Params     json.RawMessage `json:"params,omitempty"`
	Seed       int64           `json:"seed,omitempty"`
	ParentID   string          `json:"parentId,omitempty"`
	ChangeNote string          `json:"note,omitempty"`
	EnvName    string          `json:"env,omitempty"`
	TimeoutSec int             `json:"timeoutSec,omitempty"`
	StallSec   int             `json:"stallSec,omitempty"`
}

func (s *Server) runner() (*jobs.Runner, error) {
	if s.d.Runner == nil {
		return nil, core.Errorf(core.CodeStoreUnavailable, "this server runs no job system")
	}
	return s.d.Runner, nil
}

// jobLine is the line of a job (its dataset's), cached: a job never
// changes dataset.
func (s *Server) jobLine(ctx context.Context, j core.Job) (string, error) {
	if v, ok := s.jobLines.Load(j.ID); ok {
		return v.(string), nil
	}
	id := j.DatasetID
	if id == "" {
		jj, err := s.d.Store.GetJob(ctx, j.ID)
		if err != nil {
			return "", err
		}
		id = jj.DatasetID
	}
	d, err := s.d.Store.GetDataset(ctx, id)
	if err != nil {
		return "", err
	}
	s.jobLines.Store(j.ID, d.LineID)
	return d.LineID, nil
}

func (s *Server) submitJob(c *call) (any, error) {
	var req submitReq
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if req.DatasetID == "" {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "datasetId", "datasetId is required")
	}
	if req.TrainerRef == "" {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "trainer", "trainer is required")
	}
	if req.TimeoutSec < 0 || req.StallSec < 0 {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "timeoutSec", "timeouts must not be negative")
	}
	d, err := s.d.Store.GetDataset(c.ctx, req.DatasetID)
	if err != nil {
		return nil, err
	}
	if err := c.line(d.LineID); err != nil {
		return nil, err
	}
	r, err := s.runner()
	if err != nil {
		return nil, err
	}
	return r.Submit(c.ctx, jobs.SubmitRequest{DatasetID: req.DatasetID, TrainerRef: req.TrainerRef, Params: req.Params, Seed: req.Seed,
		ParentID: req.ParentID, ChangeNote: req.ChangeNote, EnvName: req.EnvName, Timeout: time.Duration(req.TimeoutSec) * time.Second,
		Stall: time.Duration(req.StallSec) * time.Second, CreatedBy: c.p.Name})
}

func (s *Server) listJobs(c *call) (any, error) {
	limit, err := c.qInt("limit", 1000, 1, 100_000)
	if err != nil {
		return nil, err
	}
	js, err := s.d.Store.ListJobs(c.ctx, core.JobFilter{Status: core.JobStatus(c.q("status")), DatasetID: c.q("dataset"), Limit: limit})
	if err != nil {
		return nil, err
	}
	out := []core.Job{}
	for _, j := range js {
		if !c.p.AllLines() {
			l, err := s.jobLine(c.ctx, j)
			if err != nil || !c.p.InScope(l) {
				continue
			}
		}
		out = append(out, j)
	}
	return listOf(out), nil
}

// job reads a job and checks the caller's line scope.
func (s *Server) job(c *call) (core.Job, error) {
	j, err := s.d.Store.GetJob(c.ctx, c.param("id"))
	if err != nil {
		return j, err
	}
	l, err := s.jobLine(c.ctx, j)
	if err != nil {
		return j, err
	}
	return j, c.line(l)
}

func (s *Server) showJob(c *call) (any, error) { return s.job(c) }

func (s *Server) cancelJob(c *call) (any, error) {
	j, err := s.job(c)
	if err != nil {
		return nil, err
	}
	r, err := s.runner()
	if err != nil {
		return nil, err
	}
	return r.Cancel(c.ctx, j.ID)
}

func (s *Server) retryJob(c *call) (any, error) {
	j, err := s.job(c)
	if err != nil {
		return nil, err
	}
	r, err := s.runner()
	if err != nil {
		return nil, err
	}
	return r.Retry(c.ctx, j.ID, c.p.Name)
}

// jobLogs writes the trainer log (rotated parts oldest first, then the
// current file) from ?offset=, as text; X-Log-Next-Offset is where to
// continue.
func (s *Server) jobLogs(c *call) (any, error) {
	j, err := s.job(c)
	if err != nil {
		return nil, err
	}
	off, err := c.qInt("offset", 0, 0, math.MaxInt)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(s.d.DataDir, "jobs", j.ID, "logs")
	base := filepath.Join(dir, "trainer.log")
	parts, _ := filepath.Glob(base + ".*")
	// trainer.log.2 is older than trainer.log.1: longer suffix or larger
	// number first.
	sort.Slice(parts, func(a, b int) bool {
		na, _ := strconv.Atoi(filepath.Ext(parts[a])[1:])
		nb, _ := strconv.Atoi(filepath.Ext(parts[b])[1:])
		return na > nb
	})
	parts = append(parts, base)
	var total int64
	c.w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	var body []io.Reader
	var closers []io.Closer
	defer func() {
		for _, f := range closers {
			f.Close()
		}
	}()
	skip := int64(off)
	for _, p := range parts {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		closers = append(closers, f)
		st, err := f.Stat()
		if err != nil {
			continue
		}
		size := st.Size()
		total += size
		if skip >= size {
			skip -= size
			continue
		}
		if _, err := f.Seek(skip, io.SeekStart); err != nil {
			return nil, core.Wrap(core.CodeInternal, err, "job %s: read log %s", j.ID, filepath.Base(p))
		}
		skip = 0
		body = append(body, io.LimitReader(f, size))
	}
	next := max(total, int64(off))
	c.w.Header().Set("X-Log-Next-Offset", strconv.FormatInt(next, 10))
	c.w.Header().Set("X-Job-Status", string(j.Status))
	c.wrote = true
	c.w.WriteHeader(http.StatusOK)
	io.Copy(c.w, io.MultiReader(body...))
	return nil, nil
}

// ---- models

type promoteReq struct {
	To     string `json:"to"`               // shadow or production
	Expect string `json:"expect,omitempty"` // the stage the caller believes the model is in
	Reason string `json:"reason,omitempty"`
}

type retireReq struct {
	Expect string `json:"expect,omitempty"`
	Reason string `json:"reason,omitempty"`
}

type predictReq struct {
	Run string `json:"run"`
	// From is the time of the first predicted step (epoch ms).
	From  int64 `json:"from"`
	Steps int   `json:"steps"`
}

func (s *Server) listModels(c *call) (any, error) {
	f := core.ModelFilter{Line: c.q("line"), Stage: c.q("stage"), Recipe: c.q("recipe"), Purpose: c.q("purpose"), DatasetID: c.q("dataset")}
	if err := c.scopeLine(f.Line); err != nil {
		return nil, err
	}
	ms, err := s.d.Store.ListModels(c.ctx, f)
	if err != nil {
		return nil, err
	}
	out := []core.Model{}
	for _, m := range ms {
		if c.p.InScope(m.LineID) {
			out = append(out, m)
		}
	}
	return listOf(out), nil
}

func (s *Server) model(c *call, id string) (core.Model, error) {
	m, err := s.d.Store.GetModel(c.ctx, id)
	if err != nil {
		return m, err
	}
	return m, c.line(m.LineID)
}

func (s *Server) showModel(c *call) (any, error) {
	m, err := s.model(c, c.param("id"))
	if err != nil {
		return nil, err
	}
	h, err := s.d.Store.ModelHistory(c.ctx, m.ID)
	if err != nil {
		return nil, err
	}
	if h == nil {
		h = []core.StageChange{}
	}
	return map[string]any{"model": m, "history": h}, nil
}

func (s *Server) registry() *registry.Registry { return registry.New(s.d.Store, s.d.DataDir, s.d.Bus) }

func (s *Server) promoteModel(c *call) (any, error) {
	var req promoteReq
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	switch req.To {
	case core.StageShadow:
	case core.StageProduction:
		// Production is a person's decision: approver or admin.
		if err := c.p.Allow(auth.ActPromoteProduction, ""); err != nil {
			return nil, err
		}
		c.act = auth.ActPromoteProduction
	default:
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "to", "to must be shadow or production (retire: POST /models/{id}/retire)")
	}
	m, err := s.model(c, c.param("id"))
	if err != nil {
		return nil, err
	}
	return s.registry().Move(c.ctx, m.ID, req.To, c.p.Name, req.Reason, req.Expect)
}

func (s *Server) retireModel(c *call) (any, error) {
	var req retireReq
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	m, err := s.model(c, c.param("id"))
	if err != nil {
		return nil, err
	}
	return s.registry().Move(c.ctx, m.ID, core.StageRetired, c.p.Name, req.Reason, req.Expect)
}

// prediction is one predicted step.
type prediction struct {
	TsMs     int64      `json:"ts"`
	Pred     []float64  `json:"prediction"`
	Lo       []float64  `json:"lo,omitempty"`
	Hi       []float64  `json:"hi,omitempty"`
	Measured []*float64 `json:"measured"`
}

func (s *Server) predict(c *call) (any, error) {
	var req predictReq
	if err := c.decode(&req); err != nil {
		return nil, err
	}
	if req.Run == "" {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "run", "run is required")
	}
	m, err := s.model(c, c.param("id"))
	if err != nil {
		return nil, err
	}
	reg := registry.New(s.d.Store, s.d.DataDir, nil)
	if err := reg.VerifyArtifact(c.ctx, m); err != nil {
		return nil, err
	}
	d, err := s.d.Store.GetDataset(c.ctx, m.DatasetID)
	if err != nil {
		return nil, err
	}
	man, err := dataset.FetchManifest(c.ctx, s.d.Store, s.d.DataDir, d)
	if err != nil {
		return nil, err
	}
	if req.Steps == 0 {
		req.Steps = 1
	}
	if req.Steps < 1 || req.Steps > man.HorizonSteps {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "steps", "steps must be 1..%d (the model's horizon)", man.HorizonSteps)
	}
	p, err := model.Load(reg.ArtifactDir(m), man, model.LoadOptions{ExecPredict: extrun.Predict})
	if err != nil {
		return nil, err
	}
	w, err := dataset.BuildServeWindow(c.ctx, s.d.Store, d, req.Run, req.From)
	if err != nil {
		return nil, err
	}
	if w.Missing > 0 {
		return nil, core.FieldErrorf(core.CodeDatasetEmpty, "from", "the history window before %d has %d missing value(s) after cleaning; pick another time", w.AtMs, w.Missing)
	}
	yhat, err := p.PredictBatch(context.WithoutCancel(c.ctx), w.X, w.U, 1)
	if err != nil {
		return nil, err
	}
	widths := conformalWidths(m.Metrics)
	nT, H := len(man.Targets), man.HistorySteps
	out := []prediction{}
	for f := 0; f < req.Steps; f++ {
		pr := prediction{TsMs: w.TS[H+f]}
		for k := 0; k < nT; k++ {
			v := float64(yhat[f*nT+k])
			pr.Pred = append(pr.Pred, v)
			if widths != nil && f < len(widths) && k < len(widths[f]) {
				pr.Lo, pr.Hi = append(pr.Lo, v-widths[f][k]), append(pr.Hi, v+widths[f][k])
			}
			if y := float64(w.Y[f*nT+k]); !math.IsNaN(y) {
				pr.Measured = append(pr.Measured, &y)
			} else {
				pr.Measured = append(pr.Measured, nil)
			}
		}
		out = append(out, pr)
	}
	return map[string]any{"model": m.ID, "run": req.Run, "from": w.AtMs, "beatMs": man.BeatMs, "targets": man.Targets, "steps": out, "intervals": widths != nil}, nil
}

// conformalWidths reads the calibrated half-widths [F][nTgt] stored in the
// model's metrics, if evaluation calibrated it.
func conformalWidths(metrics json.RawMessage) [][]float64 {
	var m struct {
		Conformal *struct {
			Widths [][]float64 `json:"widths"`
		} `json:"conformal"`
	}
	if json.Unmarshal(metrics, &m) != nil || m.Conformal == nil {
		return nil
	}
	return m.Conformal.Widths
}

var _ = fmt.Sprintf

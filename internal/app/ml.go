package app

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/eval"
	"github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/registry"
	"github.com/aml-project/aml/internal/safefile"
	extrun "github.com/aml-project/aml/internal/trainer/exec"
)

// The machine-learning use cases: datasets, training jobs and models.

var (
	opDatasetBuild  = Op{Name: "dataset.build", Act: auth.ActDataset, Heavy: true, Summary: "Build a dataset from a spec (docs/dataset-format.md)"}
	opDatasetList   = Op{Name: "dataset.list", Act: auth.ActRead, Summary: "List datasets"}
	opDatasetShow   = Op{Name: "dataset.show", Act: auth.ActRead, Summary: "A dataset with its manifest and references"}
	opDatasetVerify = Op{Name: "dataset.verify", Act: auth.ActRead, Summary: "Recompute the dataset's hash from its files"}
	opDatasetReport = Op{Name: "dataset.report", Act: auth.ActRead, Summary: "Per-node statistics, cleaning counts, lags, runs"}
	opDatasetDelete = Op{Name: "dataset.delete", Act: auth.ActDataset, Summary: "Delete a dataset (refused while referenced)"}

	opJobSubmit = Op{Name: "job.submit", Act: auth.ActJob, Summary: "Submit a training job (queued for the workers)"}
	opJobList   = Op{Name: "job.list", Act: auth.ActRead, Summary: "List jobs, newest first"}
	opJobShow   = Op{Name: "job.show", Act: auth.ActRead, Summary: "A job: status, stage, progress, metrics, gates and model"}
	opJobLogs   = Op{Name: "job.logs", Act: auth.ActRead, Summary: "The trainer log (all rotated parts, oldest first) from a byte offset"}
	opJobCancel = Op{Name: "job.cancel", Act: auth.ActJob, Summary: "Cancel a queued or running job"}
	opJobRetry  = Op{Name: "job.retry", Act: auth.ActJob, Summary: "Retry a finished job as a new experiment"}

	opModelList    = Op{Name: "model.list", Act: auth.ActRead, Summary: "List models, newest first"}
	opModelShow    = Op{Name: "model.show", Act: auth.ActRead, Summary: "Model card: metrics, gates, lineage, stage history"}
	opModelPromote = Op{Name: "model.promote", Act: auth.ActModelStage, Summary: "Move a model to shadow or production (production: approver or admin)"}
	opModelRetire  = Op{Name: "model.retire", Act: auth.ActModelStage, Summary: "Retire a model"}
	opModelPredict = Op{Name: "model.predict", Act: auth.ActRead, Heavy: true, Summary: "Predict K steps of a run from time T (training's cleaning and alignment; conformal intervals)"}
)

// mlOps lists the use cases of this file.
func mlOps() []*Op {
	return []*Op{
		bind(&opDatasetBuild, (*App).DatasetBuild),
		bind(&opDatasetList, (*App).DatasetList),
		bind(&opDatasetShow, (*App).DatasetShow),
		bind(&opDatasetVerify, (*App).DatasetVerify),
		bind(&opDatasetReport, (*App).DatasetReport),
		bind(&opDatasetDelete, (*App).DatasetDelete),
		bind(&opJobSubmit, (*App).JobSubmit),
		bind(&opJobList, (*App).JobList),
		bind(&opJobShow, (*App).JobShow),
		bind(&opJobLogs, (*App).JobLogs),
		bind(&opJobCancel, (*App).JobCancel),
		bind(&opJobRetry, (*App).JobRetry),
		bind(&opModelList, (*App).ModelList),
		bind(&opModelShow, (*App).ModelShow),
		bind(&opModelPromote, (*App).ModelPromote),
		bind(&opModelRetire, (*App).ModelRetire),
		bind(&opModelPredict, (*App).ModelPredict),
	}
}

// ---- datasets

// DatasetBuildRequest is a dataset spec with the build's size limits.
type DatasetBuildRequest struct {
	Spec        dataset.Spec `json:"spec" jsonschema:"the dataset spec (docs/dataset-format.md)"`
	MaxWindows  int          `json:"maxWindows,omitempty" jsonschema:"refuse more windows than this (default and at most the server's quota, 200000 unless configured)"`
	MaxBytesMiB int          `json:"maxBytesMiB,omitempty" jsonschema:"refuse a larger dataset (MiB; default and at most the server's quota, 4096 unless configured)"`
	MaxCells    int64        `json:"maxCells,omitempty" jsonschema:"work budget: refuse a build aligning more grid cells (points × nodes) than this (default and maximum: the server's, 50000000 unless configured)"`
}

// Defaults of a dataset build's size limits (DatasetBuildRequest; a 0
// limit is the default).
const (
	DefaultDatasetMaxWindows  = dataset.DefaultMaxWindows
	DefaultDatasetMaxBytesMiB = int(dataset.DefaultMaxBytes >> 20)
)

// SetSpecJSON sets the spec from a spec document (a spec file's bytes),
// read as UnmarshalJSON reads the request's spec: the dataset's strict
// parser, whose errors name the spec's fields.
func (r *DatasetBuildRequest) SetSpecJSON(b []byte) error {
	sp, err := dataset.ParseSpec(b)
	if err != nil {
		return err
	}
	r.Spec = *sp
	return nil
}

// UnmarshalJSON reads the spec through the dataset's own strict parser
// (AML_SPEC_INVALID with the spec's field paths, duplicate keys refused,
// the size limit applied), as a spec file is read.
func (r *DatasetBuildRequest) UnmarshalJSON(b []byte) error {
	var raw struct {
		Spec        json.RawMessage `json:"spec"`
		MaxWindows  int             `json:"maxWindows"`
		MaxBytesMiB int             `json:"maxBytesMiB"`
		MaxCells    int64           `json:"maxCells"`
	}
	if err := strictDecode(b, &raw); err != nil {
		return err
	}
	r.MaxWindows, r.MaxBytesMiB, r.MaxCells, r.Spec = raw.MaxWindows, raw.MaxBytesMiB, raw.MaxCells, dataset.Spec{}
	if len(raw.Spec) > 0 && string(raw.Spec) != "null" {
		return r.SetSpecJSON(raw.Spec)
	}
	return nil
}

// Validate normalises and validates the spec and the limits.
func (r *DatasetBuildRequest) Validate() error {
	if err := firstErr(limitIn("maxWindows", r.MaxWindows, 1, math.MaxInt32), limitIn("maxBytesMiB", r.MaxBytesMiB, 1, 1<<20)); err != nil {
		return err
	}
	if r.MaxCells < 0 {
		return core.FieldErrorf(core.CodeInvalidArgument, "maxCells", "maxCells must not be negative")
	}
	r.Spec.Normalize()
	return r.Spec.Validate()
}

// DatasetBuildResponse is the built dataset with what the build dropped.
type DatasetBuildResponse struct {
	Dataset core.Dataset        `json:"dataset"`
	Dropped []dataset.RunReason `json:"dropped"`
	Lineage dataset.Lineage     `json:"lineage"`
	Shapes  map[string][]int    `json:"shapes"`
	Seconds float64             `json:"seconds"`
}

// DatasetBuild builds (or finds, by content hash) a dataset.
func (a *App) DatasetBuild(ctx context.Context, p Principal, req DatasetBuildRequest) (DatasetBuildResponse, error) {
	return run(ctx, a, p, &opDatasetBuild, req, func(ctx context.Context, p Principal, req DatasetBuildRequest) (DatasetBuildResponse, error) {
		if err := p.Allow(auth.ActDataset, req.Spec.LineID); err != nil {
			return DatasetBuildResponse{}, err
		}
		maxW, maxB, err := a.datasetQuotas(p, req.MaxWindows, req.MaxBytesMiB)
		if err != nil {
			return DatasetBuildResponse{}, err
		}
		cells, err := a.datasetCells(req.MaxCells)
		if err != nil {
			return DatasetBuildResponse{}, err
		}
		t0 := time.Now()
		spec := req.Spec
		res, err := dataset.Build(ctx, a.d.Store, &spec, dataset.Options{DataDir: a.d.DataDir, MaxWindows: int(maxW), MaxBytes: maxB, MaxCells: cells, CreatedBy: p.Name, Bus: a.d.Bus})
		if err != nil {
			return DatasetBuildResponse{}, err
		}
		return DatasetBuildResponse{Dataset: res.Dataset, Dropped: res.Report.Dropped, Lineage: res.Manifest.Lineage, Shapes: res.Manifest.Shapes,
			Seconds: time.Since(t0).Seconds()}, nil
	})
}

// datasetQuotas are a build's quotas on windows and bytes: the
// request's (0: the server's), never more than the server's unless p is
// the local CLI (a person at the machine, who may raise them).
func (a *App) datasetQuotas(p Principal, windows, mib int) (int, int64, error) {
	maxW, maxMiB := a.o.MaxDatasetWindows, a.o.MaxDatasetBytesMiB
	switch {
	case windows > maxW && !p.Local:
		return 0, 0, core.FieldErrorf(core.CodeQuotaExceeded, "maxWindows", "maxWindows %d is over this server's quota of %d windows", windows, maxW)
	case mib > maxMiB && !p.Local:
		return 0, 0, core.FieldErrorf(core.CodeQuotaExceeded, "maxBytesMiB", "maxBytesMiB %d is over this server's quota of %d MiB", mib, maxMiB)
	}
	if windows > 0 {
		maxW = windows
	}
	if mib > 0 {
		maxMiB = mib
	}
	return maxW, int64(maxMiB) << 20, nil
}

// datasetCells is a build's work budget: the request's maxCells (0: the
// server's), never more than the server's.
func (a *App) datasetCells(want int64) (int64, error) {
	cells := a.o.MaxDatasetCells
	if want > cells {
		return 0, core.FieldErrorf(core.CodeQuotaExceeded, "maxCells", "maxCells %d is over this server's work budget of %d cells", want, cells)
	} else if want > 0 {
		cells = want
	}
	return cells, nil
}

// DatasetListRequest filters datasets.
type DatasetListRequest struct {
	Line    string `json:"line,omitempty" jsonschema:"only this line"`
	Product string `json:"product,omitempty" jsonschema:"only this product"`
	Recipe  string `json:"recipe,omitempty" jsonschema:"only this recipe"`
}

// DatasetList lists the datasets of p's lines.
func (a *App) DatasetList(ctx context.Context, p Principal, req DatasetListRequest) (List[core.Dataset], error) {
	return run(ctx, a, p, &opDatasetList, req, func(ctx context.Context, p Principal, req DatasetListRequest) (List[core.Dataset], error) {
		return listIn(p, req.Line, func() ([]core.Dataset, error) {
			return a.d.Store.ListDatasets(ctx, core.DatasetFilter{Line: req.Line, Product: req.Product, Recipe: req.Recipe})
		}, func(d core.Dataset) string { return d.LineID })
	})
}

// DatasetRequest names a dataset.
type DatasetRequest struct {
	ID string `json:"id" jsonschema:"dataset id"`
}

// Validate requires the id.
func (r *DatasetRequest) Validate() error { return required("id", r.ID) }

// dataset reads a dataset and checks p's line scope for act (a missing
// one is refused to a scoped caller as one of another line: unseen).
func (a *App) dataset(ctx context.Context, p Principal, act auth.Action, id string) (core.Dataset, error) {
	d, err := a.d.Store.GetDataset(ctx, id)
	if err != nil {
		return d, unseen(p, err)
	}
	return d, p.Allow(act, d.LineID)
}

// unseen is the error of looking up an object a caller named by id: for a
// caller scoped to some lines, AML_NOT_FOUND becomes the line-scope
// refusal an object of another line gets (auth.Principal.ScopeRefusal),
// so the caller cannot tell "of another line" from "not there" — the
// refusal names neither. A caller who sees every line is told which.
func unseen(p Principal, err error) error {
	if err != nil && !p.AllLines() && core.CodeOf(err) == core.CodeNotFound {
		return p.ScopeRefusal()
	}
	return err
}

// DatasetShowResponse is a dataset with its manifest and references.
type DatasetShowResponse struct {
	Dataset    core.Dataset      `json:"dataset"`
	Manifest   *dataset.Manifest `json:"manifest"`
	References []core.DatasetRef `json:"references"`
}

// DatasetShow returns a dataset with its manifest and references.
func (a *App) DatasetShow(ctx context.Context, p Principal, req DatasetRequest) (DatasetShowResponse, error) {
	return run(ctx, a, p, &opDatasetShow, req, func(ctx context.Context, p Principal, req DatasetRequest) (DatasetShowResponse, error) {
		d, err := a.dataset(ctx, p, auth.ActRead, req.ID)
		if err != nil {
			return DatasetShowResponse{}, err
		}
		m, err := dataset.FetchManifest(ctx, a.d.Store, a.d.DataDir, d)
		if err != nil {
			return DatasetShowResponse{}, err
		}
		refs, err := a.d.Store.ListDatasetRefs(ctx, d.ID)
		if err != nil {
			return DatasetShowResponse{}, err
		}
		if refs == nil {
			refs = []core.DatasetRef{}
		}
		return DatasetShowResponse{Dataset: d, Manifest: m, References: refs}, nil
	})
}

// DatasetVerify recomputes a dataset's hash from its files.
func (a *App) DatasetVerify(ctx context.Context, p Principal, req DatasetRequest) (dataset.VerifyResult, error) {
	return run(ctx, a, p, &opDatasetVerify, req, func(ctx context.Context, p Principal, req DatasetRequest) (dataset.VerifyResult, error) {
		d, err := a.dataset(ctx, p, auth.ActRead, req.ID)
		if err != nil {
			return dataset.VerifyResult{}, err
		}
		return dataset.FetchVerify(ctx, a.d.Store, a.d.DataDir, d)
	})
}

// DatasetReport returns a dataset's report.
func (a *App) DatasetReport(ctx context.Context, p Principal, req DatasetRequest) (*dataset.Report, error) {
	return run(ctx, a, p, &opDatasetReport, req, func(ctx context.Context, p Principal, req DatasetRequest) (*dataset.Report, error) {
		d, err := a.dataset(ctx, p, auth.ActRead, req.ID)
		if err != nil {
			return nil, err
		}
		return dataset.FetchReport(ctx, a.d.Store, a.d.DataDir, d)
	})
}

// DeletedResponse names what was deleted.
type DeletedResponse struct {
	Deleted string `json:"deleted"`
}

// DatasetDelete deletes a dataset nothing references.
func (a *App) DatasetDelete(ctx context.Context, p Principal, req DatasetRequest) (DeletedResponse, error) {
	return run(ctx, a, p, &opDatasetDelete, req, func(ctx context.Context, p Principal, req DatasetRequest) (DeletedResponse, error) {
		d, err := a.dataset(ctx, p, auth.ActDataset, req.ID)
		if err != nil {
			return DeletedResponse{}, err
		}
		if err := dataset.Delete(ctx, a.d.Store, a.d.DataDir, d.ID); err != nil {
			return DeletedResponse{}, err
		}
		return DeletedResponse{Deleted: d.ID}, nil
	})
}

// ---- jobs

// JobSubmitRequest is one training experiment.
type JobSubmitRequest struct {
	DatasetID string          `json:"datasetId" jsonschema:"dataset id"`
	Trainer   string          `json:"trainer" jsonschema:"trainer reference: a native trainer (e.g. linear_state_space@1, hybrid_residual@1) or a registered external one, ext:NAME (exec:PATH only from the local CLI)"`
	Params    json.RawMessage `json:"params,omitempty" jsonschema:"trainer parameters (a JSON object); a native trainer's are checked against its schema before queueing (trainer.show, docs/trainers.md), an external trainer's are not"`
	Seed      int64           `json:"seed,omitempty" jsonschema:"random seed (default 1)"`
	ParentID  string          `json:"parentId,omitempty" jsonschema:"the experiment this one derives from"`
	Note      string          `json:"note,omitempty" jsonschema:"what changed and why"`
	Env       string          `json:"env,omitempty" jsonschema:"named environment of an exec trainer"`
	Timeout   Duration        `json:"timeout,omitempty" jsonschema:"wall-clock limit of the job (e.g. 30m; default 30m, at most 24h)"`
	Stall     Duration        `json:"stall,omitempty" jsonschema:"fail the job after this long without progress (e.g. 5m; default 10m, at most 24h)"`
	// GateProfile is stored with the job; the model's gate report records
	// the profile and version it was judged by.
	GateProfile string `json:"gateProfile,omitempty" jsonschema:"model gate profile to judge the model by (gate.profiles), of the dataset's purpose; default: the purpose's default profile. A named profile is audited (job.submit, with its version)"`
}

// Validate requires dataset and trainer and non-negative limits.
func (r *JobSubmitRequest) Validate() error {
	if err := firstErr(required("datasetId", r.DatasetID), required("trainer", r.Trainer)); err != nil {
		return err
	}
	if r.Timeout < 0 || r.Timeout.D() > jobs.MaxTimeout {
		return core.FieldErrorf(core.CodeInvalidArgument, "timeout", "timeout must be 0 (the default %s) up to %s, not %s", jobs.DefaultTimeout, jobs.MaxTimeout, r.Timeout)
	}
	if r.Stall < 0 || r.Stall.D() > jobs.MaxTimeout {
		return core.FieldErrorf(core.CodeInvalidArgument, "stall", "stall must be 0 (the default %s) up to %s, not %s", jobs.DefaultStall, jobs.MaxTimeout, r.Stall)
	}
	return nil
}

func (a *App) runner() (*jobs.Runner, error) {
	if a.d.Runner == nil {
		return nil, core.Errorf(core.CodeStoreUnavailable, "this process runs no job system")
	}
	return a.d.Runner, nil
}

// JobLine is the line of a job (its dataset's), cached: a job never
// changes dataset.
func (a *App) JobLine(ctx context.Context, j core.Job) (string, error) {
	if v, ok := a.jobLines.Load(j.ID); ok {
		return v.(string), nil
	}
	id := j.DatasetID
	if id == "" {
		jj, err := a.d.Store.GetJob(ctx, j.ID)
		if err != nil {
			return "", err
		}
		id = jj.DatasetID
	}
	d, err := a.d.Store.GetDataset(ctx, id)
	if err != nil {
		return "", err
	}
	a.jobLines.Store(j.ID, d.LineID)
	return d.LineID, nil
}

// JobSubmit queues a training job.
func (a *App) JobSubmit(ctx context.Context, p Principal, req JobSubmitRequest) (core.Job, error) {
	return run(ctx, a, p, &opJobSubmit, req, func(ctx context.Context, p Principal, req JobSubmitRequest) (core.Job, error) {
		d, err := a.dataset(ctx, p, auth.ActJob, req.DatasetID)
		if err != nil {
			return core.Job{}, err
		}
		var gp eval.Profile
		if req.GateProfile != "" {
			if gp, err = eval.ProfileForJob(d.Purpose, req.GateProfile); err != nil {
				return core.Job{}, err
			}
		}
		r, err := a.runner()
		if err != nil {
			return core.Job{}, err
		}
		if err := checkTrainerRef(p, req.Trainer); err != nil {
			return core.Job{}, err
		}
		if r.IsNative(req.Trainer) {
			if err := a.checkParams(req.Trainer, req.Params); err != nil {
				return core.Job{}, err
			}
			if err := a.checkDatasetParams(req.Trainer, req.Params, d); err != nil {
				return core.Job{}, err
			}
			if req.Params, err = a.checkPhysicsParam(ctx, req.Params); err != nil {
				return core.Job{}, err
			}
		}
		j, err := r.Submit(ctx, jobs.SubmitRequest{DatasetID: req.DatasetID, TrainerRef: req.Trainer, Params: req.Params, Seed: req.Seed,
			ParentID: req.ParentID, ChangeNote: req.Note, EnvName: req.Env, Timeout: req.Timeout.D(), Stall: req.Stall.D(), CreatedBy: p.Name,
			GateProfile: req.GateProfile})
		if err != nil || req.GateProfile == "" {
			return j, err
		}
		// Naming the criteria a model is judged by (e.g. a version without
		// the interval rule) is a decision on record.
		if _, err := a.auditLog().Append(ctx, p.Name, "job.submit", j.ID, d.LineID, map[string]any{"dataset": j.DatasetID, "trainer": j.TrainerRef,
			"gateProfile": gp.ID, "gateProfileVersion": gp.Version}); err != nil {
			return j, err
		}
		return j, nil
	})
}

// JobListRequest filters jobs.
type JobListRequest struct {
	Status  string `json:"status,omitempty" jsonschema:"only jobs in this status"`
	Dataset string `json:"dataset,omitempty" jsonschema:"only jobs of this dataset"`
	Limit   int    `json:"limit,omitempty" jsonschema:"at most this many (default 1000)"`
}

// Validate bounds the limit.
func (r *JobListRequest) Validate() error { return limitIn("limit", r.Limit, 1, 100_000) }

// JobList lists jobs of p's lines, newest first.
func (a *App) JobList(ctx context.Context, p Principal, req JobListRequest) (List[core.Job], error) {
	return run(ctx, a, p, &opJobList, req, func(ctx context.Context, p Principal, req JobListRequest) (List[core.Job], error) {
		limit := req.Limit
		if limit == 0 {
			limit = 1000
		}
		js, err := a.d.Store.ListJobs(ctx, core.JobFilter{Status: core.JobStatus(req.Status), DatasetID: req.Dataset, Limit: limit})
		if err != nil {
			return List[core.Job]{}, err
		}
		out := []core.Job{}
		for _, j := range js {
			if !p.AllLines() {
				l, err := a.JobLine(ctx, j)
				if err != nil || !p.InScope(l) {
					continue
				}
			}
			out = append(out, j)
		}
		return ListOf(out), nil
	})
}

// JobRequest names a job.
type JobRequest struct {
	ID string `json:"id" jsonschema:"job id"`
}

// Validate requires the id.
func (r *JobRequest) Validate() error { return required("id", r.ID) }

// job reads a job and checks p's line scope for act.
func (a *App) job(ctx context.Context, p Principal, act auth.Action, id string) (core.Job, error) {
	j, err := a.d.Store.GetJob(ctx, id)
	if err != nil {
		return j, unseen(p, err)
	}
	l, err := a.JobLine(ctx, j)
	if err != nil {
		return j, err
	}
	return j, p.Allow(act, l)
}

// JobShow returns a job.
func (a *App) JobShow(ctx context.Context, p Principal, req JobRequest) (core.Job, error) {
	return run(ctx, a, p, &opJobShow, req, func(ctx context.Context, p Principal, req JobRequest) (core.Job, error) {
		return a.job(ctx, p, auth.ActRead, req.ID)
	})
}

// JobCancel cancels a queued or running job.
func (a *App) JobCancel(ctx context.Context, p Principal, req JobRequest) (core.Job, error) {
	return run(ctx, a, p, &opJobCancel, req, func(ctx context.Context, p Principal, req JobRequest) (core.Job, error) {
		j, err := a.job(ctx, p, auth.ActJob, req.ID)
		if err != nil {
			return j, err
		}
		r, err := a.runner()
		if err != nil {
			return j, err
		}
		return r.Cancel(ctx, j.ID)
	})
}

// JobRetry retries a finished job as a new experiment.
func (a *App) JobRetry(ctx context.Context, p Principal, req JobRequest) (core.Job, error) {
	return run(ctx, a, p, &opJobRetry, req, func(ctx context.Context, p Principal, req JobRequest) (core.Job, error) {
		j, err := a.job(ctx, p, auth.ActJob, req.ID)
		if err != nil {
			return j, err
		}
		r, err := a.runner()
		if err != nil {
			return j, err
		}
		// A retry re-runs the job's trainer and params: the submit rules
		// hold for it too (a job queued before them may name a path).
		if err := checkTrainerRef(p, j.TrainerRef); err != nil {
			return j, err
		}
		if r.IsNative(j.TrainerRef) {
			if err := a.checkParams(j.TrainerRef, j.Params); err != nil {
				return j, err
			}
			if _, err := a.checkPhysicsParam(ctx, j.Params); err != nil {
				return j, err
			}
		}
		return r.Retry(ctx, j.ID, p.Name)
	})
}

// Log read limits.
const (
	DefaultLogBytes = 64 << 10
	MaxLogBytes     = 1 << 20
)

// JobLogsRequest reads a job's log from a byte offset.
type JobLogsRequest struct {
	ID       string `json:"id" jsonschema:"job id"`
	Offset   int64  `json:"offset,omitempty" jsonschema:"byte offset into the whole log (all parts, oldest first) to read from"`
	MaxBytes int    `json:"maxBytes,omitempty" jsonschema:"at most this many bytes (default 65536, at most 1048576)"`
}

// Validate requires the id and a non-negative offset.
func (r *JobLogsRequest) Validate() error {
	if r.Offset < 0 {
		return core.FieldErrorf(core.CodeInvalidArgument, "offset", "offset must be ≥ 0")
	}
	return firstErr(required("id", r.ID), limitIn("maxBytes", r.MaxBytes, 1, MaxLogBytes))
}

// JobLogsResponse is a slice of the log.
type JobLogsResponse struct {
	JobID      string         `json:"jobId"`
	Status     core.JobStatus `json:"status"`
	Offset     int64          `json:"offset"`
	NextOffset int64          `json:"nextOffset" jsonschema:"offset to continue from"`
	Size       int64          `json:"size" jsonschema:"bytes in the log so far"`
	More       bool           `json:"more" jsonschema:"more bytes exist after nextOffset now"`
	Text       string         `json:"text"`
}

// logParts lists a job's log files in the open logs directory d oldest
// first: trainer.log.N … .1, then trainer.log (the rotation of
// internal/trainer/exec).
func logParts(d *safefile.Dir) []string {
	names, _ := d.Names() // an unreadable directory has no parts
	var m []string
	for _, n := range names {
		if s, ok := strings.CutPrefix(n, extrun.LogName+"."); ok {
			if _, err := strconv.Atoi(s); err == nil {
				m = append(m, n)
			}
		}
	}
	sort.Slice(m, func(i, j int) bool { return len(m[i]) > len(m[j]) || (len(m[i]) == len(m[j]) && m[i] > m[j]) })
	return append(m, extrun.LogName)
}

// JobLogs reads up to MaxBytes of a job's log from Offset.
func (a *App) JobLogs(ctx context.Context, p Principal, req JobLogsRequest) (JobLogsResponse, error) {
	return run(ctx, a, p, &opJobLogs, req, func(ctx context.Context, p Principal, req JobLogsRequest) (JobLogsResponse, error) {
		j, err := a.job(ctx, p, auth.ActRead, req.ID)
		if err != nil {
			return JobLogsResponse{}, err
		}
		n := req.MaxBytes
		if n <= 0 {
			n = DefaultLogBytes
		}
		out := JobLogsResponse{JobID: j.ID, Status: j.Status, Offset: req.Offset}
		var buf []byte
		var pos int64
		// The trainer can change its logs folder: it is opened without
		// following a link, and each part in it without following a link
		// and without blocking (O_NOFOLLOW, O_NONBLOCK, then fstat: regular
		// files only). What the trainer left in their place is skipped.
		d, derr := safefile.OpenDir(filepath.Join(a.d.DataDir, "jobs", j.ID, "logs"))
		if derr == nil {
			defer func() { _ = d.Close() }() // a directory opened read-only
			for _, part := range logParts(d) {
				f, err := d.OpenFile(part, os.O_RDONLY, 0)
				if err != nil {
					continue
				}
				st, err := f.Stat()
				if err != nil {
					_ = f.Close()
					continue
				}
				size := st.Size()
				if lo := max(req.Offset+int64(len(buf)), pos); len(buf) < n && lo < pos+size {
					chunk := make([]byte, min(int64(n-len(buf)), pos+size-lo))
					k, err := f.ReadAt(chunk, lo-pos)
					if err != nil && err != io.EOF {
						_ = f.Close()
						return JobLogsResponse{}, core.Wrap(core.CodeInternal, err, "job %s log", j.ID)
					}
					buf = append(buf, chunk[:k]...)
				}
				_ = f.Close()
				pos += size
			}
		}
		out.Size = pos
		out.Text = strings.ToValidUTF8(string(buf), "\uFFFD")
		out.NextOffset = req.Offset + int64(len(buf))
		if req.Offset > pos {
			out.NextOffset = req.Offset
		}
		out.More = out.NextOffset < pos
		return out, nil
	})
}

// ---- models

// ModelListRequest filters models.
type ModelListRequest struct {
	Line    string `json:"line,omitempty" jsonschema:"only this line"`
	Stage   string `json:"stage,omitempty" jsonschema:"only this stage"`
	Recipe  string `json:"recipe,omitempty" jsonschema:"only this recipe"`
	Purpose string `json:"purpose,omitempty" jsonschema:"only this purpose"`
	Dataset string `json:"dataset,omitempty" jsonschema:"only models of this dataset"`
}

// ModelList lists the models of p's lines, newest first.
func (a *App) ModelList(ctx context.Context, p Principal, req ModelListRequest) (List[core.Model], error) {
	return run(ctx, a, p, &opModelList, req, func(ctx context.Context, p Principal, req ModelListRequest) (List[core.Model], error) {
		return listIn(p, req.Line, func() ([]core.Model, error) {
			return a.d.Store.ListModels(ctx, core.ModelFilter{Line: req.Line, Stage: req.Stage, Recipe: req.Recipe, Purpose: req.Purpose, DatasetID: req.Dataset})
		}, func(m core.Model) string { return m.LineID })
	})
}

// ModelRequest names a model.
type ModelRequest struct {
	ID string `json:"id" jsonschema:"model id"`
}

// Validate requires the id.
func (r *ModelRequest) Validate() error { return required("id", r.ID) }

func (a *App) model(ctx context.Context, p Principal, act auth.Action, id string) (core.Model, error) {
	m, err := a.d.Store.GetModel(ctx, id)
	if err != nil {
		return m, unseen(p, err)
	}
	return m, p.Allow(act, m.LineID)
}

// ModelShowResponse is a model card with its stage history.
type ModelShowResponse struct {
	Model   core.Model         `json:"model"`
	History []core.StageChange `json:"history"`
	// Training is the artifact's own account of its training (the
	// "training" object of model.json: structure selection table, chosen
	// structure, estimated delays), when the artifact is on this machine
	// and records one.
	Training json.RawMessage `json:"training,omitempty"`
}

// ModelShow returns a model with its stage history.
func (a *App) ModelShow(ctx context.Context, p Principal, req ModelRequest) (ModelShowResponse, error) {
	return run(ctx, a, p, &opModelShow, req, func(ctx context.Context, p Principal, req ModelRequest) (ModelShowResponse, error) {
		m, err := a.model(ctx, p, auth.ActRead, req.ID)
		if err != nil {
			return ModelShowResponse{}, err
		}
		h, err := a.d.Store.ModelHistory(ctx, m.ID)
		if err != nil {
			return ModelShowResponse{}, err
		}
		if h == nil {
			h = []core.StageChange{}
		}
		return ModelShowResponse{Model: m, History: h, Training: a.artifactTraining(m)}, nil
	})
}

// artifactTraining returns the "training" object of the model's
// model.json when its artifact is present locally (nil otherwise: the card
// is shown without it).
func (a *App) artifactTraining(m core.Model) json.RawMessage {
	if m.ArtifactsPruned || m.ArtifactPath == "" {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(registry.New(a.d.Store, a.d.DataDir, nil).ArtifactDir(m), model.FileName))
	if err != nil {
		return nil
	}
	var art struct {
		Training json.RawMessage `json:"training"`
	}
	if json.Unmarshal(b, &art) != nil || len(art.Training) == 0 || string(art.Training) == "null" {
		return nil
	}
	return art.Training
}

func (a *App) registry() *registry.Registry { return registry.New(a.d.Store, a.d.DataDir, a.d.Bus) }

// ModelPromoteRequest moves a model to shadow or production.
type ModelPromoteRequest struct {
	ID     string `json:"id" jsonschema:"model id"`
	To     string `json:"to" jsonschema:"shadow or production"`
	Expect string `json:"expect,omitempty" jsonschema:"the stage the caller believes the model is in (compare-and-set)"`
	Reason string `json:"reason,omitempty" jsonschema:"why (recorded in the stage history and audit log)"`
}

// Validate checks the id and the target stage.
func (r *ModelPromoteRequest) Validate() error {
	if err := required("id", r.ID); err != nil {
		return err
	}
	if r.To != core.StageShadow && r.To != core.StageProduction {
		return core.FieldErrorf(core.CodeInvalidArgument, "to", "to must be shadow or production (retire: model.retire)")
	}
	return nil
}

// ModelPromote moves a model to shadow or, for an approver or admin, to
// production.
func (a *App) ModelPromote(ctx context.Context, p Principal, req ModelPromoteRequest) (core.Model, error) {
	return run(ctx, a, p, &opModelPromote, req, func(ctx context.Context, p Principal, req ModelPromoteRequest) (core.Model, error) {
		act := auth.ActModelStage
		if req.To == core.StageProduction {
			// Production is a person's decision: approver or admin.
			act = auth.ActPromoteProduction
			if err := p.Allow(act, ""); err != nil {
				return core.Model{}, err
			}
		}
		m, err := a.model(ctx, p, act, req.ID)
		if err != nil {
			return m, err
		}
		return a.registry().Move(ctx, m.ID, req.To, p.Name, req.Reason, req.Expect)
	})
}

// ModelRetireRequest retires a model.
type ModelRetireRequest struct {
	ID     string `json:"id" jsonschema:"model id"`
	Expect string `json:"expect,omitempty" jsonschema:"the stage the caller believes the model is in (compare-and-set)"`
	Reason string `json:"reason,omitempty" jsonschema:"why"`
}

// Validate requires the id.
func (r *ModelRetireRequest) Validate() error { return required("id", r.ID) }

// ModelRetire retires a model.
func (a *App) ModelRetire(ctx context.Context, p Principal, req ModelRetireRequest) (core.Model, error) {
	return run(ctx, a, p, &opModelRetire, req, func(ctx context.Context, p Principal, req ModelRetireRequest) (core.Model, error) {
		m, err := a.model(ctx, p, auth.ActModelStage, req.ID)
		if err != nil {
			return m, err
		}
		return a.registry().Move(ctx, m.ID, core.StageRetired, p.Name, req.Reason, req.Expect)
	})
}

// ModelPredictRequest predicts Steps steps of a run from time From.
type ModelPredictRequest struct {
	ID    string  `json:"id" jsonschema:"model id"`
	Run   string  `json:"run" jsonschema:"run id"`
	From  Instant `json:"from" jsonschema:"time of the first predicted step (epoch ms or RFC 3339)"`
	Steps int     `json:"steps,omitempty" jsonschema:"steps to predict (default 1, at most the model's horizon)"`
}

// Validate requires model and run.
func (r *ModelPredictRequest) Validate() error {
	if r.Steps < 0 {
		return core.FieldErrorf(core.CodeInvalidArgument, "steps", "steps must be positive")
	}
	return firstErr(required("id", r.ID), required("run", r.Run))
}

// Prediction is one predicted step.
type Prediction struct {
	TsMs     int64      `json:"ts"`
	Pred     []float64  `json:"prediction"`
	Lo       []float64  `json:"lo,omitempty"`
	Hi       []float64  `json:"hi,omitempty"`
	Measured []*float64 `json:"measured"`
}

// ModelPredictResponse is the prediction with the measured values.
type ModelPredictResponse struct {
	Model     string       `json:"model"`
	Run       string       `json:"run"`
	From      int64        `json:"from"`
	BeatMs    int64        `json:"beatMs"`
	Targets   []string     `json:"targets"`
	Steps     []Prediction `json:"steps"`
	Intervals bool         `json:"intervals" jsonschema:"lo/hi are the calibrated conformal interval"`
}

// ModelPredict predicts a run's targets from an instant with the model's
// own cleaning and alignment.
func (a *App) ModelPredict(ctx context.Context, p Principal, req ModelPredictRequest) (ModelPredictResponse, error) {
	return run(ctx, a, p, &opModelPredict, req, func(ctx context.Context, p Principal, req ModelPredictRequest) (ModelPredictResponse, error) {
		var zero ModelPredictResponse
		m, err := a.model(ctx, p, auth.ActRead, req.ID)
		if err != nil {
			return zero, err
		}
		// The run's line before anything names its line, product or
		// recipe (the window builder's mismatch message does).
		r, err := a.d.Store.GetRun(ctx, req.Run)
		if err != nil {
			return zero, unseen(p, err)
		}
		if err := p.Allow(auth.ActRead, r.LineID); err != nil {
			return zero, err
		}
		d, man, load, err := a.servingModel(ctx, m)
		if err != nil {
			return zero, err
		}
		steps := req.Steps
		if steps == 0 {
			steps = 1
		}
		if steps > man.HorizonSteps {
			return zero, core.FieldErrorf(core.CodeInvalidArgument, "steps", "steps must be 1..%d (the model's horizon)", man.HorizonSteps)
		}
		pr, err := load()
		if err != nil {
			return zero, err
		}
		w, err := dataset.BuildServeWindow(ctx, a.d.Store, d, req.Run, int64(req.From))
		if err != nil {
			return zero, err
		}
		if w.Missing > 0 {
			return zero, core.FieldErrorf(core.CodeDatasetEmpty, "from", "the history window before %d has %d missing value(s) after cleaning; pick another time", w.AtMs, w.Missing)
		}
		yhat, err := pr.PredictBatch(context.WithoutCancel(ctx), w.X, w.U, 1)
		if err != nil {
			return zero, err
		}
		widths := ConformalWidths(m.Metrics)
		nT, H := len(man.Targets), man.HistorySteps
		out := []Prediction{}
		for f := 0; f < steps; f++ {
			st := Prediction{TsMs: w.TS[H+f]}
			for k := 0; k < nT; k++ {
				v := float64(yhat[f*nT+k])
				st.Pred = append(st.Pred, v)
				if widths != nil && f < len(widths) && k < len(widths[f]) {
					st.Lo, st.Hi = append(st.Lo, v-widths[f][k]), append(st.Hi, v+widths[f][k])
				}
				if y := float64(w.Y[f*nT+k]); !math.IsNaN(y) {
					st.Measured = append(st.Measured, &y)
				} else {
					st.Measured = append(st.Measured, nil)
				}
			}
			out = append(out, st)
		}
		return ModelPredictResponse{Model: m.ID, Run: req.Run, From: w.AtMs, BeatMs: man.BeatMs, Targets: man.Targets, Steps: out, Intervals: widths != nil}, nil
	})
}

// ConformalWidths reads the calibrated half-widths [F][nTgt] stored in a
// model's metrics, if evaluation calibrated it.
func ConformalWidths(metrics json.RawMessage) [][]float64 {
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

// servingModel verifies a model's artifact and reads its dataset and
// manifest; load opens its predictor (after the caller's own checks).
func (a *App) servingModel(ctx context.Context, m core.Model) (core.Dataset, *dataset.Manifest, func() (model.Predictor, error), error) {
	reg := registry.New(a.d.Store, a.d.DataDir, nil)
	if err := reg.VerifyArtifact(ctx, m); err != nil {
		return core.Dataset{}, nil, nil, err
	}
	d, err := a.d.Store.GetDataset(ctx, m.DatasetID)
	if err != nil {
		return d, nil, nil, err
	}
	man, err := dataset.FetchManifest(ctx, a.d.Store, a.d.DataDir, d)
	if err != nil {
		return d, nil, nil, err
	}
	load := func() (model.Predictor, error) {
		return model.Load(reg.ArtifactDir(m), man, model.LoadOptions{ExecPredict: extrun.Predict, Formats: trainers.Formats()})
	}
	return d, man, load, nil
}

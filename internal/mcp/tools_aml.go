package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/ident/trainers"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/model"
	"github.com/aml-project/aml/internal/registry"
	extrun "github.com/aml-project/aml/internal/trainer/exec"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// register adds every tool. The list is the whole agent surface: there is
// deliberately no tool for approving, revoking or executing certificates,
// promoting models, freezing scenes or setting channels.
func (t *toolbox) register(s *sdk.Server) {
	add(s, toolDef{"aml_node_catalog", "Node catalog", "List the signals (nodes) of the lines in your scope with unit, normal range and kind: the building blocks of a dataset spec.", readOnly}, t.nodeCatalog)
	add(s, toolDef{"aml_dataset_build", "Build a dataset", "Build a training dataset from one line/product/recipe: clean (state, range, Hampel), align to the beat grid, window, split by run, normalise, hash and register it. Returns the dataset id, shapes, lineage and dropped runs.", additive}, t.datasetBuild)
	add(s, toolDef{"aml_dataset_stats", "Dataset statistics", "A dataset's report: per-node summaries, cleaning counts, lag estimates (control → target), run profiles and dropped runs.", readOnly}, t.datasetStats)
	add(s, toolDef{"aml_job_submit", "Submit a training job", "Queue a training job (one experiment) on a dataset with a trainer (native, e.g. linear_state_space@1 or hybrid_residual@1, or exec:PATH). A worker runs it; metrics and gates are computed by the platform. Poll aml_job_status.", additive}, t.jobSubmit)
	add(s, toolDef{"aml_job_status", "Job status", "A job's status, stage, progress, platform metrics, gate result and registered model.", readOnly}, t.jobStatus)
	add(s, toolDef{"aml_job_logs", "Job logs", "Read a job's trainer log (all rotated parts, oldest first) from a byte offset; continue with nextOffset.", readOnly}, t.jobLogs)
	add(s, toolDef{"aml_job_cancel", "Cancel a job", "Cancel a queued job at once, or stop a running one (its process tree is killed). Irreversible; a finished job is refused.", hints{destructive: true, idempotent: true}}, t.jobCancel)
	add(s, toolDef{"aml_leaderboard", "Model leaderboard", "Registered models of a line/product/recipe ranked by the platform's test metrics (gates passed first, then test NRMSE), with each experiment's parent and change note.", readOnly}, t.leaderboard)
	add(s, toolDef{"aml_model_reference", "Model reference prediction", "Shadow reference before tuning: predict the targets of a run over the model's horizon from a given instant, with the run's own controls (baseline) and with proposed control setpoints held, plus the conformal interval. Nothing is stored or written.", readOnly}, t.modelReference)
	t.registerTwin(s)
}

// allow checks the principal for action a on line.
func (t *toolbox) allow(a auth.Action, line string) error { return t.p.Allow(a, line) }

// lineFilter resolves an optional line argument against the scope: a
// named line must be in scope; no line means every line in scope.
func (t *toolbox) lineFilter(line string) error {
	if line != "" {
		return t.allow(auth.ActRead, line)
	}
	return t.allow(auth.ActRead, "")
}

// ---- aml_node_catalog

type nodeCatalogIn struct {
	LineID string `json:"lineId,omitempty" jsonschema:"only nodes of this line (default: every line in your scope)"`
}

type nodeCatalogOut struct {
	Nodes []core.Node `json:"nodes" jsonschema:"nodes with unit, normal range [min, max], kind (sensor or setpoint) and physical meaning"`
	Lines []string    `json:"lines" jsonschema:"the lines the nodes belong to"`
}

func (t *toolbox) nodeCatalog(ctx context.Context, in nodeCatalogIn) (nodeCatalogOut, error) {
	if err := t.lineFilter(in.LineID); err != nil {
		return nodeCatalogOut{}, err
	}
	ns, err := t.d.Store.ListNodes(ctx, in.LineID)
	if err != nil {
		return nodeCatalogOut{}, err
	}
	out := nodeCatalogOut{Nodes: []core.Node{}, Lines: []string{}}
	lines := map[string]bool{}
	for _, n := range ns {
		if !t.p.InScope(n.LineID) {
			continue
		}
		out.Nodes = append(out.Nodes, n)
		if !lines[n.LineID] {
			lines[n.LineID] = true
			out.Lines = append(out.Lines, n.LineID)
		}
	}
	sort.Strings(out.Lines)
	return out, nil
}

// ---- aml_dataset_build

type unitContractIn struct {
	Unit      string   `json:"unit" jsonschema:"the node's source unit"`
	ModelUnit string   `json:"modelUnit,omitempty" jsonschema:"the unit the model sees (default: unit)"`
	Scale     *float64 `json:"scale" jsonschema:"model = value*scale + offset; required, non-zero (never assumed)"`
	Offset    *float64 `json:"offset" jsonschema:"model = value*scale + offset; required (never assumed)"`
	DelayMs   int64    `json:"delayMs,omitempty" jsonschema:"measurement delay undone by shifting the node's samples earlier, ms"`
}

type nodeSpecIn struct {
	NodeID       string          `json:"nodeId" jsonschema:"node id from aml_node_catalog"`
	Role         string          `json:"role" jsonschema:"control, disturbance, feature or target (at least one target)"`
	UnitContract *unitContractIn `json:"unitContract,omitempty" jsonschema:"unit conversion source to model unit (fails closed when incomplete)"`
}

type hampelIn struct {
	WindowMs  int64   `json:"windowMs" jsonschema:"half window of the Hampel filter, ms"`
	Threshold float64 `json:"threshold" jsonschema:"outlier threshold in scaled MADs (0 disables the filter)"`
}

type cleaningIn struct {
	StateFilter  *bool     `json:"stateFilter,omitempty" jsonschema:"drop samples whose state is not ok (default true)"`
	Range        *bool     `json:"range,omitempty" jsonschema:"drop samples outside the node's [min, max] (default true)"`
	Hampel       *hampelIn `json:"hampel,omitempty" jsonschema:"Hampel outlier filter (default window 5 beats, threshold 3)"`
	MaxInterpMs  *int64    `json:"maxInterpMs,omitempty" jsonschema:"longest gap bridged by linear interpolation, ms (default 3 beats)"`
	MaxDropRatio *float64  `json:"maxDropRatio,omitempty" jsonschema:"largest share of a run's grid that may be missing before the run is excluded (default 0.3)"`
}

type splitIn struct {
	ValRatio  float64 `json:"valRatio" jsonschema:"share of runs for validation (0..0.8; val+test at most 0.9)"`
	TestRatio float64 `json:"testRatio" jsonschema:"share of runs for test (0..0.8)"`
	Seed      uint64  `json:"seed" jsonschema:"seed of the run shuffle"`
	Mode      string  `json:"mode,omitempty" jsonschema:"by_run (default) or time_blocks"`
	Blocks    int     `json:"blocks,omitempty" jsonschema:"time_blocks only: contiguous blocks per run (default 10)"`
}

type datasetBuildIn struct {
	LineID       string       `json:"lineId" jsonschema:"production line (required; never mix lines)"`
	ProductID    string       `json:"productId" jsonschema:"product (required)"`
	RecipeID     string       `json:"recipeId" jsonschema:"recipe (required; never mix recipes)"`
	RunIDs       []string     `json:"runIds,omitempty" jsonschema:"runs to use, at most 200 (default: every ended run of the recipe)"`
	Nodes        []nodeSpecIn `json:"nodes" jsonschema:"2 to 64 nodes with their roles, at least one target"`
	FromMs       *int64       `json:"fromMs,omitempty" jsonschema:"only samples at or after this epoch ms"`
	ToMs         *int64       `json:"toMs,omitempty" jsonschema:"only samples at or before this epoch ms"`
	BeatMs       int64        `json:"beatMs" jsonschema:"grid step in ms (1 s to 1 h)"`
	HistorySteps int          `json:"historySteps" jsonschema:"window history H in beats (1..2048; 0 for static_response)"`
	HorizonSteps int          `json:"horizonSteps" jsonschema:"window horizon F in beats (1..512; 0 for static_response)"`
	Stride       int          `json:"stride,omitempty" jsonschema:"beats between window starts (default 1)"`
	Cleaning     *cleaningIn  `json:"cleaning,omitempty" jsonschema:"cleaning settings (defaults when omitted)"`
	Split        splitIn      `json:"split" jsonschema:"train/val/test split by run"`
	Purpose      string       `json:"purpose" jsonschema:"mpc_surrogate, quality_predict or static_response"`
	Note         string       `json:"note,omitempty" jsonschema:"free text: why this dataset"`
}

type datasetBuildOut struct {
	Dataset core.Dataset        `json:"dataset" jsonschema:"the registered dataset (id, sha256, windows per split)"`
	Shapes  map[string][]int    `json:"shapes" jsonschema:"array shapes (x, u, y, ...)"`
	Lineage dataset.Lineage     `json:"lineage" jsonschema:"whether every run's recipe context is verified; an unverified dataset's models may not drive optimisation"`
	Dropped []dataset.RunReason `json:"droppedRuns" jsonschema:"runs left out and why"`
	Seconds float64             `json:"seconds" jsonschema:"build time"`
	Note    string              `json:"note" jsonschema:"what to do next"`
}

func (t *toolbox) datasetBuild(ctx context.Context, in datasetBuildIn) (datasetBuildOut, error) {
	if err := t.allow(auth.ActDataset, in.LineID); err != nil {
		return datasetBuildOut{}, err
	}
	if in.LineID == "" {
		return datasetBuildOut{}, core.FieldErrorf(core.CodeSpecInvalid, "lineId", "lineId is required")
	}
	// Through the spec's strict parser: the same validation, defaults and
	// error fields as "aml dataset build --spec".
	spec := map[string]any{"lineId": in.LineID, "productId": in.ProductID, "recipeId": in.RecipeID, "nodes": in.Nodes,
		"beatMs": in.BeatMs, "historySteps": in.HistorySteps, "horizonSteps": in.HorizonSteps, "split": in.Split, "purpose": in.Purpose,
		"cleaning": map[string]any{}}
	if in.Cleaning != nil {
		spec["cleaning"] = in.Cleaning
	}
	if len(in.RunIDs) > 0 {
		spec["runIds"] = in.RunIDs
	}
	if in.FromMs != nil {
		spec["fromMs"] = *in.FromMs
	}
	if in.ToMs != nil {
		spec["toMs"] = *in.ToMs
	}
	if in.Stride != 0 {
		spec["stride"] = in.Stride
	}
	if in.Note != "" {
		spec["note"] = in.Note
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		return datasetBuildOut{}, core.Wrap(core.CodeSpecInvalid, err, "spec")
	}
	sp, err := dataset.ParseSpec(raw)
	if err != nil {
		return datasetBuildOut{}, err
	}
	t0 := time.Now()
	res, err := dataset.Build(ctx, t.d.Store, sp, dataset.Options{DataDir: t.d.DataDir, CreatedBy: t.p.Name, Bus: t.d.Bus})
	if err != nil {
		return datasetBuildOut{}, err
	}
	out := datasetBuildOut{Dataset: res.Dataset, Shapes: res.Manifest.Shapes, Lineage: res.Manifest.Lineage, Dropped: res.Report.Dropped,
		Seconds: time.Since(t0).Seconds(), Note: "inspect it with aml_dataset_stats; train with aml_job_submit"}
	if out.Dropped == nil {
		out.Dropped = []dataset.RunReason{}
	}
	return out, nil
}

// ---- aml_dataset_stats

type datasetIn struct {
	DatasetID string `json:"datasetId" jsonschema:"dataset id"`
}

type datasetStatsOut struct {
	Dataset core.Dataset    `json:"dataset"`
	Report  *dataset.Report `json:"report" jsonschema:"per-node summaries (train runs), cleaning counts, lags, run profiles, dropped runs"`
}

// dataset reads a dataset and checks that the caller may take action a on
// its line.
func (t *toolbox) dataset(ctx context.Context, id string, a auth.Action) (core.Dataset, error) {
	if strings.TrimSpace(id) == "" {
		return core.Dataset{}, core.FieldErrorf(core.CodeInvalidArgument, "datasetId", "datasetId is required")
	}
	if err := t.allow(a, ""); err != nil {
		return core.Dataset{}, err
	}
	d, err := t.d.Store.GetDataset(ctx, id)
	if err != nil {
		return core.Dataset{}, err
	}
	return d, t.allow(a, d.LineID)
}

func (t *toolbox) datasetStats(ctx context.Context, in datasetIn) (datasetStatsOut, error) {
	d, err := t.dataset(ctx, in.DatasetID, auth.ActRead)
	if err != nil {
		return datasetStatsOut{}, err
	}
	r, err := dataset.FetchReport(ctx, t.d.Store, t.d.DataDir, d)
	if err != nil {
		return datasetStatsOut{}, err
	}
	return datasetStatsOut{Dataset: d, Report: r}, nil
}

// ---- jobs

type jobSubmitIn struct {
	DatasetID  string         `json:"datasetId" jsonschema:"dataset to train on"`
	Trainer    string         `json:"trainer" jsonschema:"trainer reference: a native trainer (one_step@1, linear_state_space@1, static_response@1, hybrid_residual@1) or exec:PATH"`
	Params     map[string]any `json:"params,omitempty" jsonschema:"trainer parameters (a JSON object)"`
	Seed       int64          `json:"seed,omitempty" jsonschema:"random seed"`
	ParentID   string         `json:"parentId,omitempty" jsonschema:"the parent experiment (job id) this one changes"`
	ChangeNote string         `json:"changeNote,omitempty" jsonschema:"what changed compared with the parent"`
	TimeoutSec int            `json:"timeoutSec,omitempty" jsonschema:"wall-clock limit of training, seconds (default 30 min)"`
	StallSec   int            `json:"stallSec,omitempty" jsonschema:"fail when no progress is reported for this long, seconds (default 10 min)"`
}

type jobOut struct {
	Job  core.Job `json:"job"`
	Note string   `json:"note,omitempty"`
}

func (t *toolbox) runner() (*jobs.Runner, error) {
	if t.d.Runner == nil {
		return nil, core.Errorf(core.CodeInternal, "this server has no job runner")
	}
	return t.d.Runner, nil
}

func (t *toolbox) jobSubmit(ctx context.Context, in jobSubmitIn) (jobOut, error) {
	d, err := t.dataset(ctx, in.DatasetID, auth.ActJob)
	if err != nil {
		return jobOut{}, err
	}
	if strings.TrimSpace(in.Trainer) == "" {
		return jobOut{}, core.FieldErrorf(core.CodeInvalidArgument, "trainer", "trainer is required")
	}
	if in.TimeoutSec < 0 || in.StallSec < 0 {
		return jobOut{}, core.FieldErrorf(core.CodeInvalidArgument, "timeoutSec", "timeoutSec and stallSec must be positive")
	}
	r, err := t.runner()
	if err != nil {
		return jobOut{}, err
	}
	var params json.RawMessage
	if in.Params != nil {
		if params, err = json.Marshal(in.Params); err != nil {
			return jobOut{}, core.FieldErrorf(core.CodeInvalidArgument, "params", "%v", err)
		}
	}
	j, err := r.Submit(ctx, jobs.SubmitRequest{DatasetID: d.ID, TrainerRef: in.Trainer, Params: params, Seed: in.Seed, ParentID: in.ParentID,
		ChangeNote: in.ChangeNote, Timeout: time.Duration(in.TimeoutSec) * time.Second, Stall: time.Duration(in.StallSec) * time.Second, CreatedBy: t.p.Name})
	if err != nil {
		return jobOut{}, err
	}
	return jobOut{Job: j, Note: "queued; a worker (aml serve or aml worker) runs it — poll aml_job_status, read aml_job_logs"}, nil
}

type jobIn struct {
	JobID string `json:"jobId" jsonschema:"job id"`
}

// job reads a job and checks action a on its dataset's line.
func (t *toolbox) job(ctx context.Context, id string, a auth.Action) (core.Job, error) {
	if strings.TrimSpace(id) == "" {
		return core.Job{}, core.FieldErrorf(core.CodeInvalidArgument, "jobId", "jobId is required")
	}
	if err := t.allow(a, ""); err != nil {
		return core.Job{}, err
	}
	j, err := t.d.Store.GetJob(ctx, id)
	if err != nil {
		return core.Job{}, err
	}
	d, err := t.d.Store.GetDataset(ctx, j.DatasetID)
	if err != nil {
		return core.Job{}, err
	}
	return j, t.allow(a, d.LineID)
}

func (t *toolbox) jobStatus(ctx context.Context, in jobIn) (jobOut, error) {
	j, err := t.job(ctx, in.JobID, auth.ActRead)
	return jobOut{Job: j}, err
}

func (t *toolbox) jobCancel(ctx context.Context, in jobIn) (jobOut, error) {
	if _, err := t.job(ctx, in.JobID, auth.ActJob); err != nil {
		return jobOut{}, err
	}
	r, err := t.runner()
	if err != nil {
		return jobOut{}, err
	}
	j, err := r.Cancel(ctx, in.JobID)
	if err != nil {
		return jobOut{}, err
	}
	note := "cancelled"
	if j.Status != core.JobCancelled {
		note = "cancel requested; the job's worker stops it within a second"
	}
	return jobOut{Job: j, Note: note}, nil
}

type jobLogsIn struct {
	JobID    string `json:"jobId" jsonschema:"job id"`
	Offset   int64  `json:"offset,omitempty" jsonschema:"byte offset into the whole log (all parts, oldest first) to read from"`
	MaxBytes int    `json:"maxBytes,omitempty" jsonschema:"at most this many bytes (default 65536, at most 1048576)"`
}

type jobLogsOut struct {
	JobID      string         `json:"jobId"`
	Status     core.JobStatus `json:"status"`
	Offset     int64          `json:"offset"`
	NextOffset int64          `json:"nextOffset" jsonschema:"offset to continue from"`
	Size       int64          `json:"size" jsonschema:"bytes in the log so far"`
	More       bool           `json:"more" jsonschema:"more bytes exist after nextOffset now"`
	Text       string         `json:"text"`
}

const (
	defaultLogBytes = 64 << 10
	maxLogBytes     = 1 << 20
)

// logParts lists a job's log files oldest first: trainer.log.N … .1, then
// trainer.log (the rotation of internal/trainer/exec).
func logParts(dir string) []string {
	base := filepath.Join(dir, "logs", extrun.LogName)
	m, _ := filepath.Glob(base + ".*")
	sort.Slice(m, func(i, j int) bool { return len(m[i]) > len(m[j]) || (len(m[i]) == len(m[j]) && m[i] > m[j]) })
	return append(m, base)
}

func (t *toolbox) jobLogs(ctx context.Context, in jobLogsIn) (jobLogsOut, error) {
	j, err := t.job(ctx, in.JobID, auth.ActRead)
	if err != nil {
		return jobLogsOut{}, err
	}
	if in.Offset < 0 {
		return jobLogsOut{}, core.FieldErrorf(core.CodeInvalidArgument, "offset", "offset must be ≥ 0")
	}
	n := in.MaxBytes
	if n <= 0 {
		n = defaultLogBytes
	}
	n = min(n, maxLogBytes)
	out := jobLogsOut{JobID: j.ID, Status: j.Status, Offset: in.Offset}
	var buf []byte
	var pos int64
	for _, p := range logParts(filepath.Join(t.d.DataDir, "jobs", j.ID)) {
		st, err := os.Stat(p)
		if err != nil {
			continue
		}
		size := st.Size()
		if lo := max(in.Offset+int64(len(buf)), pos); len(buf) < n && lo < pos+size {
			f, err := os.Open(p)
			if err != nil {
				return jobLogsOut{}, core.Wrap(core.CodeInternal, err, "job %s log", j.ID)
			}
			chunk := make([]byte, min(int64(n-len(buf)), pos+size-lo))
			k, err := f.ReadAt(chunk, lo-pos)
			f.Close()
			if err != nil && err != io.EOF {
				return jobLogsOut{}, core.Wrap(core.CodeInternal, err, "job %s log", j.ID)
			}
			buf = append(buf, chunk[:k]...)
		}
		pos += size
	}
	out.Size = pos
	out.Text = strings.ToValidUTF8(string(buf), "\uFFFD")
	out.NextOffset = in.Offset + int64(len(buf))
	if in.Offset > pos {
		out.NextOffset = in.Offset
	}
	out.More = out.NextOffset < pos
	return out, nil
}

// ---- aml_leaderboard

type leaderboardIn struct {
	LineID    string `json:"lineId,omitempty" jsonschema:"only models of this line (default: every line in your scope)"`
	ProductID string `json:"productId,omitempty" jsonschema:"only models of this product"`
	RecipeID  string `json:"recipeId,omitempty" jsonschema:"only models of this recipe"`
	Purpose   string `json:"purpose,omitempty" jsonschema:"only models of this purpose (mpc_surrogate, quality_predict, static_response)"`
	DatasetID string `json:"datasetId,omitempty" jsonschema:"only models trained on this dataset"`
	Stage     string `json:"stage,omitempty" jsonschema:"only models in this stage (candidate, shadow, production, retired)"`
	Limit     int    `json:"limit,omitempty" jsonschema:"at most this many entries (default 20, at most 200)"`
}

type leaderboardEntry struct {
	Rank            int       `json:"rank"`
	ModelID         string    `json:"modelId"`
	JobID           string    `json:"jobId"`
	ParentJobID     string    `json:"parentJobId,omitempty" jsonschema:"the experiment this one changed"`
	ChangeNote      string    `json:"changeNote,omitempty"`
	DatasetID       string    `json:"datasetId"`
	Trainer         string    `json:"trainer"`
	Stage           string    `json:"stage"`
	GatePassed      bool      `json:"gatePassed"`
	TestNRMSE       *float64  `json:"testNrmse" jsonschema:"mean rollout NRMSE over the test runs (platform metric; lower is better)"`
	TestOneStep     *float64  `json:"testOneStepNrmse"`
	ValNRMSE        *float64  `json:"valNrmse"`
	Coverage        *float64  `json:"coverage" jsonschema:"measured coverage of the conformal interval on test windows"`
	LineageVerified bool      `json:"lineageVerified"`
	Twin            bool      `json:"twin"`
	LineID          string    `json:"lineId"`
	RecipeID        string    `json:"recipeId"`
	Purpose         string    `json:"purpose"`
	CreatedAt       time.Time `json:"createdAt"`
}

type leaderboardOut struct {
	RankedBy string             `json:"rankedBy"`
	Total    int                `json:"total" jsonschema:"models matching the filter in your scope"`
	Entries  []leaderboardEntry `json:"entries"`
}

// modelScores reads the platform metrics a leaderboard ranks by.
type modelScores struct {
	Val struct {
		MeanNRMSE *float64 `json:"meanNrmse"`
	} `json:"val"`
	Test struct {
		MeanNRMSE        *float64 `json:"meanNrmse"`
		MeanOneStepNRMSE *float64 `json:"meanOneStepNrmse"`
	} `json:"test"`
	Coverage *struct {
		Measured *float64 `json:"measured"`
	} `json:"coverage"`
}

func finite(p *float64) *float64 {
	if p == nil || math.IsNaN(*p) || math.IsInf(*p, 0) {
		return nil
	}
	return p
}

func (t *toolbox) leaderboard(ctx context.Context, in leaderboardIn) (leaderboardOut, error) {
	if err := t.lineFilter(in.LineID); err != nil {
		return leaderboardOut{}, err
	}
	limit := in.Limit
	if limit <= 0 {
		limit = 20
	}
	limit = min(limit, 200)
	ms, err := t.d.Store.ListModels(ctx, core.ModelFilter{Line: in.LineID, Product: in.ProductID, Recipe: in.RecipeID, Purpose: in.Purpose, Stage: in.Stage, DatasetID: in.DatasetID})
	if err != nil {
		return leaderboardOut{}, err
	}
	out := leaderboardOut{RankedBy: "gatePassed desc, testNrmse asc (missing last), createdAt desc", Entries: []leaderboardEntry{}}
	var es []leaderboardEntry
	for _, m := range ms {
		if !t.p.InScope(m.LineID) {
			continue
		}
		var sc modelScores
		_ = json.Unmarshal(m.Metrics, &sc) // a model without metrics ranks last
		e := leaderboardEntry{ModelID: m.ID, JobID: m.JobID, DatasetID: m.DatasetID, Trainer: m.TrainerRef, Stage: m.Stage, GatePassed: m.GatePassed,
			TestNRMSE: finite(sc.Test.MeanNRMSE), TestOneStep: finite(sc.Test.MeanOneStepNRMSE), ValNRMSE: finite(sc.Val.MeanNRMSE),
			LineageVerified: m.LineageVerified, Twin: m.Twin, LineID: m.LineID, RecipeID: m.RecipeID, Purpose: m.Purpose, CreatedAt: m.CreatedAt}
		if sc.Coverage != nil {
			e.Coverage = finite(sc.Coverage.Measured)
		}
		es = append(es, e)
	}
	sort.SliceStable(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if a.GatePassed != b.GatePassed {
			return a.GatePassed
		}
		if (a.TestNRMSE == nil) != (b.TestNRMSE == nil) {
			return a.TestNRMSE != nil
		}
		if a.TestNRMSE != nil && *a.TestNRMSE != *b.TestNRMSE {
			return *a.TestNRMSE < *b.TestNRMSE
		}
		return a.CreatedAt.After(b.CreatedAt)
	})
	out.Total = len(es)
	for i := range es[:min(len(es), limit)] {
		e := es[i]
		e.Rank = i + 1
		if j, err := t.d.Store.GetJob(ctx, e.JobID); err == nil {
			e.ParentJobID, e.ChangeNote = j.ParentID, j.ChangeNote
		}
		out.Entries = append(out.Entries, e)
	}
	return out, nil
}

// ---- aml_model_reference

type modelReferenceIn struct {
	ModelID   string             `json:"modelId,omitempty" jsonschema:"model id (default: the production model of lineId/productId/recipeId/purpose)"`
	LineID    string             `json:"lineId,omitempty" jsonschema:"with productId and recipeId: pick the production model (when modelId is not given)"`
	ProductID string             `json:"productId,omitempty"`
	RecipeID  string             `json:"recipeId,omitempty"`
	Purpose   string             `json:"purpose,omitempty" jsonschema:"purpose of the production model to pick (default mpc_surrogate)"`
	RunID     string             `json:"runId,omitempty" jsonschema:"run to predict (default: the newest run of the model's line, product and recipe)"`
	AtMs      int64              `json:"atMs,omitempty" jsonschema:"epoch ms of the first predicted step (default: the latest instant with a full window in the run)"`
	Steps     int                `json:"steps,omitempty" jsonschema:"steps to predict, 1..the model's horizon (default: the horizon)"`
	Controls  map[string]float64 `json:"controls,omitempty" jsonschema:"proposed setpoints per control node (model units), held over the horizon; controls not named keep the run's own values"`
}

type referenceStep struct {
	TsMs     int64      `json:"ts"`
	Baseline []float64  `json:"baseline" jsonschema:"prediction with the run's own controls, per target"`
	Proposed []float64  `json:"proposed,omitempty" jsonschema:"prediction with the proposed controls, per target"`
	Lo       []float64  `json:"lo,omitempty" jsonschema:"lower edge of the conformal interval around proposed (else baseline)"`
	Hi       []float64  `json:"hi,omitempty"`
	Measured []*float64 `json:"measured" jsonschema:"what the run measured, where it has it"`
}

type modelReferenceOut struct {
	ModelID   string          `json:"modelId"`
	Stage     string          `json:"stage"`
	RunID     string          `json:"runId"`
	AtMs      int64           `json:"atMs"`
	BeatMs    int64           `json:"beatMs"`
	Targets   []string        `json:"targets"`
	Controls  []string        `json:"controls"`
	Proposed  bool            `json:"proposed" jsonschema:"whether proposed controls were given"`
	Intervals bool            `json:"intervals" jsonschema:"whether the model carries a calibrated conformal interval"`
	Steps     []referenceStep `json:"steps"`
	Warnings  []string        `json:"warnings" jsonschema:"proposed controls outside the range the model was trained on (the prediction extrapolates)"`
}

func (t *toolbox) referenceModel(ctx context.Context, in modelReferenceIn) (core.Model, error) {
	if in.ModelID != "" {
		m, err := t.d.Store.GetModel(ctx, in.ModelID)
		if err != nil {
			return m, err
		}
		return m, t.allow(auth.ActRead, m.LineID)
	}
	if in.LineID == "" || in.ProductID == "" || in.RecipeID == "" {
		return core.Model{}, core.FieldErrorf(core.CodeInvalidArgument, "modelId", "give modelId, or lineId, productId and recipeId to use their production model")
	}
	if err := t.allow(auth.ActRead, in.LineID); err != nil {
		return core.Model{}, err
	}
	purpose := in.Purpose
	if purpose == "" {
		purpose = dataset.PurposeMPCSurrogate
	}
	ms, err := t.d.Store.ListModels(ctx, core.ModelFilter{Line: in.LineID, Product: in.ProductID, Recipe: in.RecipeID, Purpose: purpose, Stage: core.StageProduction})
	if err != nil {
		return core.Model{}, err
	}
	if len(ms) == 0 {
		return core.Model{}, core.FieldErrorf(core.CodeNotFound, "modelId", "no production model for %s/%s/%s (%s); a person promotes one, or pass modelId", in.LineID, in.ProductID, in.RecipeID, purpose)
	}
	return ms[0], nil
}

func (t *toolbox) modelReference(ctx context.Context, in modelReferenceIn) (modelReferenceOut, error) {
	if err := t.allow(auth.ActRead, ""); err != nil {
		return modelReferenceOut{}, err
	}
	m, err := t.referenceModel(ctx, in)
	if err != nil {
		return modelReferenceOut{}, err
	}
	reg := registry.New(t.d.Store, t.d.DataDir, nil)
	if err := reg.VerifyArtifact(ctx, m); err != nil {
		return modelReferenceOut{}, err
	}
	d, err := t.d.Store.GetDataset(ctx, m.DatasetID)
	if err != nil {
		return modelReferenceOut{}, err
	}
	man, err := dataset.FetchManifest(ctx, t.d.Store, t.d.DataDir, d)
	if err != nil {
		return modelReferenceOut{}, err
	}
	F, beat := man.HorizonSteps, man.BeatMs
	steps := in.Steps
	if steps == 0 {
		steps = F
	}
	if steps < 1 || steps > F {
		return modelReferenceOut{}, core.FieldErrorf(core.CodeInvalidArgument, "steps", "steps must be 1..%d (the model's horizon)", F)
	}
	ctrlIdx := map[string]int{}
	for k, c := range man.Controls {
		ctrlIdx[c] = k
	}
	for c, v := range in.Controls {
		if _, ok := ctrlIdx[c]; !ok {
			return modelReferenceOut{}, core.FieldErrorf(core.CodeInvalidArgument, "controls."+c, "%s is not a control of model %s (controls: %s)", c, m.ID, strings.Join(man.Controls, ", "))
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return modelReferenceOut{}, core.FieldErrorf(core.CodeNonFinite, "controls."+c, "not a finite number")
		}
	}
	// The model has only seen the controls within its train runs' range; a
	// proposal outside it is extrapolation, which the caller must know.
	warnings := []string{}
	if len(in.Controls) > 0 {
		rep, err := dataset.FetchReport(ctx, t.d.Store, t.d.DataDir, d)
		if err != nil {
			return modelReferenceOut{}, err
		}
		for _, n := range rep.Nodes {
			if v, ok := in.Controls[n.NodeID]; ok && (v < n.Summary.Min || v > n.Summary.Max) {
				warnings = append(warnings, fmt.Sprintf("%s = %g is outside the trained range [%g, %g] %s: the prediction extrapolates", n.NodeID, v, n.Summary.Min, n.Summary.Max, n.ModelUnit))
			}
		}
		sort.Strings(warnings)
	}
	runID := in.RunID
	if runID == "" {
		runs, err := t.d.Store.ListRuns(ctx, core.RunFilter{Line: m.LineID, Product: m.ProductID, Recipe: m.RecipeID})
		if err != nil {
			return modelReferenceOut{}, err
		}
		newest := int64(math.MinInt64)
		for _, r := range runs {
			if r.StartedMs > newest {
				runID, newest = r.ID, r.StartedMs
			}
		}
		if runID == "" {
			return modelReferenceOut{}, core.FieldErrorf(core.CodeNotFound, "runId", "no run of %s/%s/%s", m.LineID, m.ProductID, m.RecipeID)
		}
	}
	at := in.AtMs
	if at == 0 {
		r, err := t.d.Store.GetRun(ctx, runID)
		if err != nil {
			return modelReferenceOut{}, err
		}
		end := time.Now().UnixMilli()
		if r.EndedMs != nil {
			end = *r.EndedMs
		} else if lat, err := t.d.Store.Latest(ctx, man.AllNodes[:1], core.ContextFilter{Run: runID}); err == nil && len(lat) > 0 {
			end = lat[0].TsMs
		}
		// The last complete window: F beats of data after it, a beat spare
		// for the grid's alignment.
		at = end - int64(F+1)*beat
	}
	p, err := model.Load(reg.ArtifactDir(m), man, model.LoadOptions{ExecPredict: extrun.Predict, Formats: trainers.Formats()})
	if err != nil {
		return modelReferenceOut{}, err
	}
	w, err := dataset.BuildServeWindow(ctx, t.d.Store, d, runID, at)
	if err != nil {
		return modelReferenceOut{}, err
	}
	if w.Missing > 0 {
		return modelReferenceOut{}, core.FieldErrorf(core.CodeDatasetEmpty, "atMs", "the history window before %d has %d missing value(s) after cleaning; pick another instant", w.AtMs, w.Missing)
	}
	base, err := p.PredictBatch(ctx, w.X, w.U, 1)
	if err != nil {
		return modelReferenceOut{}, err
	}
	nT := len(man.Targets)
	nC := max(len(man.Controls), 1)
	var prop []float32
	if len(in.Controls) > 0 {
		u := append([]float32(nil), w.U...)
		for f := range F {
			for c, v := range in.Controls {
				u[f*nC+ctrlIdx[c]] = float32(v)
			}
		}
		if prop, err = p.PredictBatch(ctx, w.X, u, 1); err != nil {
			return modelReferenceOut{}, err
		}
	}
	widths := conformalWidths(m.Metrics)
	out := modelReferenceOut{ModelID: m.ID, Stage: m.Stage, RunID: runID, AtMs: w.AtMs, BeatMs: beat, Targets: man.Targets, Controls: man.Controls,
		Proposed: prop != nil, Intervals: widths != nil, Warnings: warnings}
	H := man.HistorySteps
	for f := range steps {
		st := referenceStep{TsMs: w.TS[H+f], Measured: []*float64{}}
		for k := range nT {
			b := float64(base[f*nT+k])
			st.Baseline = append(st.Baseline, b)
			c := b
			if prop != nil {
				c = float64(prop[f*nT+k])
				st.Proposed = append(st.Proposed, c)
			}
			if widths != nil && f < len(widths) && k < len(widths[f]) {
				st.Lo, st.Hi = append(st.Lo, c-widths[f][k]), append(st.Hi, c+widths[f][k])
			}
			if y := float64(w.Y[f*nT+k]); !math.IsNaN(y) {
				st.Measured = append(st.Measured, &y)
			} else {
				st.Measured = append(st.Measured, nil)
			}
		}
		out.Steps = append(out.Steps, st)
	}
	return out, nil
}

// conformalWidths reads the calibrated half-widths [F][nTgt] stored in a
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

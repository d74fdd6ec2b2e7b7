package main

// The --server form of every CLI command that has an API route (see
// client.go). Each row reads the command's own flags, checks what the
// local command checks as a usage error, calls the route and prints the
// answer with the local command's printer.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/connect"
	"github.com/aml-project/aml/internal/store/twinstore"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/ingest"
	"github.com/aml-project/aml/internal/retention"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/engine"
	"github.com/aml-project/aml/internal/twin/gate"
	"github.com/aml-project/aml/internal/twin/govern"
	"github.com/aml-project/aml/internal/twin/shadow"
	"github.com/spf13/cobra"
)

// remoteCommands maps a command path (without "aml ") to its --server
// form. A runnable command missing here refuses --server.
var remoteCommands = map[string]remoteFunc{
	"db info":    rDBInfo,
	"runs list":  rRunsList,
	"runs show":  rRunsShow,
	"nodes list": rNodesList,
	"ts query":   rTSQuery,
	"ingest csv": rIngestCSV,

	"dataset build":  rDatasetBuild,
	"dataset list":   rDatasetList,
	"dataset show":   rDatasetShow,
	"dataset verify": rDatasetVerify,
	"dataset report": rDatasetReport,
	"dataset delete": rDatasetDelete,

	"job submit": rJobSubmit,
	"job status": rJobStatus,
	"job list":   rJobList,
	"job cancel": rJobCancel,
	"job retry":  rJobRetry,
	"job logs":   rJobLogs,

	"model list":    rModelList,
	"model show":    rModelShow,
	"model promote": rModelPromote,
	"model retire":  rModelRetire,
	"model predict": rModelPredict,

	"twin scene put":      rScenePut,
	"twin scene freeze":   rSceneFreeze,
	"twin scene show":     rSceneShow,
	"twin objective put":  rObjectivePut,
	"twin objective show": rObjectiveShow,
	"twin snapshot take":  rSnapshotTake,
	"twin snapshot show":  rSnapshotShow,
	"twin snapshot list":  rSnapshotList,
	"twin trial":          rTrial,
	"twin optimize":       rOptimize,
	"twin gate":           rGate,
	"twin shadow":         rShadow,
	"twin calibrate":      rCalibrate,
	"twin calibrate list": rCalibrateList,
	"cert key":            rCertKey,
	"cert list":           rCertList,
	"cert show":           rCertShow,
	"cert issue":          rCertIssue,
	"cert approve":        rCertApprove,
	"cert revoke":         rCertRevoke,
	"cert verify":         rCertVerify,
	"cert execute":        rCertExecute,
	"channel set":         rChannelSet,
	"channel show":        rChannelShow,
	"audit verify":        rAuditVerify,
	"audit list":          rAuditList,
	"token create":        rTokenCreate,
	"token list":          rTokenList,
	"token revoke":        rTokenRevoke,
	"retention run":       rRetention,
	"connect status":      rConnectStatus,
}

// flags reads a command's flags by name (the local commands keep theirs
// in closures; the names are the interface both modes share).
type flags struct{ c *cobra.Command }

func (f flags) str(n string) string        { v, _ := f.c.Flags().GetString(n); return v }
func (f flags) strs(n string) []string     { v, _ := f.c.Flags().GetStringArray(n); return v }
func (f flags) num(n string) int           { v, _ := f.c.Flags().GetInt(n); return v }
func (f flags) num64(n string) int64       { v, _ := f.c.Flags().GetInt64(n); return v }
func (f flags) u64(n string) uint64        { v, _ := f.c.Flags().GetUint64(n); return v }
func (f flags) on(n string) bool           { v, _ := f.c.Flags().GetBool(n); return v }
func (f flags) dur(n string) time.Duration { v, _ := f.c.Flags().GetDuration(n); return v }

// set adds the non-empty flag values to q under their API names.
func (f flags) set(q url.Values, names ...[2]string) url.Values {
	for _, n := range names {
		if v := f.str(n[0]); v != "" {
			q.Set(n[1], v)
		}
	}
	return q
}

func fl(flag, param string) [2]string { return [2]string{flag, param} }

func esc(s string) string { return url.PathEscape(s) }

func get(ctx context.Context, c *client, path string, q url.Values, out any) error {
	return c.do(ctx, req{method: http.MethodGet, path: path, query: q}, out)
}

func post(ctx context.Context, c *client, path string, body, out any) error {
	if body == nil {
		body = map[string]any{}
	}
	return c.do(ctx, req{method: http.MethodPost, path: path, body: body}, out)
}

// ---- data

func rDBInfo(a *app, c *client, cmd *cobra.Command, args []string) error {
	var out dbInfo
	if err := get(cmd.Context(), c, "/info", nil, &out); err != nil {
		return err
	}
	return a.emit(out, func(w io.Writer) { printDBInfo(w, out) })
}

func rRunsList(a *app, c *client, cmd *cobra.Command, args []string) error {
	f := flags{cmd}
	runs, err := getList[core.Run](cmd.Context(), c, "/runs", f.set(url.Values{}, fl("line", "line"), fl("product", "product"), fl("recipe", "recipe"), fl("status", "status")))
	if err != nil {
		return err
	}
	return a.emit(runs, func(w io.Writer) { printRuns(w, runs) })
}

func rRunsShow(a *app, c *client, cmd *cobra.Command, args []string) error {
	var out runDetail
	if err := get(cmd.Context(), c, "/runs/"+esc(args[0]), nil, &out); err != nil {
		return err
	}
	if out.Segments == nil {
		out.Segments = []core.ContextSegment{}
	}
	return a.emit(out, func(w io.Writer) { printRunDetail(w, out) })
}

func rNodesList(a *app, c *client, cmd *cobra.Command, args []string) error {
	nodes, err := getList[core.Node](cmd.Context(), c, "/nodes", flags{cmd}.set(url.Values{}, fl("line", "line")))
	if err != nil {
		return err
	}
	return a.emit(nodes, func(w io.Writer) { printNodes(w, nodes) })
}

// maxPage is the API's largest time-series page.
const maxPage = 100_000

func rTSQuery(a *app, c *client, cmd *cobra.Command, args []string) error {
	f := flags{cmd}
	node, limit, bucket := f.str("node"), f.num("limit"), f.str("bucket")
	if node == "" {
		return usagef("--node is required")
	}
	q := f.set(url.Values{"node": {node}}, fl("run", "run"), fl("line", "line"), fl("product", "product"), fl("recipe", "recipe"))
	for _, n := range []string{"from", "to", "after"} {
		ms, err := parseTime(n, f.str(n))
		if err != nil {
			return err
		}
		if ms != nil {
			q.Set(n, strconv.FormatInt(*ms, 10))
		}
	}
	if limit < 0 {
		return usagef("--limit must be ≥ 0")
	}
	ctx := cmd.Context()
	if bucket != "" {
		d, err := time.ParseDuration(bucket)
		if err != nil || d < time.Millisecond {
			return usagef("--bucket: %q is not a duration of at least 1ms (e.g. 1s, 5m)", bucket)
		}
		q.Del("after")
		q.Set("bucket", bucket)
		var out bucketResult
		if err := get(ctx, c, "/ts", q, &out); err != nil {
			return err
		}
		if out.Buckets == nil {
			out.Buckets = []core.Bucket{}
		}
		return a.emit(out, func(w io.Writer) { printBuckets(w, out.Buckets) })
	}
	// Page through the range as the local command does.
	out := core.Page{Node: node, Points: []core.Point{}}
	for {
		pl := maxPage
		if limit > 0 {
			pl = min(pl, limit-len(out.Points))
		}
		q.Set("limit", strconv.Itoa(pl))
		var p core.Page
		if err := get(ctx, c, "/ts", q, &p); err != nil {
			return err
		}
		out.Points = append(out.Points, p.Points...)
		out.HasMore, out.NextAfterTs = p.HasMore, p.NextAfterTs
		if !p.HasMore || (limit > 0 && len(out.Points) >= limit) {
			break
		}
		q.Set("after", strconv.FormatInt(p.NextAfterTs, 10))
	}
	if !out.HasMore {
		out.NextAfterTs = 0
	}
	return a.emit(out, func(w io.Writer) { printPage(w, out) })
}

// countingReader reports bytes read to a progress bar.
type countingReader struct {
	r    io.Reader
	n    int64
	tick func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	c.tick(c.n)
	return n, err
}

// rIngestCSV uploads each file to POST /ingest/csv (one transaction per
// file on the server, as locally). The run of a file defaults to its name
// without extension, as locally; --sequential computes each file's offset
// from the previous report here and sends it as timeOffset or start.
func rIngestCSV(a *app, c *client, cmd *cobra.Command, args []string) error {
	f := flags{cmd}
	opts := ingest.CSVOptions{Line: f.str("line"), Product: f.str("product"), Recipe: f.str("recipe"), Run: f.str("run"),
		TimeCol: f.str("time-col"), TimeUnit: f.str("time-unit"), Period: f.dur("period"), IgnoreCols: f.strs("ignore-col"), SkipBad: f.on("skip-bad")}
	for name, v := range map[string]string{"line": opts.Line, "product": opts.Product, "recipe": opts.Recipe} {
		if strings.TrimSpace(v) == "" {
			return usagef("--%s is required", name)
		}
	}
	units := f.strs("unit")
	for _, u := range units {
		if n, _, ok := strings.Cut(u, "="); !ok || n == "" {
			return usagef("--unit %q: want node=unit", u)
		}
	}
	if s := f.str("start"); s != "" {
		ms, err := parseTime("start", s)
		if err != nil {
			return err
		}
		opts.StartMs = *ms
	}
	opts.TimeOffsetMs = f.dur("time-offset").Milliseconds()
	var total int64
	for _, p := range args {
		st, err := os.Stat(p)
		if err != nil {
			return usagef("%v", err)
		}
		total += st.Size()
	}
	bar := a.newProgress(total, "uploading", true)
	t0 := time.Now()
	var reports []ingest.FileReport
	var done int64
	var err error
	for i, p := range args {
		o := opts
		if f.on("sequential") && i > 0 {
			first, ferr := firstTime(p, opts)
			if ferr != nil {
				err = ferr
				break
			}
			next := reports[len(reports)-1].LastTs + 3_600_000
			if opts.Period > 0 && !hasTimeCol(p, opts) {
				o.StartMs = next
			} else {
				o.TimeOffsetMs = opts.TimeOffsetMs + next - first
			}
			// The offsets accumulate exactly as in the local loop.
			opts.TimeOffsetMs, opts.StartMs = o.TimeOffsetMs, o.StartMs
		}
		run := o.Run
		if run == "" {
			run = strings.TrimSuffix(filepath.Base(p), filepath.Ext(p))
		}
		q := url.Values{"line": {o.Line}, "product": {o.Product}, "recipe": {o.Recipe}, "run": {run}}
		if o.TimeCol != "" {
			q.Set("timeCol", o.TimeCol)
		}
		if o.TimeUnit != "" {
			q.Set("timeUnit", o.TimeUnit)
		}
		if o.Period > 0 {
			q.Set("period", o.Period.String())
			q.Set("start", strconv.FormatInt(o.StartMs, 10))
		}
		if o.TimeOffsetMs != 0 {
			q.Set("timeOffset", (time.Duration(o.TimeOffsetMs) * time.Millisecond).String())
		}
		if o.SkipBad {
			q.Set("skipBad", "true")
		}
		q["unit"], q["ignoreCol"] = units, o.IgnoreCols
		fh, oerr := os.Open(p)
		if oerr != nil {
			err = usagef("%v", oerr)
			break
		}
		bar.describe("uploading " + p)
		base := done
		body := &countingReader{r: fh, tick: func(n int64) { bar.set(base + n) }}
		var rep ingest.FileReport
		err = c.do(cmd.Context(), req{method: http.MethodPost, path: "/ingest/csv", query: q, body: body}, &rep)
		fh.Close()
		if st, serr := os.Stat(p); serr == nil {
			done += st.Size()
		}
		if err != nil {
			break
		}
		rep.File = p // the server names it by its run; the caller knows the file
		reports = append(reports, rep)
	}
	bar.finish()
	if err != nil {
		if len(reports) > 0 && !a.jsonOut {
			fmt.Fprintf(a.stderr, "%d file(s) before the failing one were ingested\n", len(reports))
		}
		return err
	}
	samples := 0
	for _, r := range reports {
		samples += r.Samples
	}
	out := ingestOutput{Files: reports, Samples: samples, Seconds: time.Since(t0).Seconds()}
	return a.emit(out, func(w io.Writer) { printIngest(w, out) })
}

// ---- datasets

func rDatasetBuild(a *app, c *client, cmd *cobra.Command, args []string) error {
	f := flags{cmd}
	if f.str("spec") == "" {
		return usagef("--spec is required")
	}
	b, err := os.ReadFile(f.str("spec"))
	if err != nil {
		return usagef("--spec: %v", err)
	}
	q := url.Values{"maxWindows": {strconv.Itoa(f.num("max-windows"))}, "maxBytesMiB": {strconv.FormatInt(f.num64("max-bytes-mib"), 10)}}
	var out buildOutput
	if err := c.do(cmd.Context(), req{method: http.MethodPost, path: "/datasets", query: q, body: b}, &out); err != nil {
		return err
	}
	if out.Dropped == nil {
		out.Dropped = []dataset.RunReason{}
	}
	return a.emit(out, func(w io.Writer) { printBuild(w, out) })
}

func rDatasetList(a *app, c *client, cmd *cobra.Command, args []string) error {
	ds, err := getList[core.Dataset](cmd.Context(), c, "/datasets", flags{cmd}.set(url.Values{}, fl("line", "line"), fl("recipe", "recipe")))
	if err != nil {
		return err
	}
	return a.emit(ds, func(w io.Writer) { printDatasets(w, ds) })
}

func rDatasetShow(a *app, c *client, cmd *cobra.Command, args []string) error {
	var out datasetDetail
	if err := get(cmd.Context(), c, "/datasets/"+esc(args[0]), nil, &out); err != nil {
		return err
	}
	return a.emit(out, func(w io.Writer) { printDatasetDetail(w, out) })
}

func rDatasetVerify(a *app, c *client, cmd *cobra.Command, args []string) error {
	var res dataset.VerifyResult
	if err := get(cmd.Context(), c, "/datasets/"+esc(args[0])+"/verify", nil, &res); err != nil {
		return err
	}
	return a.emit(res, func(w io.Writer) { printDatasetVerify(w, core.Dataset{ID: res.ID, SHA256: res.SHA256}, res) })
}

func rDatasetReport(a *app, c *client, cmd *cobra.Command, args []string) error {
	var d datasetDetail
	if err := get(cmd.Context(), c, "/datasets/"+esc(args[0]), nil, &d); err != nil {
		return err
	}
	var r dataset.Report
	if err := get(cmd.Context(), c, "/datasets/"+esc(args[0])+"/report", nil, &r); err != nil {
		return err
	}
	return a.emit(&r, func(w io.Writer) { printReport(w, d.Dataset, &r) })
}

func rDatasetDelete(a *app, c *client, cmd *cobra.Command, args []string) error {
	var out map[string]any
	if err := c.do(cmd.Context(), req{method: http.MethodDelete, path: "/datasets/" + esc(args[0])}, &out); err != nil {
		return err
	}
	return a.emit(out, func(w io.Writer) { printDeleted(w, args[0]) })
}

// ---- jobs

func rJobSubmit(a *app, c *client, cmd *cobra.Command, args []string) error {
	f := flags{cmd}
	body := map[string]any{"datasetId": f.str("dataset"), "trainer": f.str("trainer"), "seed": f.num64("seed"), "parentId": f.str("parent"),
		"note": f.str("note"), "env": f.str("env"), "timeoutSec": int(f.dur("timeout") / time.Second), "stallSec": int(f.dur("stall") / time.Second)}
	if f.str("dataset") == "" || f.str("trainer") == "" {
		return usagef("--dataset and --trainer are required")
	}
	if p := f.str("params"); p != "" {
		if !json.Valid([]byte(p)) {
			return usagef("--params: not JSON: %s", p)
		}
		body["params"] = json.RawMessage(p)
	}
	var j core.Job
	if err := post(cmd.Context(), c, "/jobs", body, &j); err != nil {
		return err
	}
	if f.on("wait") {
		return a.followJob(cmd.Context(), c, j.ID)
	}
	return a.emit(j, func(w io.Writer) { printQueued(w, j) })
}

func rJobStatus(a *app, c *client, cmd *cobra.Command, args []string) error {
	var j core.Job
	if err := get(cmd.Context(), c, "/jobs/"+esc(args[0]), nil, &j); err != nil {
		return err
	}
	return a.emit(j, func(w io.Writer) { printJob(w, j) })
}

func rJobList(a *app, c *client, cmd *cobra.Command, args []string) error {
	q := flags{cmd}.set(url.Values{"limit": {strconv.Itoa(maxPage)}}, fl("status", "status"), fl("dataset", "dataset"))
	js, err := getList[core.Job](cmd.Context(), c, "/jobs", q)
	if err != nil {
		return err
	}
	return a.emit(js, func(w io.Writer) { printJobs(w, js) })
}

func rJobCancel(a *app, c *client, cmd *cobra.Command, args []string) error {
	var j core.Job
	if err := post(cmd.Context(), c, "/jobs/"+esc(args[0])+"/cancel", nil, &j); err != nil {
		return err
	}
	return a.emit(j, func(w io.Writer) { printCancel(w, j) })
}

func rJobRetry(a *app, c *client, cmd *cobra.Command, args []string) error {
	var j core.Job
	if err := post(cmd.Context(), c, "/jobs/"+esc(args[0])+"/retry", nil, &j); err != nil {
		return err
	}
	if (flags{cmd}).on("wait") {
		return a.followJob(cmd.Context(), c, j.ID)
	}
	return a.emit(j, func(w io.Writer) { printRetry(w, j, args[0]) })
}

// rJobLogs prints the log from offset 0; with -f it asks again from the
// returned offset until the job has ended (X-Job-Status), then once more.
func rJobLogs(a *app, c *client, cmd *cobra.Command, args []string) error {
	ctx := cmd.Context()
	follow := flags{cmd}.on("follow")
	var off int64
	for {
		var h http.Header
		res, err := c.send(ctx, req{method: http.MethodGet, path: "/jobs/" + esc(args[0]) + "/logs", query: url.Values{"offset": {strconv.FormatInt(off, 10)}}, header: &h})
		if err != nil {
			return err
		}
		_, err = io.Copy(a.stdout, res.Body)
		res.Body.Close()
		if err != nil {
			return err
		}
		if n, perr := strconv.ParseInt(h.Get("X-Log-Next-Offset"), 10, 64); perr == nil {
			off = n
		}
		if !follow {
			return nil
		}
		if core.JobStatus(h.Get("X-Job-Status")).Terminal() {
			follow = false // one last read
			continue
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// ---- models

func rModelList(a *app, c *client, cmd *cobra.Command, args []string) error {
	ms, err := getList[core.Model](cmd.Context(), c, "/models", flags{cmd}.set(url.Values{}, fl("stage", "stage"), fl("recipe", "recipe")))
	if err != nil {
		return err
	}
	return a.emit(ms, func(w io.Writer) { printModels(w, ms) })
}

func rModelShow(a *app, c *client, cmd *cobra.Command, args []string) error {
	var out struct {
		Model   core.Model         `json:"model"`
		History []core.StageChange `json:"history"`
	}
	if err := get(cmd.Context(), c, "/models/"+esc(args[0]), nil, &out); err != nil {
		return err
	}
	return a.emit(map[string]any{"model": out.Model, "history": out.History}, func(w io.Writer) { printModel(w, out.Model, out.History) })
}

func rModelPromote(a *app, c *client, cmd *cobra.Command, args []string) error {
	f := flags{cmd}
	if f.str("to") == "" {
		return usagef("--to is required (shadow or production)")
	}
	var m core.Model
	if err := post(cmd.Context(), c, "/models/"+esc(args[0])+"/promote", map[string]string{"to": f.str("to"), "expect": f.str("expect"), "reason": f.str("reason")}, &m); err != nil {
		return err
	}
	return a.emit(m, func(w io.Writer) { printMoved(w, m) })
}

func rModelRetire(a *app, c *client, cmd *cobra.Command, args []string) error {
	f := flags{cmd}
	var m core.Model
	if err := post(cmd.Context(), c, "/models/"+esc(args[0])+"/retire", map[string]string{"expect": f.str("expect"), "reason": f.str("reason")}, &m); err != nil {
		return err
	}
	return a.emit(m, func(w io.Writer) { printMoved(w, m) })
}

func rModelPredict(a *app, c *client, cmd *cobra.Command, args []string) error {
	f := flags{cmd}
	run, from, steps := f.str("run"), f.str("from"), f.num("steps")
	if run == "" || from == "" {
		return usagef("--run and --from are required")
	}
	at, err := parseTime("from", from)
	if err != nil {
		return err
	}
	if steps <= 0 {
		return usagef("--steps must be ≥ 1")
	}
	var res struct {
		Model     string       `json:"model"`
		Run       string       `json:"run"`
		From      int64        `json:"from"`
		BeatMs    int64        `json:"beatMs"`
		Targets   []string     `json:"targets"`
		Steps     []prediction `json:"steps"`
		Intervals bool         `json:"intervals"`
	}
	if err := post(cmd.Context(), c, "/models/"+esc(args[0])+"/predict", map[string]any{"run": run, "from": *at, "steps": steps}, &res); err != nil {
		return err
	}
	for i := range res.Steps {
		res.Steps[i].Time = fmtMs(res.Steps[i].TsMs)
	}
	out := predictOutput{Model: res.Model, Run: res.Run, From: res.From, Targets: res.Targets, Steps: res.Steps, Intervals: res.Intervals}
	return a.emit(out, func(w io.Writer) { printPrediction(w, out, res.BeatMs) })
}

// ---- twin

// docArg reads FILE ("-": standard input) or selects the preset flag.
func docArg(cmd *cobra.Command, args []string, preset string) (body []byte, q url.Values, err error) {
	on := flags{cmd}.on(preset)
	switch {
	case on && len(args) == 0:
		return nil, url.Values{"preset": {"default-injection"}}, nil
	case !on && len(args) == 1:
		b, err := readArg(cmd, args[0])
		return b, nil, err
	}
	return nil, nil, usagef("%s takes FILE or --%s", cmd.CommandPath(), preset)
}

func rScenePut(a *app, c *client, cmd *cobra.Command, args []string) error {
	body, q, err := docArg(cmd, args, "default-injection")
	if err != nil {
		return err
	}
	var r sceneResult
	if err := c.do(cmd.Context(), req{method: http.MethodPost, path: "/scenes", query: q, body: body}, &r); err != nil {
		return err
	}
	return a.emit(r, func(w io.Writer) { printScenePut(w, r) })
}

func rSceneFreeze(a *app, c *client, cmd *cobra.Command, args []string) error {
	f := flags{cmd}
	if f.str("version") == "" {
		return usagef("%s: --version is required", cmd.CommandPath())
	}
	if f.str("expect-hash") == "" {
		return usagef("%s: --expect-hash is required", cmd.CommandPath())
	}
	if err := a.remoteActor(cmd.Context(), c, cmd, "by"); err != nil {
		return err
	}
	var r sceneResult
	if err := post(cmd.Context(), c, "/scenes/"+esc(args[0])+"/freeze", map[string]string{"version": f.str("version"), "expectHash": strings.ToLower(f.str("expect-hash"))}, &r); err != nil {
		return err
	}
	return a.emit(r, func(w io.Writer) { printSceneFrozen(w, r) })
}

func rSceneShow(a *app, c *client, cmd *cobra.Command, args []string) error {
	var out struct {
		Scene *contract.SceneContract `json:"scene"`
		Hash  string                  `json:"hash"`
	}
	if err := get(cmd.Context(), c, "/scenes/"+esc(args[0]), flags{cmd}.set(url.Values{}, fl("version", "version")), &out); err != nil {
		return err
	}
	return a.emit(out.Scene, func(w io.Writer) { printScene(w, out.Scene, out.Hash) })
}

func rObjectivePut(a *app, c *client, cmd *cobra.Command, args []string) error {
	body, q, err := docArg(cmd, args, "default-injection")
	if err != nil {
		return err
	}
	if err := a.remoteActor(cmd.Context(), c, cmd, "by"); err != nil {
		return err
	}
	var out objectivePut
	if err := c.do(cmd.Context(), req{method: http.MethodPost, path: "/objectives", query: q, body: body}, &out); err != nil {
		return err
	}
	return a.emit(out, func(w io.Writer) { printObjectivePut(w, out) })
}

func rObjectiveShow(a *app, c *client, cmd *cobra.Command, args []string) error {
	var out objectiveShow
	if err := get(cmd.Context(), c, "/objectives/"+esc(args[0]), nil, &out); err != nil {
		return err
	}
	return a.emit(out, func(w io.Writer) { printObjective(w, out) })
}

func rSnapshotTake(a *app, c *client, cmd *cobra.Command, args []string) error {
	f := flags{cmd}
	if f.str("scene") == "" {
		return usagef("%s: --scene is required", cmd.CommandPath())
	}
	if f.dur("max-age") < 0 {
		return usagef("--max-age must be positive")
	}
	id, version, _ := strings.Cut(f.str("scene"), "@")
	body := map[string]any{"scene": id, "sceneVersion": version, "run": f.str("run"), "strict": f.on("strict"),
		"maxAgeMs": f.dur("max-age").Milliseconds(), "model": f.str("model"), "phase": f.str("phase")}
	if bs := f.strs("bind"); len(bs) > 0 {
		m := map[string]string{}
		for _, b := range bs {
			v, n, ok := strings.Cut(b, "=")
			if !ok || v == "" || n == "" {
				return usagef("--bind %q: want VARIABLE=NODE", b)
			}
			if _, dup := m[v]; dup {
				return usagef("--bind: variable %s bound twice", v)
			}
			m[v] = n
		}
		body["bindings"] = m
	}
	if at := f.str("at"); at != "" {
		ms, err := parseTime("at", at)
		if err != nil {
			return err
		}
		body["at"] = *ms
	}
	if err := a.remoteActor(cmd.Context(), c, cmd, "by"); err != nil {
		return err
	}
	var out snapshotTakeResult
	if err := post(cmd.Context(), c, "/snapshots", body, &out); err != nil {
		return err
	}
	return a.emit(out, func(w io.Writer) {
		printSnapshot(w, out.Snapshot, f.on("strict"))
		printSnapshotVars(w, out.Report)
		for _, n := range out.Report.Notes {
			fmt.Fprintf(w, "note: %s\n", n)
		}
	})
}

func rSnapshotShow(a *app, c *client, cmd *cobra.Command, args []string) error {
	var out snapshotShowResult
	if err := get(cmd.Context(), c, "/snapshots/"+esc(args[0]), nil, &out); err != nil {
		return err
	}
	return a.emit(out, func(w io.Writer) {
		printSnapshot(w, out.Snapshot, out.Info.Strict)
		printSnapshotValues(w, out.Snapshot)
	})
}

func rSnapshotList(a *app, c *client, cmd *cobra.Command, args []string) error {
	f := flags{cmd}
	q := f.set(url.Values{"limit": {strconv.Itoa(f.num("limit"))}}, fl("line", "line"))
	l, err := getList[twinstore.SnapshotInfo](cmd.Context(), c, "/snapshots", q)
	if err != nil {
		return err
	}
	return a.emit(l, func(w io.Writer) { printSnapshots(w, l) })
}

func rTrial(a *app, c *client, cmd *cobra.Command, args []string) error {
	f := flags{cmd}
	if f.str("model") == "" || f.str("snapshot") == "" {
		return usagef("--model and --snapshot are required")
	}
	sets, cand := f.strs("set"), f.str("candidate")
	if (len(sets) == 0) == (cand == "") {
		return usagef("give either --set control=value (repeatable) or --candidate FILE")
	}
	body := map[string]any{"model": f.str("model"), "snapshot": f.str("snapshot"), "objective": f.str("objective")}
	if cand != "" {
		data, err := readArg(cmd, cand)
		if err != nil {
			return err
		}
		var traj []map[string]float64
		if err := json.Unmarshal(data, &traj); err != nil {
			return contract.Invalidf("candidate", "want a JSON array of {control: value} objects: %v", err)
		}
		body["candidate"] = traj
	} else {
		m := map[string]float64{}
		for _, kv := range sets {
			k, v, ok := strings.Cut(kv, "=")
			x, err := strconv.ParseFloat(v, 64)
			if !ok || err != nil {
				return usagef("--set %q: want CONTROL=NUMBER", kv)
			}
			m[k] = x
		}
		body["set"] = m
	}
	if err := a.remoteActor(cmd.Context(), c, cmd, "by"); err != nil {
		return err
	}
	var out trialOutput
	if err := post(cmd.Context(), c, "/trials", body, &out); err != nil {
		return err
	}
	return a.emit(out, func(w io.Writer) { printTrial(w, out.Record, out.Detail) })
}

func rOptimize(a *app, c *client, cmd *cobra.Command, args []string) error {
	f := flags{cmd}
	if f.str("model") == "" || f.str("snapshot") == "" {
		return usagef("--model and --snapshot are required")
	}
	switch m := f.str("mode"); m {
	case "", "auto", engine.ModeSafeSmallStep, engine.ModePreciseSearch:
	default:
		return usagef("--mode %q: want auto, %s or %s", m, engine.ModeSafeSmallStep, engine.ModePreciseSearch)
	}
	if err := a.remoteActor(cmd.Context(), c, cmd, "by"); err != nil {
		return err
	}
	var out optimizeOutput
	body := map[string]any{"model": f.str("model"), "snapshot": f.str("snapshot"), "objective": f.str("objective"), "mode": f.str("mode"),
		"seed": f.u64("seed"), "maxCandidates": f.num("max-candidates")}
	if err := post(cmd.Context(), c, "/optimize", body, &out); err != nil {
		return err
	}
	return a.emit(out, func(w io.Writer) { printOptimize(w, out) })
}

func rGate(a *app, c *client, cmd *cobra.Command, args []string) error {
	f := flags{cmd}
	if f.str("model") == "" || f.str("scene") == "" {
		return usagef("--model and --scene are required")
	}
	if err := a.remoteActor(cmd.Context(), c, cmd, "by"); err != nil {
		return err
	}
	id, ver, _ := strings.Cut(f.str("scene"), "@")
	var r gate.Result
	body := map[string]any{"model": f.str("model"), "scene": id, "sceneVersion": ver, "objective": f.str("objective"), "snapshots": f.num("snapshots"),
		"profile": f.str("profile"), "seed": f.u64("seed")}
	if err := post(cmd.Context(), c, "/gate", body, &r); err != nil {
		return err
	}
	return a.emit(&r, func(w io.Writer) { printGate(w, &r) })
}

func rShadow(a *app, c *client, cmd *cobra.Command, args []string) error {
	f := flags{cmd}
	if f.str("model") == "" {
		return usagef("--model is required")
	}
	var ev shadow.Evidence
	if err := post(cmd.Context(), c, "/shadow", map[string]any{"model": f.str("model"), "maxRuns": f.num("max-runs"), "dryRun": f.on("dry-run")}, &ev); err != nil {
		return err
	}
	return a.emit(&ev, func(w io.Writer) { printShadow(w, &ev) })
}

// rCalibrate: with --run the server's workers train the candidate (queued);
// locally --run trains in the CLI's own process.
func rCalibrate(a *app, c *client, cmd *cobra.Command, args []string) error {
	f := flags{cmd}
	if f.str("model") == "" {
		return usagef("--model is required")
	}
	if err := a.remoteActor(cmd.Context(), c, cmd, "by"); err != nil {
		return err
	}
	var res calibrateResult
	if err := post(cmd.Context(), c, "/calibrate", map[string]any{"model": f.str("model"), "scene": f.str("scene"), "run": f.on("run")}, &res); err != nil {
		return err
	}
	return a.emit(res, func(w io.Writer) { printCalibrate(w, res) })
}

func rCalibrateList(a *app, c *client, cmd *cobra.Command, args []string) error {
	rs, err := getList[twinstore.CalibrationRequest](cmd.Context(), c, "/calibrations", nil)
	if err != nil {
		return err
	}
	return a.emit(rs, func(w io.Writer) { printCalibrations(w, rs) })
}

// ---- certificates and channels

func rCertKey(a *app, c *client, cmd *cobra.Command, args []string) error {
	var out certKeyOutput
	if err := get(cmd.Context(), c, "/certificates/key", nil, &out); err != nil {
		return err
	}
	return a.emit(out, func(w io.Writer) { fmt.Fprint(w, out.PublicKeyPEM) })
}

func rCertList(a *app, c *client, cmd *cobra.Command, args []string) error {
	f := flags{cmd}
	q := url.Values{"limit": {strconv.Itoa(f.num("limit"))}}
	if st := f.str("status"); st != "" {
		cs, err := contract.ParseCertStatus(strings.ToUpper(st))
		if err != nil {
			return usagef("--status: %q is not ISSUED, APPROVED, EXECUTED, EXPIRED or REVOKED", st)
		}
		q.Set("status", string(cs))
	}
	items, err := getList[twinstore.CertListItem](cmd.Context(), c, "/certificates", f.set(q, fl("line", "line")))
	if err != nil {
		return err
	}
	return a.emit(items, func(w io.Writer) { printCerts(w, items) })
}

func rCertShow(a *app, c *client, cmd *cobra.Command, args []string) error {
	var r twinstore.CertRecord
	if err := get(cmd.Context(), c, "/certificates/"+esc(args[0]), nil, &r); err != nil {
		return err
	}
	return a.emit(&r, func(w io.Writer) { printCert(w, &r) })
}

func rCertIssue(a *app, c *client, cmd *cobra.Command, args []string) error {
	f := flags{cmd}
	if f.str("trial") == "" {
		return usagef("%s: --trial is required", cmd.CommandPath())
	}
	if err := a.remoteActor(cmd.Context(), c, cmd, "as"); err != nil {
		return err
	}
	var r twinstore.CertRecord
	if err := post(cmd.Context(), c, "/certificates", map[string]any{"trial": f.str("trial"), "ttlSec": int(f.dur("ttl") / time.Second)}, &r); err != nil {
		return err
	}
	return a.emit(&r, func(w io.Writer) { printIssued(w, &r) })
}

func rCertApprove(a *app, c *client, cmd *cobra.Command, args []string) error {
	if err := a.remoteActor(cmd.Context(), c, cmd, "as"); err != nil {
		return err
	}
	var r twinstore.CertRecord
	if err := post(cmd.Context(), c, "/certificates/"+esc(args[0])+"/approve", nil, &r); err != nil {
		return err
	}
	return a.emit(&r, func(w io.Writer) { printTransition(w, &r) })
}

func rCertRevoke(a *app, c *client, cmd *cobra.Command, args []string) error {
	reason := flags{cmd}.str("reason")
	if strings.TrimSpace(reason) == "" {
		return usagef("%s: --reason is required", cmd.CommandPath())
	}
	if err := a.remoteActor(cmd.Context(), c, cmd, "as"); err != nil {
		return err
	}
	var r twinstore.CertRecord
	if err := post(cmd.Context(), c, "/certificates/"+esc(args[0])+"/revoke", map[string]string{"reason": reason}, &r); err != nil {
		return err
	}
	return a.emit(&r, func(w io.Writer) { printTransition(w, &r) })
}

// rCertVerify prints the report also when a check fails (the server sends
// it with the error), then fails like the local command.
func rCertVerify(a *app, c *client, cmd *cobra.Command, args []string) error {
	var rep govern.VerifyReport
	verr := c.do(cmd.Context(), req{method: http.MethodGet, path: "/certificates/" + esc(args[0]) + "/verify", result: &rep}, &rep)
	if len(rep.Checks) == 0 {
		return verr
	}
	if err := a.emit(rep, func(w io.Writer) { printCertVerify(w, rep) }); err != nil {
		return err
	}
	return verr
}

func rCertExecute(a *app, c *client, cmd *cobra.Command, args []string) error {
	if err := a.remoteActor(cmd.Context(), c, cmd, "as"); err != nil {
		return err
	}
	var res govern.Result
	xerr := c.do(cmd.Context(), req{method: http.MethodPost, path: "/certificates/" + esc(args[0]) + "/execute",
		body: map[string]string{"run": flags{cmd}.str("run")}, result: &res}, &res)
	if xerr != nil && res.CertificateID == "" {
		return xerr
	}
	if err := a.emit(res, func(w io.Writer) { printExecution(w, &res) }); err != nil {
		return err
	}
	return xerr
}

func rChannelSet(a *app, c *client, cmd *cobra.Command, args []string) error {
	f := flags{cmd}
	line := f.str("line")
	if line == "" || f.str("profile") == "" || f.str("policy") == "" {
		return usagef("%s: --line, --profile and --policy are required", cmd.CommandPath())
	}
	body := map[string]any{"profile": f.str("profile"), "controlPolicy": f.str("policy"), "channelId": f.str("channel-id")}
	if sc := f.str("scene"); sc != "" {
		id, ver, ok := strings.Cut(sc, "@")
		if !ok || id == "" || ver == "" {
			return usagef("--scene %q: want ID@VERSION", sc)
		}
		body["sceneId"], body["sceneVersion"] = id, ver
	}
	bounds := map[string]twinstore.ChannelBound{}
	for _, b := range f.strs("bound") {
		name, r, err := channelParseBound(b)
		if err != nil {
			return err
		}
		if _, dup := bounds[name]; dup {
			return usagef("--bound: %s given twice", name)
		}
		bounds[name] = r
	}
	if len(bounds) > 0 {
		body["bounds"] = bounds
	}
	if err := a.remoteActor(cmd.Context(), c, cmd, "as"); err != nil {
		return err
	}
	var r twinstore.ChannelRecord
	if err := c.do(cmd.Context(), req{method: http.MethodPut, path: "/channels/" + esc(line), body: body}, &r); err != nil {
		return err
	}
	return a.emit(&r, func(w io.Writer) { fmt.Fprint(w, "channel set\n"); printChannel(w, &r) })
}

func rChannelShow(a *app, c *client, cmd *cobra.Command, args []string) error {
	line := flags{cmd}.str("line")
	if line == "" {
		return usagef("%s: --line is required", cmd.CommandPath())
	}
	var r twinstore.ChannelRecord
	if err := get(cmd.Context(), c, "/channels/"+esc(line), nil, &r); err != nil {
		return err
	}
	return a.emit(&r, func(w io.Writer) { printChannel(w, &r) })
}

// ---- audit and administration

func rAuditVerify(a *app, c *client, cmd *cobra.Command, args []string) error {
	eh := flags{cmd}.str("expect-head")
	var seq int64
	q := url.Values{}
	if eh != "" {
		s, h, ok := strings.Cut(eh, ":")
		n, err := strconv.ParseInt(s, 10, 64)
		if !ok || err != nil || n < 0 || len(h) != 64 || strings.Trim(strings.ToLower(h), "0123456789abcdef") != "" {
			return usagef("--expect-head: %q is not SEQ:HASH (a seq ≥ 0 and a 64-hex sha256, as printed by aml audit verify)", eh)
		}
		seq = n
		q.Set("expectHead", fmt.Sprintf("%d:%s", n, strings.ToLower(h)))
	}
	var res audit.VerifyResult
	if err := get(cmd.Context(), c, "/audit/verify", q, &res); err != nil {
		return err
	}
	return a.emit(res, func(w io.Writer) { printAuditVerify(w, res, eh != "", seq) })
}

func rAuditList(a *app, c *client, cmd *cobra.Command, args []string) error {
	f := flags{cmd}
	after, limit := f.num64("after"), f.num("limit")
	if after < 0 {
		return usagef("--after must be ≥ 0")
	}
	if limit < 1 || limit > audit.MaxListLimit {
		return usagef("--limit must be between 1 and %d", audit.MaxListLimit)
	}
	q := f.set(url.Values{"after": {strconv.FormatInt(after, 10)}, "limit": {strconv.Itoa(limit)}}, fl("subject", "subject"))
	es, err := getList[audit.Entry](cmd.Context(), c, "/audit", q)
	if err != nil {
		return err
	}
	return a.emit(es, func(w io.Writer) { printAudit(w, es, limit) })
}

func rTokenCreate(a *app, c *client, cmd *cobra.Command, args []string) error {
	f := flags{cmd}
	role, err := auth.ParseRole(f.str("role"))
	if err != nil {
		return usagef("--role: %q is not viewer, engineer, approver, admin or agent", f.str("role"))
	}
	if strings.TrimSpace(f.str("name")) == "" {
		return usagef("--name is required (the person or agent the token is for; the actor of their audited actions)")
	}
	if f.dur("ttl") < 0 {
		return usagef("--ttl must not be negative")
	}
	if err := a.remoteActor(cmd.Context(), c, cmd, "as"); err != nil {
		return err
	}
	body := map[string]any{"name": f.str("name"), "role": role, "ttlSec": int64(f.dur("ttl") / time.Second)}
	if l := f.str("lines"); l != "" {
		body["lines"] = strings.Split(l, ",")
	}
	var out tokenCreated
	if err := post(cmd.Context(), c, "/tokens", body, &out); err != nil {
		return err
	}
	return a.emit(out, func(w io.Writer) { printTokenCreated(w, out) })
}

func rTokenList(a *app, c *client, cmd *cobra.Command, args []string) error {
	items, err := getList[auth.TokenInfo](cmd.Context(), c, "/tokens", nil)
	if err != nil {
		return err
	}
	return a.emit(items, func(w io.Writer) { printTokens(w, items) })
}

func rTokenRevoke(a *app, c *client, cmd *cobra.Command, args []string) error {
	if err := a.remoteActor(cmd.Context(), c, cmd, "as"); err != nil {
		return err
	}
	var info auth.TokenInfo
	if err := c.do(cmd.Context(), req{method: http.MethodDelete, path: "/tokens/" + esc(args[0])}, &info); err != nil {
		return err
	}
	return a.emit(info, func(w io.Writer) { printTokenRevoked(w, info) })
}

func rRetention(a *app, c *client, cmd *cobra.Command, args []string) error {
	f := flags{cmd}
	// The API takes whole seconds and reads 0 as "never": a positive age
	// under a second (or with a fraction) is rounded up, never truncated
	// to 0, which would turn "remove almost everything" into "remove nothing".
	sec := func(n string) int64 {
		d := f.dur(n)
		s := int64(d / time.Second)
		if d > 0 && d%time.Second != 0 {
			s++
		}
		return s
	}
	var rep retention.Report
	body := map[string]any{"datasetAgeSec": sec("dataset-age"), "modelAgeSec": sec("model-age"), "jobAgeSec": sec("job-age"), "dryRun": f.on("dry-run")}
	if err := post(cmd.Context(), c, "/retention", body, &rep); err != nil {
		return err
	}
	return a.emit(rep, func(w io.Writer) { printRetention(w, rep) })
}

func rConnectStatus(a *app, c *client, cmd *cobra.Command, args []string) error {
	q := flags{cmd}.set(url.Values{}, fl("line", "line"))
	list, err := getList[connect.Status](cmd.Context(), c, "/connectors", q)
	if err != nil {
		return err
	}
	return a.emit(list, func(w io.Writer) { printConnectorStatus(w, list) })
}

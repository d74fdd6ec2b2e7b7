package api

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/ingest"
)

// Version is reported by /info (set by serve from the binary's version).
var Version = "dev"

// scopeLine checks an explicit ?line= filter against the caller's scope;
// an empty filter is fine (the list is filtered per item).
func (c *call) scopeLine(line string) error {
	if line == "" {
		return nil
	}
	return c.line(line)
}

func (s *Server) info(c *call) (any, error) {
	v, err := s.d.Store.SchemaVersion(c.ctx)
	if err != nil {
		return nil, err
	}
	return map[string]any{"dataDir": s.d.DataDir, "database": s.d.Store.Location(), "schemaVersion": v, "version": Version,
		"principal": c.p}, nil
}

func (s *Server) listLines(c *call) (any, error) {
	ls, err := s.d.Store.ListLines(c.ctx)
	if err != nil {
		return nil, err
	}
	out := []core.Line{}
	for _, l := range ls {
		if c.p.InScope(l.ID) {
			out = append(out, l)
		}
	}
	return listOf(out), nil
}

func (s *Server) listRuns(c *call) (any, error) {
	f := core.RunFilter{Line: c.q("line"), Product: c.q("product"), Recipe: c.q("recipe"), Status: c.q("status")}
	if err := c.scopeLine(f.Line); err != nil {
		return nil, err
	}
	runs, err := s.d.Store.ListRuns(c.ctx, f)
	if err != nil {
		return nil, err
	}
	out := []core.Run{}
	for _, r := range runs {
		if c.p.InScope(r.LineID) {
			out = append(out, r)
		}
	}
	return listOf(out), nil
}

func (s *Server) showRun(c *call) (any, error) {
	r, err := s.d.Store.GetRun(c.ctx, c.param("id"))
	if err != nil {
		return nil, err
	}
	if err := c.line(r.LineID); err != nil {
		return nil, err
	}
	segs, err := s.d.Store.ListContextSegments(c.ctx, r.ID)
	if err != nil {
		return nil, err
	}
	if segs == nil {
		segs = []core.ContextSegment{}
	}
	counts, err := s.d.Store.CountRunSamples(c.ctx, r.ID)
	if err != nil {
		return nil, err
	}
	return struct {
		core.Run
		Segments []core.ContextSegment `json:"contextSegments"`
		Samples  map[string]int64      `json:"samplesByNode"`
	}{r, segs, counts}, nil
}

func (s *Server) listNodes(c *call) (any, error) {
	line := c.q("line")
	if err := c.scopeLine(line); err != nil {
		return nil, err
	}
	ns, err := s.d.Store.ListNodes(c.ctx, line)
	if err != nil {
		return nil, err
	}
	out := []core.Node{}
	for _, n := range ns {
		if c.p.InScope(n.LineID) {
			out = append(out, n)
		}
	}
	return listOf(out), nil
}

func (s *Server) queryTS(c *call) (any, error) {
	node := c.q("node")
	if node == "" {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "node", "node is required")
	}
	n, err := s.d.Store.GetNode(c.ctx, node)
	if err != nil {
		return nil, err
	}
	if err := c.line(n.LineID); err != nil {
		return nil, err
	}
	f := core.ContextFilter{Line: c.q("line"), Product: c.q("product"), Recipe: c.q("recipe"), Run: c.q("run")}
	if err := c.scopeLine(f.Line); err != nil {
		return nil, err
	}
	from, err := c.qTime("from")
	if err != nil {
		return nil, err
	}
	to, err := c.qTime("to")
	if err != nil {
		return nil, err
	}
	if b := c.q("bucket"); b != "" {
		d, err := time.ParseDuration(b)
		if err != nil || d < time.Millisecond {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "bucket", "bucket: %q is not a duration of at least 1ms (e.g. 1s, 5m)", b)
		}
		bs, err := s.d.Store.Buckets(c.ctx, core.BucketQuery{Node: node, Filter: f, FromMs: from, ToMs: to, BucketMs: d.Milliseconds()})
		if err != nil {
			return nil, err
		}
		if bs == nil {
			bs = []core.Bucket{}
		}
		return map[string]any{"node": node, "bucketMs": d.Milliseconds(), "buckets": bs}, nil
	}
	after, err := c.qTime("after")
	if err != nil {
		return nil, err
	}
	limit, err := c.qInt("limit", 10_000, 1, 100_000)
	if err != nil {
		return nil, err
	}
	p, err := s.d.Store.QueryPage(c.ctx, core.PageQuery{Node: node, Filter: f, AfterTs: after, FromMs: from, ToMs: to, Limit: limit})
	if err != nil {
		return nil, err
	}
	if p.Points == nil {
		p.Points = []core.Point{}
	}
	return p, nil
}

// ingestBatch is a JSON ingest request: samples of one line (and
// optionally one run) in one transaction.
type ingestBatch struct {
	Line    string `json:"line"`
	Product string `json:"product,omitempty"`
	Recipe  string `json:"recipe,omitempty"`
	// Run, when set, is created (active, from the first sample) if it does
	// not exist; Product and Recipe are then required.
	Run     string         `json:"run,omitempty"`
	Samples []ingestSample `json:"samples"`
	// Units gives the unit of nodes this batch creates (node → unit).
	Units map[string]string `json:"units,omitempty"`
}

type ingestSample struct {
	Node  string  `json:"node"`
	TsMs  int64   `json:"ts"`
	Value float64 `json:"value"`
	// State defaults to "ok".
	State string `json:"state,omitempty"`
}

type ingestResult struct {
	Samples    int  `json:"samples"`
	NewNodes   int  `json:"newNodes"`
	RunCreated bool `json:"runCreated"`
}

// checkNodes refuses samples for existing nodes of a line other than the
// batch's (a caller scoped to one line must not write another line's
// signals by labelling them with its own).
func (s *Server) checkNodes(c *call, line string, nodes map[string]bool) error {
	for id := range nodes {
		n, err := s.d.Store.GetNode(c.ctx, id)
		if core.CodeOf(err) == core.CodeNotFound {
			continue
		}
		if err != nil {
			return err
		}
		if n.LineID != line {
			if err := c.line(n.LineID); err != nil {
				return err
			}
			return core.FieldErrorf(core.CodeConflict, "samples", "node %q belongs to line %q, not %q", id, n.LineID, line)
		}
	}
	return nil
}

func (s *Server) ingestJSON(c *call) (out any, err error) {
	defer func() { s.metrics.countIngest("json", err) }()
	var b ingestBatch
	if err := c.decode(&b); err != nil {
		return nil, err
	}
	if strings.TrimSpace(b.Line) == "" {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "line", "line is required")
	}
	if err := c.line(b.Line); err != nil {
		return nil, err
	}
	if len(b.Samples) == 0 {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "samples", "a batch needs at least one sample")
	}
	if len(b.Samples) > s.o.MaxBatchSamples {
		return nil, &core.Error{Code: core.CodeQuotaExceeded, Field: "samples",
			Message: fmt.Sprintf("%d samples in one batch; at most %d", len(b.Samples), s.o.MaxBatchSamples)}
	}
	if b.Run != "" && (b.Product == "" || b.Recipe == "") {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "run", "a run needs product and recipe")
	}
	samples := make([]core.Sample, len(b.Samples))
	nodes := map[string]bool{}
	first := b.Samples[0].TsMs
	for i, x := range b.Samples {
		if x.Node == "" {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "samples["+strconv.Itoa(i)+"].node", "sample has no node")
		}
		st := x.State
		if st == "" {
			st = core.StateOK
		}
		nodes[x.Node] = true
		first = min(first, x.TsMs)
		samples[i] = core.Sample{Node: x.Node, TsMs: x.TsMs, Value: x.Value, State: st, Line: b.Line, Product: b.Product, Recipe: b.Recipe, Run: b.Run}
	}
	if err := s.checkNodes(c, b.Line, nodes); err != nil {
		return nil, err
	}
	var res ingestResult
	err = s.d.Store.Ingest(c.ctx, func(tx core.IngestTx) error {
		for id := range nodes {
			created, err := tx.EnsureNode(core.Node{ID: id, LineID: b.Line, Unit: b.Units[id], Kind: core.NodeDAQ})
			if err != nil {
				return err
			}
			if created {
				res.NewNodes++
			}
		}
		if b.Run != "" {
			created, err := tx.EnsureRun(core.Run{ID: b.Run, LineID: b.Line, ProductID: b.Product, RecipeID: b.Recipe, StartedMs: first, Status: core.RunActive})
			if err != nil {
				return err
			}
			res.RunCreated = created
		}
		st, err := tx.Write(samples)
		res.Samples = st.Samples
		return err
	})
	if err != nil {
		return nil, err
	}
	s.metrics.ingested.Add(float64(res.Samples))
	return res, nil
}

// ingestCSV streams the request body through the CSV parser into one
// ingest transaction: nothing is buffered beyond a parser batch, and a
// body over the limit aborts the transaction (413).
func (s *Server) ingestCSV(c *call) (out any, err error) {
	defer func() { s.metrics.countIngest("csv", err) }()
	o := ingest.CSVOptions{Line: c.q("line"), Product: c.q("product"), Recipe: c.q("recipe"), Run: c.q("run"),
		TimeCol: c.q("timeCol"), TimeUnit: c.q("timeUnit"), Units: map[string]string{}}
	for name, v := range map[string]string{"line": o.Line, "product": o.Product, "recipe": o.Recipe, "run": o.Run} {
		if strings.TrimSpace(v) == "" {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, name, "%s is required", name)
		}
	}
	if err := c.line(o.Line); err != nil {
		return nil, err
	}
	qs := c.r.URL.Query()
	for _, u := range qs["unit"] {
		n, unit, ok := strings.Cut(u, "=")
		if !ok || n == "" {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "unit", "unit %q: want node=unit", u)
		}
		o.Units[n] = unit
	}
	o.IgnoreCols = qs["ignoreCol"]
	if v := c.q("period"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "period", "period %q is not a duration", v)
		}
		o.Period = d
	}
	if v := c.q("timeOffset"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, "timeOffset", "timeOffset %q is not a duration", v)
		}
		o.TimeOffsetMs = d.Milliseconds()
	}
	start, err := c.qTime("start")
	if err != nil {
		return nil, err
	}
	if start != nil {
		o.StartMs = *start
	}
	if o.SkipBad, err = c.qBool("skipBad"); err != nil {
		return nil, err
	}
	body := http.MaxBytesReader(c.w, c.r.Body, s.o.MaxCSVBytes)
	name := "upload:" + o.Run
	var rep ingest.FileReport
	err = s.d.Store.Ingest(c.ctx, func(tx core.IngestTx) error {
		seen := map[string]bool{}
		newNodes := 0
		var perr error
		rep, perr = ingest.ParseCSV(body, name, o, func(batch []core.Sample) error {
			for i := range batch {
				id := batch[i].Node
				if seen[id] {
					continue
				}
				seen[id] = true
				if err := s.checkNodes(c, o.Line, map[string]bool{id: true}); err != nil {
					return err
				}
				created, err := tx.EnsureNode(core.Node{ID: id, LineID: o.Line, Unit: o.Units[id], Kind: core.NodeDAQ})
				if err != nil {
					return err
				}
				if created {
					newNodes++
				}
			}
			_, err := tx.Write(batch)
			return err
		})
		rep.NewNodes = newNodes
		if perr != nil {
			return perr
		}
		if rep.Samples > 0 {
			last := rep.LastTs
			created, err := tx.EnsureRun(core.Run{ID: o.Run, LineID: o.Line, ProductID: o.Product, RecipeID: o.Recipe, StartedMs: rep.FirstTs, EndedMs: &last, Status: core.RunEnded})
			if err != nil {
				return err
			}
			rep.RunCreated = created
		}
		return nil
	})
	if err != nil {
		return nil, bodyError(err, s.o.MaxCSVBytes)
	}
	s.metrics.ingested.Add(float64(rep.Samples))
	return rep, nil
}

package app

import (
	"context"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
)

// The data use cases: the store's lines, runs, nodes and time series, and
// ingest.

var (
	opInfo       = Op{Name: "info", Act: auth.ActRead, Summary: "Schema version, build and the caller; the data directory and database location for administrators only"}
	opLineList   = Op{Name: "line.list", Act: auth.ActRead, Summary: "Lines in the caller's scope"}
	opRunList    = Op{Name: "run.list", Act: auth.ActRead, Summary: "List runs"}
	opRunShow    = Op{Name: "run.show", Act: auth.ActRead, Summary: "A run with its context segments and sample counts per node"}
	opNodeList   = Op{Name: "node.list", Act: auth.ActRead, Summary: "List nodes (signals) with unit, range and kind"}
	opTSQuery    = Op{Name: "ts.query", Act: auth.ActRead, Summary: "One node's samples (a page with a cursor) or bucketed aggregates"}
	opTSLatest   = Op{Name: "ts.latest", Act: auth.ActRead, Summary: "One node's newest sample, optionally of one run"}
	opIngest     = Op{Name: "ingest.samples", Act: auth.ActIngest, Summary: "Ingest a batch of samples (one transaction)"}
	opIngestCSV  = Op{Name: "ingest.csv", Act: auth.ActIngest, Summary: "Ingest a CSV stream, wide or long (docs/csv-ingest.md), in one transaction"}
	opConnectors = Op{Name: "connector.list", Act: auth.ActRead, Summary: "Live connectors (OPC UA, MQTT) in the caller's lines: state, counters, gaps, staleness"}
)

// dataOps lists the use cases of this file.
func dataOps() []*Op {
	return []*Op{
		bind(&opInfo, (*App).Info),
		bind(&opLineList, (*App).LineList),
		bind(&opRunList, (*App).RunList),
		bind(&opRunShow, (*App).RunShow),
		bind(&opNodeList, (*App).NodeList),
		bind(&opTSQuery, (*App).TSQuery),
		bind(&opTSLatest, (*App).TSLatest),
		bind(&opIngest, (*App).IngestSamples),
		bind(&opIngestCSV, (*App).IngestCSV),
		bind(&opConnectors, (*App).ConnectorList),
	}
}

// ---- info

// InfoRequest has no fields.
type InfoRequest struct{}

// InfoResponse describes the serving process and the caller.
type InfoResponse struct {
	DataDir       string         `json:"dataDir,omitempty" jsonschema:"the server's data directory (administrators only)"`
	Database      string         `json:"database,omitempty" jsonschema:"the database location, password redacted (administrators only)"`
	SchemaVersion int            `json:"schemaVersion"`
	Version       string         `json:"version"`
	Principal     auth.Principal `json:"principal" jsonschema:"who is calling"`
}

// Info describes the data directory, database and the caller.
func (a *App) Info(ctx context.Context, p Principal, req InfoRequest) (InfoResponse, error) {
	return run(ctx, a, p, &opInfo, req, func(ctx context.Context, p Principal, _ InfoRequest) (InfoResponse, error) {
		v, err := a.d.Store.SchemaVersion(ctx)
		if err != nil {
			return InfoResponse{}, err
		}
		r := InfoResponse{SchemaVersion: v, Version: a.o.Version, Principal: p}
		if p.Role == auth.RoleAdmin {
			// Where the server keeps its data is the administrator's
			// business only: other roles (and agents) get no file system
			// path or connection (the PostgreSQL location is redacted of
			// its password in any case).
			r.DataDir, r.Database = a.d.DataDir, a.d.Store.Location()
		}
		return r, nil
	})
}

// ---- lines, runs, nodes

// LineListRequest has no fields.
type LineListRequest struct{}

// LineList lists the lines in p's scope.
func (a *App) LineList(ctx context.Context, p Principal, req LineListRequest) (List[core.Line], error) {
	return run(ctx, a, p, &opLineList, req, func(ctx context.Context, p Principal, _ LineListRequest) (List[core.Line], error) {
		ls, err := a.d.Store.ListLines(ctx)
		if err != nil {
			return List[core.Line]{}, err
		}
		return ListOf(filter(p, ls, func(l core.Line) string { return l.ID })), nil
	})
}

// RunListRequest filters runs.
type RunListRequest struct {
	Line    string `json:"line,omitempty" jsonschema:"only this line"`
	Product string `json:"product,omitempty" jsonschema:"only this product"`
	Recipe  string `json:"recipe,omitempty" jsonschema:"only this recipe"`
	Status  string `json:"status,omitempty" jsonschema:"active, ended or aborted"`
}

// RunList lists runs in p's scope.
func (a *App) RunList(ctx context.Context, p Principal, req RunListRequest) (List[core.Run], error) {
	return run(ctx, a, p, &opRunList, req, func(ctx context.Context, p Principal, req RunListRequest) (List[core.Run], error) {
		return listIn(p, req.Line, func() ([]core.Run, error) {
			return a.d.Store.ListRuns(ctx, core.RunFilter{Line: req.Line, Product: req.Product, Recipe: req.Recipe, Status: req.Status})
		}, func(r core.Run) string { return r.LineID })
	})
}

// RunShowRequest names a run.
type RunShowRequest struct {
	ID string `json:"id" jsonschema:"run id"`
}

// Validate requires the id.
func (r *RunShowRequest) Validate() error { return required("id", r.ID) }

// RunShowResponse is a run with its context segments and sample counts.
type RunShowResponse struct {
	core.Run
	Segments []core.ContextSegment `json:"contextSegments"`
	Samples  map[string]int64      `json:"samplesByNode"`
}

// RunShow returns a run with its context segments and samples per node.
func (a *App) RunShow(ctx context.Context, p Principal, req RunShowRequest) (RunShowResponse, error) {
	return run(ctx, a, p, &opRunShow, req, func(ctx context.Context, p Principal, req RunShowRequest) (RunShowResponse, error) {
		r, err := a.d.Store.GetRun(ctx, req.ID)
		if err != nil {
			return RunShowResponse{}, unseen(p, err)
		}
		if err := p.Allow(auth.ActRead, r.LineID); err != nil {
			return RunShowResponse{}, err
		}
		segs, err := a.d.Store.ListContextSegments(ctx, r.ID)
		if err != nil {
			return RunShowResponse{}, err
		}
		if segs == nil {
			segs = []core.ContextSegment{}
		}
		counts, err := a.d.Store.CountRunSamples(ctx, r.ID)
		if err != nil {
			return RunShowResponse{}, err
		}
		return RunShowResponse{Run: r, Segments: segs, Samples: counts}, nil
	})
}

// NodeListRequest filters nodes.
type NodeListRequest struct {
	Line string `json:"line,omitempty" jsonschema:"only this line"`
}

// NodeList lists the nodes of the lines in p's scope.
func (a *App) NodeList(ctx context.Context, p Principal, req NodeListRequest) (List[core.Node], error) {
	return run(ctx, a, p, &opNodeList, req, func(ctx context.Context, p Principal, req NodeListRequest) (List[core.Node], error) {
		return listIn(p, req.Line, func() ([]core.Node, error) { return a.d.Store.ListNodes(ctx, req.Line) }, func(n core.Node) string { return n.LineID })
	})
}

// ---- time series

// TSQueryRequest selects one node's samples: a page after a cursor, or
// aggregates in buckets of a fixed width.
type TSQueryRequest struct {
	Node    string   `json:"node" jsonschema:"node id"`
	Run     string   `json:"run,omitempty" jsonschema:"only this run"`
	Line    string   `json:"line,omitempty" jsonschema:"only this line"`
	Product string   `json:"product,omitempty" jsonschema:"only this product"`
	Recipe  string   `json:"recipe,omitempty" jsonschema:"only this recipe"`
	From    *Instant `json:"from,omitempty" jsonschema:"start, inclusive (epoch ms or RFC 3339)"`
	To      *Instant `json:"to,omitempty" jsonschema:"end, inclusive (epoch ms or RFC 3339)"`
	After   *int64   `json:"afterUs,omitempty" jsonschema:"cursor: strictly after this time in epoch µs (the page's nextAfterTsUs)"`
	Limit   int      `json:"limit,omitempty" jsonschema:"page size (default 10000, at most 100000)"`
	Bucket  Duration `json:"bucket,omitempty" jsonschema:"aggregate into buckets of this width (e.g. 1s, 5m); at least 1ms"`
}

// Validate checks the node, the page size and the bucket width.
func (r *TSQueryRequest) Validate() error {
	if r.Bucket != 0 && r.Bucket.D() < time.Millisecond {
		return core.FieldErrorf(core.CodeInvalidArgument, "bucket", "bucket: %s is shorter than 1ms", r.Bucket)
	}
	return firstErr(required("node", r.Node), limitIn("limit", r.Limit, 1, 100_000))
}

// TSQueryResponse is a page of points (points, hasMore, nextAfterTs) or,
// with a bucket width, a list of buckets (bucketMs, buckets).
type TSQueryResponse struct {
	Node string `json:"node"`
	*core.Page
	*TSBuckets
}

// TSBuckets are aggregates in fixed-width buckets.
type TSBuckets struct {
	BucketMs int64         `json:"bucketMs"`
	Buckets  []core.Bucket `json:"buckets"`
}

func ms(i *Instant) *int64 {
	if i == nil {
		return nil
	}
	v := int64(*i)
	return &v
}

// TSQuery reads one node's samples or buckets.
func (a *App) TSQuery(ctx context.Context, p Principal, req TSQueryRequest) (TSQueryResponse, error) {
	return run(ctx, a, p, &opTSQuery, req, func(ctx context.Context, p Principal, req TSQueryRequest) (TSQueryResponse, error) {
		n, err := a.d.Store.GetNode(ctx, req.Node)
		if err != nil {
			return TSQueryResponse{}, err
		}
		if err := p.Allow(auth.ActRead, n.LineID); err != nil {
			return TSQueryResponse{}, err
		}
		if err := scope(p, auth.ActRead, req.Line); err != nil {
			return TSQueryResponse{}, err
		}
		f := core.ContextFilter{Line: req.Line, Product: req.Product, Recipe: req.Recipe, Run: req.Run}
		if req.Bucket != 0 {
			bms := req.Bucket.D().Milliseconds()
			bs, err := a.d.Store.Buckets(ctx, core.BucketQuery{Node: req.Node, Filter: f, FromMs: ms(req.From), ToMs: ms(req.To), BucketMs: bms})
			if err != nil {
				return TSQueryResponse{}, err
			}
			if bs == nil {
				bs = []core.Bucket{}
			}
			return TSQueryResponse{Node: req.Node, TSBuckets: &TSBuckets{BucketMs: bms, Buckets: bs}}, nil
		}
		limit := req.Limit
		if limit == 0 {
			limit = 10_000
		}
		pg, err := a.d.Store.QueryPage(ctx, core.PageQuery{Node: req.Node, Filter: f, AfterTs: req.After, FromMs: ms(req.From), ToMs: ms(req.To), Limit: limit})
		if err != nil {
			return TSQueryResponse{}, err
		}
		if pg.Points == nil {
			pg.Points = []core.Point{}
		}
		return TSQueryResponse{Node: req.Node, Page: &pg}, nil
	})
}

// TSLatestRequest names a node and optionally its run.
type TSLatestRequest struct {
	Node string `json:"node" jsonschema:"node id"`
	Run  string `json:"run,omitempty" jsonschema:"only this run"`
}

// Validate requires the node.
func (r *TSLatestRequest) Validate() error { return required("node", r.Node) }

// TSLatestResponse is a node's newest sample (absent when it has none).
type TSLatestResponse struct {
	Node   string       `json:"node"`
	Sample *core.Sample `json:"sample,omitempty" jsonschema:"the newest sample (absent: none)"`
}

// TSLatest returns a node's newest sample (of one run when Run is set):
// what a live view needs to know where its data ends. The node's line
// must be in p's scope.
func (a *App) TSLatest(ctx context.Context, p Principal, req TSLatestRequest) (TSLatestResponse, error) {
	return run(ctx, a, p, &opTSLatest, req, func(ctx context.Context, p Principal, req TSLatestRequest) (TSLatestResponse, error) {
		n, err := a.d.Store.GetNode(ctx, req.Node)
		if err != nil {
			return TSLatestResponse{}, err
		}
		if err := p.Allow(auth.ActRead, n.LineID); err != nil {
			return TSLatestResponse{}, err
		}
		out := TSLatestResponse{Node: req.Node}
		latest, err := a.d.Store.Latest(ctx, []string{req.Node}, core.ContextFilter{Run: req.Run})
		if err != nil {
			return out, err
		}
		for _, s := range latest {
			if s.Node == req.Node {
				out.Sample = &s
			}
		}
		return out, nil
	})
}

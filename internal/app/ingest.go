package app

import (
	"context"
	"io"
	"strconv"
	"strings"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/connect"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/ingest"
)

// IngestSamplesRequest is a batch of samples of one line (and optionally
// one run), written in one transaction.
type IngestSamplesRequest struct {
	Line    string `json:"line" jsonschema:"line id"`
	Product string `json:"product,omitempty" jsonschema:"product id (required with run)"`
	Recipe  string `json:"recipe,omitempty" jsonschema:"recipe id (required with run)"`
	// Run, when set, is created (active, from the first sample) if it does
	// not exist; Product and Recipe are then required.
	Run     string         `json:"run,omitempty" jsonschema:"run id: created (active) if it does not exist"`
	Samples []IngestSample `json:"samples" jsonschema:"the samples (at least one)"`
	// Units gives the unit of nodes this batch creates (node → unit).
	Units map[string]string `json:"units,omitempty" jsonschema:"unit of each node this batch creates (node → unit)"`
}

// IngestSample is one sample of a batch.
type IngestSample struct {
	Node string `json:"node"`
	TsMs int64  `json:"ts,omitempty" jsonschema:"epoch milliseconds (or tsUs)"`
	// TsUs gives the time in epoch microseconds instead of ts, for records
	// sampled faster than 1 kHz or off whole milliseconds.
	TsUs  *int64  `json:"tsUs,omitempty" jsonschema:"epoch microseconds, instead of ts"`
	Value float64 `json:"value"`
	State string  `json:"state,omitempty" jsonschema:"ok (default) or another state"`
}

// us is the sample's time in epoch µs.
func (x IngestSample) us() int64 {
	if x.TsUs != nil {
		return *x.TsUs
	}
	return x.TsMs * 1000
}

// Validate checks the batch shape and every id, state and time with the
// rules every ingest path shares (core.CheckID and its siblings).
func (r *IngestSamplesRequest) Validate() error {
	if err := required("line", r.Line); err != nil {
		return err
	}
	if len(r.Samples) == 0 {
		return core.FieldErrorf(core.CodeInvalidArgument, "samples", "a batch needs at least one sample")
	}
	if r.Run != "" && (r.Product == "" || r.Recipe == "") {
		return core.FieldErrorf(core.CodeInvalidArgument, "run", "a run needs product and recipe")
	}
	if err := checkContext(r.Line, r.Product, r.Recipe, r.Run); err != nil {
		return err
	}
	for i, x := range r.Samples {
		f := "samples[" + strconv.Itoa(i) + "]"
		if x.Node == "" {
			return core.FieldErrorf(core.CodeInvalidArgument, f+".node", "sample has no node")
		}
		if err := core.CheckNodeID(f+".node", x.Node); err != nil {
			return err
		}
		if _, err := core.CheckState(f+".state", x.State); err != nil {
			return err
		}
		if x.TsUs != nil {
			if x.TsMs != 0 {
				return core.FieldErrorf(core.CodeInvalidArgument, f+".tsUs", "give the time once: ts (ms) or tsUs (µs), not both")
			}
			if err := core.CheckTsUs(f+".tsUs", *x.TsUs); err != nil {
				return err
			}
		} else if err := core.CheckTs(f+".ts", x.TsMs); err != nil {
			return err
		}
	}
	for n := range r.Units {
		if err := core.CheckNodeID("units", n); err != nil {
			return err
		}
	}
	return nil
}

// checkContext checks the ids a batch or file is stamped with (empty ones
// are not given).
func checkContext(line, product, recipe, run string) error {
	for _, f := range [...][2]string{{"line", line}, {"product", product}, {"recipe", recipe}, {"run", run}} {
		if f[1] == "" {
			continue
		}
		if err := core.CheckID(f[0], f[1]); err != nil {
			return err
		}
	}
	return nil
}

// IngestSamplesResponse counts what a batch wrote.
type IngestSamplesResponse struct {
	Samples    int  `json:"samples"`
	NewNodes   int  `json:"newNodes"`
	RunCreated bool `json:"runCreated"`
}

// checkNodes refuses samples for existing nodes of a line other than the
// batch's (a caller scoped to one line must not write another line's
// signals by labelling them with its own).
func (a *App) checkNodes(ctx context.Context, p Principal, line string, nodes map[string]bool) error {
	for id := range nodes {
		n, err := a.d.Store.GetNode(ctx, id)
		if core.CodeOf(err) == core.CodeNotFound {
			continue
		}
		if err != nil {
			return err
		}
		if err := checkNodeLine(p, line, n); err != nil {
			return err
		}
	}
	return nil
}

// checkNodeLine refuses samples of line for the stored node n when n
// belongs to another line.
func checkNodeLine(p Principal, line string, n core.Node) error {
	if n.LineID == line {
		return nil
	}
	if err := p.Allow(auth.ActIngest, n.LineID); err != nil {
		return err
	}
	return core.FieldErrorf(core.CodeConflict, "samples", "node %q belongs to line %q, not %q", n.ID, n.LineID, line)
}

// checkRun refuses samples stamped with an existing run of another line:
// a caller of line B must not add samples to line A's run (its datasets,
// shadow evidence and write history are line A's).
func (a *App) checkRun(ctx context.Context, p Principal, line, run string) error {
	if run == "" {
		return nil
	}
	r, err := a.d.Store.GetRun(ctx, run)
	if core.CodeOf(err) == core.CodeNotFound {
		return nil
	}
	if err != nil {
		return err
	}
	if r.LineID != line {
		if err := p.Allow(auth.ActIngest, r.LineID); err != nil {
			return err
		}
		return core.FieldErrorf(core.CodeConflict, "run", "run %q belongs to line %q, not %q", run, r.LineID, line)
	}
	return nil
}

// IngestSamples writes a batch in one transaction.
func (a *App) IngestSamples(ctx context.Context, p Principal, req IngestSamplesRequest) (IngestSamplesResponse, error) {
	return run(ctx, a, p, &opIngest, req, func(ctx context.Context, p Principal, b IngestSamplesRequest) (IngestSamplesResponse, error) {
		var res IngestSamplesResponse
		if err := p.Allow(auth.ActIngest, b.Line); err != nil {
			return res, err
		}
		if len(b.Samples) > a.o.MaxBatchSamples {
			return res, core.FieldErrorf(core.CodeQuotaExceeded, "samples", "%d samples in one batch; at most %d", len(b.Samples), a.o.MaxBatchSamples)
		}
		samples := make([]core.Sample, len(b.Samples))
		nodes := map[string]bool{}
		first := b.Samples[0].us()
		for i, x := range b.Samples {
			st, _ := core.CheckState("", x.State) // checked by Validate
			nodes[x.Node] = true
			first = min(first, x.us())
			samples[i] = core.Sample{Node: x.Node, TsUs: x.us(), Value: x.Value, State: st, Line: b.Line, Product: b.Product, Recipe: b.Recipe, Run: b.Run}
		}
		first = core.UsToMs(first)
		if err := a.checkNodes(ctx, p, b.Line, nodes); err != nil {
			return res, err
		}
		if err := a.checkRun(ctx, p, b.Line, b.Run); err != nil {
			return res, err
		}
		err := a.d.Store.Ingest(ctx, func(tx core.IngestTx) error {
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
			return IngestSamplesResponse{}, err
		}
		return res, nil
	})
}

// IngestCSVRequest is one CSV stream with its context and parse options
// (docs/csv-ingest.md). Body is the stream: the API passes the upload, the
// CLI an opened file; nothing is buffered beyond a parser batch.
type IngestCSVRequest struct {
	Line         string   `json:"line" jsonschema:"line id"`
	Product      string   `json:"product" jsonschema:"product id"`
	Recipe       string   `json:"recipe" jsonschema:"recipe id"`
	Run          string   `json:"run" jsonschema:"run id (created from the first and last sample unless it exists)"`
	TimeCol      string   `json:"timeCol,omitempty" jsonschema:"time column (default: auto-detect)"`
	TimeUnit     string   `json:"timeUnit,omitempty" jsonschema:"ms, s, min, h or rfc3339 (default: auto-detect)"`
	TZ           string   `json:"tz,omitempty" jsonschema:"IANA zone of times written without an offset (e.g. Europe/Berlin); a time in a daylight-saving change's repeated or skipped hour is refused"`
	Delimiter    string   `json:"delimiter,omitempty" jsonschema:"cell delimiter: , (default), ;, tab or |"`
	DecimalComma bool     `json:"decimalComma,omitempty" jsonschema:"read 12,5 as 12.5 (needs a delimiter other than ,)"`
	Period       Duration `json:"period,omitempty" jsonschema:"sample period of wide files without a time column (e.g. 100ms)"`
	Start        *Instant `json:"start,omitempty" jsonschema:"time of the first row with period (epoch ms or RFC 3339)"`
	TimeOffset   Duration `json:"timeOffset,omitempty" jsonschema:"added to every time read from the time column"`
	Unit         []string `json:"unit,omitempty" jsonschema:"unit of a created node, written node=unit (repeatable)"`
	IgnoreCol    []string `json:"ignoreCol,omitempty" jsonschema:"wide-file column not to ingest (repeatable)"`
	SkipBad      bool     `json:"skipBad,omitempty" jsonschema:"skip bad rows (counted by reason) instead of failing"`

	// Name names the stream in reports and errors (default "upload:RUN").
	Name string `json:"-"`
	// Body is the CSV stream.
	Body io.Reader `json:"-"`
	// Progress, if set, is told how many bytes were read.
	Progress func(done int64) `json:"-"`
}

// Validate requires the context and well-formed units.
func (r *IngestCSVRequest) Validate() error {
	for _, f := range [...][2]string{{"line", r.Line}, {"product", r.Product}, {"recipe", r.Recipe}, {"run", r.Run}} {
		if err := required(f[0], f[1]); err != nil {
			return err
		}
	}
	for _, u := range r.Unit {
		if n, _, ok := strings.Cut(u, "="); !ok || n == "" {
			return core.FieldErrorf(core.CodeInvalidArgument, "unit", "unit %q: want node=unit", u)
		}
	}
	if r.Body == nil {
		return core.FieldErrorf(core.CodeInvalidArgument, "body", "a CSV body is required")
	}
	return nil
}

// Options are the parser options of the request.
func (r *IngestCSVRequest) Options() ingest.CSVOptions {
	o := ingest.CSVOptions{Line: r.Line, Product: r.Product, Recipe: r.Recipe, Run: r.Run, TimeCol: r.TimeCol, TimeUnit: r.TimeUnit, TZ: r.TZ, Delimiter: r.Delimiter, DecimalComma: r.DecimalComma,
		Period: r.Period.D(), TimeOffsetMs: r.TimeOffset.D().Milliseconds(), IgnoreCols: r.IgnoreCol, SkipBad: r.SkipBad, Units: map[string]string{}}
	if r.Start != nil {
		o.StartMs = int64(*r.Start)
	}
	for _, u := range r.Unit {
		n, unit, _ := strings.Cut(u, "=")
		o.Units[n] = unit
	}
	return o
}

type countReader struct {
	r io.Reader
	n int64
	f func(int64)
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.f != nil {
		c.f(c.n)
	}
	return n, err
}

// IngestCSV streams one CSV through the parser into one ingest transaction.
func (a *App) IngestCSV(ctx context.Context, p Principal, req IngestCSVRequest) (ingest.FileReport, error) {
	return run(ctx, a, p, &opIngestCSV, req, func(ctx context.Context, p Principal, req IngestCSVRequest) (ingest.FileReport, error) {
		if err := p.Allow(auth.ActIngest, req.Line); err != nil {
			return ingest.FileReport{}, err
		}
		o := req.Options()
		if err := a.checkRun(ctx, p, o.Line, o.Run); err != nil {
			return ingest.FileReport{}, err
		}
		name := req.Name
		if name == "" {
			name = "upload:" + o.Run
		}
		body := &countReader{r: req.Body, f: req.Progress}
		rep, err := ingest.Stream(ctx, a.d.Store, body, name, o, func(n core.Node) error {
			return checkNodeLine(p, o.Line, n)
		})
		if err != nil {
			return ingest.FileReport{}, err
		}
		return rep, nil
	})
}

// ---- connectors

// ConnectorListRequest filters connectors.
type ConnectorListRequest struct {
	Line string `json:"line,omitempty" jsonschema:"only this line"`
}

// ConnectorList is the status of every live connector in p's lines, with
// staleness at the application's clock.
func (a *App) ConnectorList(ctx context.Context, p Principal, req ConnectorListRequest) (List[connect.Status], error) {
	return run(ctx, a, p, &opConnectors, req, func(ctx context.Context, p Principal, req ConnectorListRequest) (List[connect.Status], error) {
		return listIn(p, req.Line, func() ([]connect.Status, error) {
			return connect.NewStatusStore(a.d.Store.SQL()).List(ctx, req.Line, a.o.Now())
		}, func(s connect.Status) string { return s.Line })
	})
}

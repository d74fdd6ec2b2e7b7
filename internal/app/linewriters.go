package app

import (
	"context"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
	"github.com/aml-project/aml/internal/twin/guard"
	"github.com/aml-project/aml/internal/twin/steptest"
)

// LineWriters are the governed writers of the lines this process reaches
// (internal/connect/opcua.LineWriters): configured by the process's
// operator when it starts — aml serve --line-writers FILE on a server,
// the local CLI's --opcua-endpoint and --map — never by a request. A
// request names a certificate, a step test or an envelope; the line they
// belong to picks the writer, after the caller's line scope is checked on
// that line.
type LineWriters interface {
	// WriterFor returns line's governed writer (opened on first use and
	// kept open by the registry); nil and no error when no writer is
	// configured for line. A writer that cannot be opened is
	// AML_LINE_WRITER_UNAVAILABLE.
	WriterFor(ctx context.Context, line string) (guard.Writer, error)
	// SampleFor is a step test's sampling period on line.
	SampleFor(line string) time.Duration
}

// writerFor is the governed writer of a write on line: the in-process
// caller's (given: the demo, the tests), else the one the operator
// configured for the line, else nil — the caller's default (the
// recording writer of cert.execute and the envelope cycle, the refusal of
// steptest.execute). With Options.RequireLineWriter a line without a
// configured writer is refused instead (a CLI told to write over OPC UA
// never falls back to recording).
func (a *App) writerFor(ctx context.Context, line string, given guard.Writer) (guard.Writer, error) {
	if given != nil || a.o.LineWriters == nil {
		return given, nil
	}
	w, err := a.o.LineWriters.WriterFor(ctx, line)
	if err != nil {
		return nil, err
	}
	if w == nil && a.o.RequireLineWriter {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "line", "this process writes only to the lines it was given a writer for, not to line %s (is the OPC UA map for line %s?)", line, line)
	}
	return w, nil
}

// liveLine is the live line a step test on line runs on: the in-process
// caller's (given), else the line's configured writer sampled every
// SampleFor(line) on Options.LineClock; nil when neither.
func (a *App) liveLine(ctx context.Context, line string, given steptest.Line) (steptest.Line, error) {
	if given != nil {
		return given, nil
	}
	w, err := a.writerFor(ctx, line, nil)
	if err != nil || w == nil {
		return nil, err
	}
	return &steptest.PacedLine{Writer: w, Period: a.o.LineWriters.SampleFor(line), Clock: a.o.LineClock, Sleep: a.o.LineSleep}, nil
}

// recordingSeed is a recording writer's initial node values: vals (by
// scene control id) on the controls' nodes.
func recordingSeed(scene *contract.SceneContract, vals map[string]float64) map[string]float64 {
	seed := make(map[string]float64, len(vals))
	for v, x := range vals {
		node := v
		if scene != nil {
			if c := scene.Control(v); c != nil && c.NodeID != "" {
				node = c.NodeID
			}
		}
		seed[node] = x
	}
	return seed
}

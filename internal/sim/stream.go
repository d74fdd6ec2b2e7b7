package sim

import (
	"context"
	"os"
	"sync"

	"github.com/aml-project/aml/internal/core"
)

// Stream is a simulated data set generated run by run: the header and the
// run records are known up front, the samples are simulated when a run is
// asked for and never all held at once. It gives exactly the runs and
// samples [GenerateInjection] gives for the same configuration.
type Stream struct {
	Header
	runs []core.Run
}

// NewStream validates cfg (at most MaxTotalSamples) and returns its stream;
// nothing is simulated yet. Errors are those of [GenerateInjection].
func NewStream(cfg InjectionConfig) (*Stream, error) {
	c, err := cfg.Normalize()
	if err != nil {
		return nil, err
	}
	s := &Stream{Header: newHeader(c), runs: make([]core.Run, c.Runs)}
	for r := range s.runs {
		s.runs[r] = runRecord(c, r)
	}
	return s, nil
}

// Runs returns the run records, in order (recipe version 1, as
// [GenerateInjection] gives them).
func (s *Stream) Runs() []core.Run { return s.runs }

// RunIDs returns the run ids, in order.
func (s *Stream) RunIDs() []string {
	ids := make([]string, len(s.runs))
	for i, r := range s.runs {
		ids[i] = r.ID
	}
	return ids
}

// Run simulates run r (0-based) in full.
func (s *Stream) Run(r int) RunData {
	rd, _ := simulateRun(s.Config, r, false)
	return rd
}

// Samples simulates run r (0-based) and hands its samples to fn in order,
// in batches of whole steps of at most WriteBatchSize samples. The batch is
// reused once fn returns; an error of fn stops the run and is returned.
func (s *Stream) Samples(r int, fn func([]core.Sample) error) error {
	g := newRunGen(s.Config, r)
	buf := make([]core.Sample, 0, WriteBatchSize)
	for !g.done() {
		buf = g.fill(buf[:0], WriteBatchSize)
		if err := fn(buf); err != nil {
			return err
		}
	}
	return nil
}

// StreamOptions are the options of [Stream.Write].
type StreamOptions struct {
	// CSVDir, when not empty, also receives each run as the CSV file
	// [Output.WriteCSV] writes, and nodes.csv.
	CSVDir string
	// Progress, when not nil, is called after each run.
	Progress func(doneRuns, totalRuns int)
}

// streamBuffers is the number of sample batches in flight between the
// simulation and the store.
const streamBuffers = 4

// chunk is one batch of a run's samples; last marks the run's final batch.
type chunk struct {
	buf  []core.Sample
	last bool
}

// Write simulates the runs one after another and stores them as
// [Output.Write] does (same records, samples, segments and summary; each run
// in its own Ingest transaction, whose function must run once), while the
// next batch is simulated on another goroutine. Memory stays at a few batches whatever the number and
// length of the runs. With opts.CSVDir it returns the CSV paths written,
// runs first, nodes.csv last.
func (s *Stream) Write(ctx context.Context, st core.SeriesStore, opts StreamOptions) (WriteSummary, []string, error) {
	var paths []string
	if opts.CSVDir != "" {
		if err := os.MkdirAll(opts.CSVDir, 0o755); err != nil {
			return WriteSummary{}, nil, core.Wrap(core.CodeInvalidArgument, err, "create %s", opts.CSVDir)
		}
	}
	sum, rv, err := writeHeader(ctx, st, &s.Header)
	if err != nil {
		return sum, nil, err
	}

	ctx, cancel := context.WithCancel(ctx)
	free := make(chan []core.Sample, streamBuffers)
	for range streamBuffers {
		free <- make([]core.Sample, 0, WriteBatchSize)
	}
	chunks := make(chan chunk, streamBuffers)
	var wg sync.WaitGroup
	wg.Go(func() { s.produce(ctx, free, chunks) })
	defer func() {
		cancel()
		wg.Wait()
	}()

	for r, run := range s.runs {
		if err := ctx.Err(); err != nil {
			return sum, paths, err
		}
		var f *atomicFile
		if opts.CSVDir != "" {
			if f, err = createRunCSV(opts.CSVDir, run.ID); err != nil {
				return sum, paths, err
			}
		}
		created, added, n, err := writeRun(ctx, st, run, rv, func(emit func([]core.Sample) error) error {
			for {
				var c chunk
				select {
				case c = <-chunks:
				case <-ctx.Done():
					return ctx.Err()
				}
				if err := emit(c.buf); err != nil {
					return err
				}
				if f != nil {
					if err := f.rows(c.buf); err != nil {
						return err
					}
				}
				free <- c.buf
				if c.last {
					return nil
				}
			}
		})
		if f != nil {
			if err != nil {
				f.abort()
				return sum, paths, err
			}
			if err = f.commit(); err != nil {
				return sum, paths, err
			}
			paths = append(paths, f.path)
		}
		if err != nil {
			return sum, paths, err
		}
		sum.add(created, added, n)
		if opts.Progress != nil {
			opts.Progress(r+1, len(s.runs))
		}
	}
	if opts.CSVDir != "" {
		path, err := writeNodesCSV(opts.CSVDir, s.Nodes)
		if err != nil {
			return sum, paths, err
		}
		paths = append(paths, path)
	}
	return sum, paths, nil
}

// produce simulates every run in order into batches taken from free and
// sent on out, until done or ctx ends.
func (s *Stream) produce(ctx context.Context, free <-chan []core.Sample, out chan<- chunk) {
	for r := range s.runs {
		g := newRunGen(s.Config, r)
		for !g.done() {
			var buf []core.Sample
			select {
			case buf = <-free:
			case <-ctx.Done():
				return
			}
			buf = g.fill(buf[:0], WriteBatchSize)
			select {
			case out <- chunk{buf: buf, last: g.done()}:
			case <-ctx.Done():
				return
			}
		}
	}
}

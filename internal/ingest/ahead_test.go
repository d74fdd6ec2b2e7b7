package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/core"
)

func aheadCSV(rows int, badAt int) string {
	var b strings.Builder
	b.WriteString("time_ms,a,b,c\n")
	for i := 0; i < rows; i++ {
		if i == badAt {
			fmt.Fprintf(&b, "%d,1,oops,3\n", 1_700_000_000_000+int64(i)*1000)
			continue
		}
		fmt.Fprintf(&b, "%d,%d,%d.5,-%d\n", 1_700_000_000_000+int64(i)*1000, i, i, i)
	}
	return b.String()
}

// parseAhead hands write the batches ParseCSV emits, in order, with the
// same report.
func TestParseAheadSameBatches(t *testing.T) {
	for _, rows := range []int{1, 6, 7, 100, 1000} {
		opts := CSVOptions{Line: "L", Product: "P", Recipe: "R", Run: "r", BatchSize: 7}
		var want [][]core.Sample
		wrep, werr := ParseCSV(strings.NewReader(aheadCSV(rows, -1)), "f", opts, func(b []core.Sample) error {
			want = append(want, slices.Clone(b))
			return nil
		})
		var got [][]core.Sample
		grep, gerr := parseAhead(strings.NewReader(aheadCSV(rows, -1)), "f", opts, 0, func(b []core.Sample) error {
			got = append(got, slices.Clone(b))
			return nil
		})
		if werr != nil || gerr != nil {
			t.Fatalf("rows %d: errors %v / %v", rows, werr, gerr)
		}
		if fmt.Sprint(want) != fmt.Sprint(got) || fmt.Sprint(wrep) != fmt.Sprint(grep) {
			t.Fatalf("rows %d: batches or report differ:\n%v\n%v\n%+v\n%+v", rows, want, got, wrep, grep)
		}
	}
}

// A write error stops the parser and is what parseAhead returns; no batch
// after the failing one reaches write.
func TestParseAheadWriteError(t *testing.T) {
	boom := errors.New("boom")
	opts := CSVOptions{Line: "L", Product: "P", Recipe: "R", Run: "r", BatchSize: 3}
	calls := 0
	_, err := parseAhead(strings.NewReader(aheadCSV(1000, 900)), "f", opts, 0, func(b []core.Sample) error {
		calls++
		if calls == 2 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) || calls != 2 {
		t.Fatalf("err %v after %d calls, want boom after 2", err, calls)
	}
}

// A bad row fails with the parser's error after every batch before it was
// written, as ParseCSV alone does.
func TestParseAheadParseError(t *testing.T) {
	opts := CSVOptions{Line: "L", Product: "P", Recipe: "R", Run: "r", BatchSize: 3}
	count := func(f func(func([]core.Sample) error) error) (int, error) {
		n := 0
		err := f(func(b []core.Sample) error { n += len(b); return nil })
		return n, err
	}
	n1, e1 := count(func(w func([]core.Sample) error) error {
		_, err := ParseCSV(strings.NewReader(aheadCSV(50, 40)), "f", opts, w)
		return err
	})
	n2, e2 := count(func(w func([]core.Sample) error) error {
		_, err := parseAhead(strings.NewReader(aheadCSV(50, 40)), "f", opts, 0, w)
		return err
	})
	if e1 == nil || e2 == nil || e1.Error() != e2.Error() || n1 != n2 || n1 == 0 {
		t.Fatalf("ParseCSV %d samples, %v; parseAhead %d, %v", n1, e1, n2, e2)
	}
	if c := core.CodeOf(e2); c != core.CodeIngestInvalid {
		t.Fatalf("code %s", c)
	}
}

// With a ramp, the batches close at first, 2×first, 4×first … samples
// up to the batch size (a wide row is never split: a batch closes at the
// first row that reaches its size), and together they are ParseCSV's
// samples in the same order, with the same report; a ramp at or above
// the batch size changes nothing.
func TestParseAheadRamp(t *testing.T) {
	for _, tc := range []struct {
		rows, batch, first int
		sizes              []int // batch lengths expected
	}{
		// 3 samples a row: batches close at the row reaching 4, 8, 16, 20.
		{rows: 40, batch: 20, first: 4, sizes: []int{6, 9, 18, 21, 21, 21, 21, 3}},
		{rows: 1, batch: 20, first: 4, sizes: []int{3}},
		{rows: 10, batch: 6, first: 6, sizes: []int{6, 6, 6, 6, 6}},
		{rows: 10, batch: 6, first: 100, sizes: []int{6, 6, 6, 6, 6}},
	} {
		opts := CSVOptions{Line: "L", Product: "P", Recipe: "R", Run: "r", BatchSize: tc.batch}
		var want []core.Sample
		wrep, werr := ParseCSV(strings.NewReader(aheadCSV(tc.rows, -1)), "f", opts, func(b []core.Sample) error {
			want = append(want, b...)
			return nil
		})
		var got []core.Sample
		var sizes []int
		grep, gerr := parseAhead(strings.NewReader(aheadCSV(tc.rows, -1)), "f", opts, tc.first, func(b []core.Sample) error {
			got = append(got, b...)
			sizes = append(sizes, len(b))
			return nil
		})
		if werr != nil || gerr != nil {
			t.Fatalf("%+v: errors %v / %v", tc, werr, gerr)
		}
		if !slices.Equal(want, got) || fmt.Sprint(wrep) != fmt.Sprint(grep) {
			t.Fatalf("%+v: samples or report differ:\n%+v\n%+v", tc, wrep, grep)
		}
		if !slices.Equal(sizes, tc.sizes) {
			t.Fatalf("%+v: batch sizes %v, want %v", tc, sizes, tc.sizes)
		}
	}
}

// sizedTS is fakeTS asking for batches as the PostgreSQL store does
// (IngestBatchSize), recording the size of every batch written.
type sizedTS struct {
	*fakeTS
	size    int
	ramp    bool
	batches []int
}

func (s *sizedTS) IngestBatchSize() (int, bool) { return s.size, s.ramp }

func (s *sizedTS) Ingest(ctx context.Context, fn func(core.IngestTx) error) error {
	return s.fakeTS.Ingest(ctx, func(tx core.IngestTx) error { return fn(sizedTx{tx.(*fakeTx), s}) })
}

type sizedTx struct {
	*fakeTx
	s *sizedTS
}

func (t sizedTx) Write(b []core.Sample) (core.WriteStats, error) {
	t.s.batches = append(t.s.batches, len(b))
	return t.fakeTx.Write(b)
}

// A store that asks for batches without a ramp gets a file of at most that
// many samples as one batch (the whole file, which the PostgreSQL store
// copies in key order), a longer one in batches of that size, and with a
// ramp the first batch at rampFirstBatch; an explicit BatchSize wins. The
// samples stored are the same every way.
func TestStreamBatchSizeOfStore(t *testing.T) {
	cols := []string{"a", "b", "c"}
	for _, tc := range []struct {
		rows, size, optBatch int
		ramp                 bool
		sizes                []int
	}{
		{rows: 1000, size: 1 << 18, sizes: []int{3000}},
		{rows: 1000, size: 3000, sizes: []int{3000}},
		{rows: 1000, size: 1000, sizes: []int{1002, 1002, 996}},
		{rows: 3000, size: 1 << 18, ramp: true, sizes: []int{4098, 4902}},
		{rows: 1000, size: 1 << 18, optBatch: 1500, sizes: []int{1500, 1500}},
	} {
		ts := &sizedTS{fakeTS: newFakeTS(), size: tc.size, ramp: tc.ramp}
		opts := ingestOpts
		opts.BatchSize, opts.Run = tc.optBatch, "r"
		rep, err := Stream(context.Background(), ts, strings.NewReader(wideFile(cols, tc.rows, 0)), "f", opts, nil)
		if err != nil || rep.Samples != 3*tc.rows {
			t.Fatalf("%+v: %v, %+v", tc, err, rep)
		}
		if !slices.Equal(ts.batches, tc.sizes) {
			t.Errorf("%+v: batches %v, want %v", tc, ts.batches, tc.sizes)
		}
		if len(ts.samples) != 3*tc.rows || ts.commits != 1 {
			t.Errorf("%+v: %d samples stored, %d commits", tc, len(ts.samples), ts.commits)
		}
	}
}

// With batches of bigBatch samples or more, parseAhead makes at most two
// batches: the one written and the one the parser fills meanwhile (no
// parsed batch waits, and no returned batch is dropped, so the parser
// makes a new one only when the writer holds the only other) — every
// batch written is one of two arrays, whatever the scheduling (go test
// -cpu 1,2).
func TestParseAheadBigBatchesTwoLive(t *testing.T) {
	opts := CSVOptions{Line: "L", Product: "P", Recipe: "R", Run: "r", BatchSize: bigBatch}
	rows := 5*bigBatch/3 + 10 // ≥ 5 batches of 3-sample rows
	arrays := map[*core.Sample]bool{}
	n, total := 0, 0
	_, err := parseAhead(strings.NewReader(aheadCSV(rows, -1)), "f", opts, 0, func(b []core.Sample) error {
		arrays[&b[:1][0]] = true
		n++
		total += len(b)
		return nil
	})
	if err != nil || total != 3*rows || n < 5 {
		t.Fatalf("%v: %d samples in %d batches", err, total, n)
	}
	if len(arrays) > 2 {
		t.Fatalf("%d batches written from %d arrays, want at most 2", n, len(arrays))
	}
}

// appendTx is sizedTx with Append, as the PostgreSQL store's transaction
// has it: the batches it gets are recorded apart from Write's.
type appendTx struct {
	sizedTx
	appended *[]int
}

func (t appendTx) Append(b []core.Sample) (core.WriteStats, error) {
	*t.appended = append(*t.appended, len(b))
	return t.fakeTx.Write(b)
}

type appendTS struct {
	*sizedTS
	appended []int
}

func (s *appendTS) Ingest(ctx context.Context, fn func(core.IngestTx) error) error {
	return s.fakeTS.Ingest(ctx, func(tx core.IngestTx) error {
		return fn(appendTx{sizedTx{tx.(*fakeTx), s.sizedTS}, &s.appended})
	})
}

// A store whose transaction gathers batches itself (Append) gets the
// stream in batches of appendBatch samples through Append, whatever
// batch size it asks for, and Write nothing; with an explicit BatchSize
// Write gets the batches as before. The samples stored are the file's
// either way.
func TestStreamAppendsSmallBatches(t *testing.T) {
	cols := []string{"a", "b", "c"}
	for _, tc := range []struct {
		rows, optBatch  int
		appended, wrote []int
	}{
		{rows: 1000, appended: []int{1026, 1026, 948}},
		{rows: 100, appended: []int{300}},
		{rows: 1000, optBatch: 1500, wrote: []int{1500, 1500}},
	} {
		ts := &appendTS{sizedTS: &sizedTS{fakeTS: newFakeTS(), size: 1 << 18}}
		opts := ingestOpts
		opts.BatchSize, opts.Run = tc.optBatch, "r"
		rep, err := Stream(context.Background(), ts, strings.NewReader(wideFile(cols, tc.rows, 0)), "f", opts, nil)
		if err != nil || rep.Samples != 3*tc.rows {
			t.Fatalf("%+v: %v, %+v", tc, err, rep)
		}
		if !slices.Equal(ts.appended, tc.appended) || !slices.Equal(ts.batches, tc.wrote) {
			t.Errorf("%+v: appended %v, wrote %v", tc, ts.appended, ts.batches)
		}
		if len(ts.samples) != 3*tc.rows || ts.commits != 1 {
			t.Errorf("%+v: %d samples stored, %d commits", tc, len(ts.samples), ts.commits)
		}
	}
}

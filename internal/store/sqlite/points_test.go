package sqlite

import (
	"context"
	"database/sql/driver"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/samples"
)

// rowsDB is readDB reading pages row by row from the driver's rows
// (appendPointRows), the path before the aml_points aggregate.
type rowsDB struct{ readDB }

func (d rowsDB) AppendPoints(ctx context.Context, q string, args []any, dst []core.Point, limit int) ([]core.Point, bool, error) {
	named := make([]driver.NamedValue, len(args))
	for i, a := range args {
		if v, ok := a.(int); ok {
			a = int64(v)
		}
		named[i] = driver.NamedValue{Ordinal: i + 1, Value: a}
	}
	return d.appendPointRows(ctx, q, named, dst, limit)
}

// The aml_points aggregate gives the row-by-row read's pages: the same
// points (states NULL → "ok" and text, values stored as integers, ±1e300),
// the same HasMore and cursor, at every page size, on a dst holding
// earlier points, and for two readers at once.
func TestAppendPointsAggregate(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	c := sampleRun("r1")
	var in []core.Sample
	for k := range 2500 {
		st := ""
		switch k % 7 {
		case 3:
			st = "bad"
		case 5:
			st = core.StateOK
		}
		v := float64(k) / 8
		switch k % 11 {
		case 2:
			v = float64(k) // written as a whole number
		case 9:
			v = math.Copysign(1e300, float64(1-2*(k%2)))
		}
		in = append(in, mk("a", int64(k)*1_000_000+int64(k%3), v, st, c), mk("b", int64(k)*500_000, -v, "", c))
	}
	if _, err := s.WriteSamples(ctx, in); err != nil {
		t.Fatal(err)
	}
	agg := s.Reader
	rows := &samples.Reader{DB: rowsDB{readDB{s.r}}, Nodes: s.nodes}
	for _, node := range []string{"a", "b"} {
		for _, limit := range []int{1, 7, 1000, 2500, 5000} {
			var after *int64
			var got, want []core.Point
			for pages := 0; ; pages++ {
				q := core.PageQuery{Node: node, Filter: core.ContextFilter{Run: "r1"}, AfterTs: after, Limit: limit}
				pa, err := agg.AppendPage(ctx, q, got)
				if err != nil {
					t.Fatal(err)
				}
				pr, err := rows.AppendPage(ctx, q, want)
				if err != nil {
					t.Fatal(err)
				}
				got, want = pa.Points, pr.Points
				if pa.HasMore != pr.HasMore || pa.NextAfterTs != pr.NextAfterTs {
					t.Fatalf("%s limit %d page %d: more %v next %d, rows %v %d", node, limit, pages, pa.HasMore, pa.NextAfterTs, pr.HasMore, pr.NextAfterTs)
				}
				if !pa.HasMore {
					break
				}
				after = &pa.NextAfterTs
			}
			if len(got) != 2500 || !slices.Equal(got, want) {
				t.Fatalf("%s limit %d: %d points, rows %d, equal %v", node, limit, len(got), len(want), slices.Equal(got, want))
			}
		}
	}
	// Two readers at once: each call's points reach its own sink.
	errs := make(chan error, 2)
	for _, node := range []string{"a", "b"} {
		go func() {
			for range 20 {
				p, err := agg.QueryPage(ctx, core.PageQuery{Node: node, Limit: 5000})
				if err == nil && (len(p.Points) != 2500 || (node == "b") != (p.Points[1].TsUs == 500_000)) {
					err = fmt.Errorf("node %s: %d points, second at %d", node, len(p.Points), p.Points[1].TsUs)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// Rows that do not arrive in ascending ts are read again row by row: the
// result is the query's rows in its own order, as before the aggregate.
func TestAppendPointsUnorderedFallsBack(t *testing.T) {
	s, _ := openTest(t)
	ctx := context.Background()
	c := sampleRun("r1")
	var in []core.Sample
	for k := range 50 {
		in = append(in, mk("a", int64(k)*1000, float64(k), "", c))
	}
	if _, err := s.WriteSamples(ctx, in); err != nil {
		t.Fatal(err)
	}
	pk, err := s.Reader.Node(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	q := `SELECT ts, value, state FROM samples WHERE node = ? ORDER BY ts DESC LIMIT ?`
	got, more, err := readDB{s.r}.AppendPoints(ctx, q, []any{pk, 31}, nil, 30)
	if err != nil {
		t.Fatal(err)
	}
	if !more || len(got) != 30 || got[0].TsUs != 49_000 || got[29].TsUs != 20_000 {
		t.Fatalf("more %v, %d points, first %+v", more, len(got), got[0])
	}
}

// BenchmarkQueryPageRows is BenchmarkQueryPage reading each page row by
// row from the driver's rows (rowsDB): the comparison for the aml_points
// aggregate.
func BenchmarkQueryPageRows(b *testing.B) {
	s := benchStore(b)
	s.Reader = &samples.Reader{DB: rowsDB{readDB{s.r}}, Nodes: s.nodes}
	benchPages(b, s)
}

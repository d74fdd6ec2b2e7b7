package connect

import (
	"context"
	"testing"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqlite"
)

// A batch the store refuses for good (another run already holds the
// instant: AML_CONFLICT) is dropped and counted, not retried forever, and
// the sink goes on storing what follows.
func TestSinkDropsRefusedBatch(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	// Another run holds node n at t=1000.
	if err := st.Ingest(ctx, func(tx core.IngestTx) error {
		if _, err := tx.EnsureRun(core.Run{ID: "other", LineID: "l", ProductID: "p", RecipeID: "r", StartedMs: 0, Status: core.RunActive}); err != nil {
			return err
		}
		_, err := tx.Write([]core.Sample{{Node: "n", TsUs: 1_000_000, Value: 1, State: core.StateOK, Line: "l", Product: "p", Recipe: "r", Run: "other"}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s, err := NewSink(st, SinkOptions{Line: "l", Product: "p", Recipe: "r"})
	if err != nil {
		t.Fatal(err)
	}
	s.SetRun("mine", 0)
	for _, ts := range []int64{999, 1000} {
		if err := s.Add(ctx, "n", ts, 2, core.StateOK); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); core.CodeOf(err) != core.CodeConflict {
		t.Fatalf("flush of a conflicting batch: %v, want %s", err, core.CodeConflict)
	}
	if st := s.Stats(); st.Rejected != 2 || st.Stored != 0 || st.LastError == "" {
		t.Fatalf("stats after the refused batch: %+v", st)
	}
	if err := s.Add(ctx, "n", 2000, 3, core.StateOK); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatalf("the next batch: %v", err)
	}
	if st := s.Stats(); st.Stored != 1 || st.Rejected != 2 {
		t.Fatalf("stats after the next batch: %+v", st)
	}
	c, err := st.CountRunSamples(ctx, "mine")
	if err != nil || c["n"] != 1 {
		t.Fatalf("stored for run mine: %v %v", c, err)
	}
}

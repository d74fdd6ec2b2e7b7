package twinstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqldb"
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/contract"
)

func testSnapshot(t *testing.T, id, line string, at time.Time) *contract.TwinSnapshot {
	t.Helper()
	x := 70.0
	s := &contract.TwinSnapshot{
		SchemaVersion: contract.TwinSnapshotSchemaVersion,
		CreatedAt:     at, CreatedBy: "alice", SnapshotID: id,
		SceneID: "injection-hold-control", SceneVersion: "1.0.0", LineID: line,
		Phase: "holding", CapturedAt: at, DAQWatermark: at.UnixMilli() - 500,
		ControlValues:    map[string]float64{"hold_pressure": 70, "hold_time": 8, "melt_temperature_setpoint": 245},
		StateEstimate:    map[string]float64{"cavity_pressure": 69.5},
		DataQuality:      contract.DataQuality{Fresh: true, Completeness: 1},
		EstimatorVersion: "last-valid/v1",
		Window:           &contract.SnapshotWindow{BeatMs: 1000, EndMs: at.UnixMilli() - 1000, Steps: 2, Values: map[string][]*float64{"hold_pressure": {nil, &x}}},
	}
	if err := s.Seal(); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSnapshotPutGetList(t *testing.T) {
	forEachBackend(t, func(t *testing.T, be backend) {
		s := be.open(t)
		ctx := context.Background()
		t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
		a := testSnapshot(t, "snap-a", "line-1", t0)
		b := testSnapshot(t, "snap-b", "line-1", t0.Add(time.Minute))
		c := testSnapshot(t, "snap-c", "line-2", t0.Add(2*time.Minute))
		for i, x := range []*contract.TwinSnapshot{a, b, c} {
			if err := s.PutSnapshot(ctx, x, i == 1); err != nil {
				t.Fatal(err)
			}
		}
		got, info, err := s.GetSnapshotInfo(ctx, "snap-b")
		if err != nil || got.SnapshotHash != b.SnapshotHash || !info.Strict || info.CreatedBy != "alice" {
			t.Fatalf("get: %v %+v %+v", err, got, info)
		}
		if h, _ := got.Hash(); h != b.SnapshotHash || *got.Window.Values["hold_pressure"][1] != 70 || got.Window.Values["hold_pressure"][0] != nil {
			t.Fatalf("round trip changed the snapshot: %s %+v", h, got.Window)
		}
		if _, err := s.GetSnapshot(ctx, "nope"); core.CodeOf(err) != core.CodeNotFound {
			t.Fatalf("unknown id: %v", err)
		}
		l1, err := s.ListSnapshots(ctx, "line-1", 0)
		if err != nil || len(l1) != 2 || l1[0].SnapshotID != "snap-b" || l1[1].SnapshotID != "snap-a" || !l1[0].Strict || l1[1].Strict {
			t.Fatalf("list line-1: %v %+v", err, l1)
		}
		all, err := s.ListSnapshots(ctx, "", 2)
		if err != nil || len(all) != 2 || all[0].SnapshotID != "snap-c" {
			t.Fatalf("list all limit 2: %v %+v", err, all)
		}
		if _, err := s.ListSnapshots(ctx, "", -1); core.CodeOf(err) != core.CodeInvalidArgument {
			t.Fatalf("bad limit: %v", err)
		}
		// Audited, one entry per snapshot.
		es, err := s.AuditLog().List(ctx, 0, 100, "snap-b")
		if err != nil || len(es) != 1 || es[0].Action != twinstore.AuditSnapshotCreate || es[0].Actor != "alice" || es[0].LineID != "line-1" {
			t.Fatalf("audit: %v %+v", err, es)
		}
	})
}

func TestSnapshotPutRefuses(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
		a := testSnapshot(t, "snap-a", "line-1", t0)
		if err := s.PutSnapshot(ctx, a, false); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name string
			mut  func(x *contract.TwinSnapshot) error
			code string
		}{
			{"duplicate id", func(x *contract.TwinSnapshot) error { return nil }, core.CodeConflict},
			{"unsealed", func(x *contract.TwinSnapshot) error { x.SnapshotID, x.SnapshotHash = "snap-u", ""; return nil }, core.CodeInvalidArgument},
			{"hash mismatch", func(x *contract.TwinSnapshot) error { x.SnapshotID = "snap-m"; return nil }, contract.CodeContractInvalid},
			{"invalid", func(x *contract.TwinSnapshot) error { x.SnapshotID, x.Phase = "snap-i", ""; return x.Seal() }, contract.CodeContractInvalid},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				x := testSnapshot(t, "snap-a", "line-1", t0)
				if err := c.mut(x); err != nil {
					t.Fatal(err)
				}
				if err := s.PutSnapshot(ctx, x, false); core.CodeOf(err) != c.code {
					t.Fatalf("got %v, want %s", err, c.code)
				}
			})
		}
		if err := s.PutSnapshot(ctx, nil, false); core.CodeOf(err) != core.CodeInvalidArgument {
			t.Fatalf("nil: %v", err)
		}
		// Nothing of the refused ones was stored or audited.
		if l, _ := s.ListSnapshots(ctx, "", 0); len(l) != 1 {
			t.Fatalf("stored %d snapshots, want 1", len(l))
		}
		if es, _ := s.AuditLog().List(ctx, 0, 100, ""); len(es) != 1 {
			t.Fatalf("%d audit entries, want 1", len(es))
		}
	})
}

func TestSnapshotImmutableAndTamperDetected(t *testing.T) {
	forEachBackend(t, func(t *testing.T, b backend) {
		s := b.open(t)
		ctx := context.Background()
		t0 := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
		if err := s.PutSnapshot(ctx, testSnapshot(t, "snap-a", "line-1", t0), false); err != nil {
			t.Fatal(err)
		}
		if _, err := s.SQL().ExecContext(ctx, `UPDATE twin_snapshots SET strict=1 WHERE snapshot_id='snap-a'`); !sqldb.IsConstraint(err) {
			t.Fatalf("the trigger let a snapshot change: %v", err)
		}
		var orig string
		if err := s.SQL().QueryRowContext(ctx, `SELECT snapshot_json FROM twin_snapshots WHERE snapshot_id='snap-a'`).Scan(&orig); err != nil {
			t.Fatal(err)
		}
		// Someone with file access drops the trigger and edits the row.
		mustExec(t, s, b.dropTrigger("twin_snapshots_no_update", "twin_snapshots"))
		edits := []struct{ name, sql string }{
			{"value edited", `UPDATE twin_snapshots SET snapshot_json=replace(snapshot_json, '"hold_pressure":70', '"hold_pressure":75')`},
			{"row hash edited", `UPDATE twin_snapshots SET hash='` + "0000000000000000000000000000000000000000000000000000000000000000" + `'`},
			{"line column edited", `UPDATE twin_snapshots SET line_id='line-9'`},
			{"garbage", `UPDATE twin_snapshots SET snapshot_json='{"x":1}'`},
		}
		for _, e := range edits {
			t.Run(e.name, func(t *testing.T) {
				if _, err := s.SQL().ExecContext(ctx, e.sql); err != nil {
					t.Fatal(err)
				}
				if _, err := s.GetSnapshot(ctx, "snap-a"); core.CodeOf(err) != twinstore.CodeSnapshotTampered {
					t.Fatalf("got %v, want %s", err, twinstore.CodeSnapshotTampered)
				}
				// Restore for the next edit.
				h := testSnapshot(t, "snap-a", "line-1", t0).SnapshotHash
				if _, err := s.SQL().ExecContext(ctx, `UPDATE twin_snapshots SET snapshot_json=?, hash=?, line_id='line-1'`, orig, h); err != nil {
					t.Fatal(err)
				}
				if _, err := s.GetSnapshot(ctx, "snap-a"); err != nil {
					t.Fatalf("restored: %v", err)
				}
			})
		}
	})
}

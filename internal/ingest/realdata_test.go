package ingest

import (
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// sharedDatasets is the shared datasets folder relative to this package.
const sharedDatasets = "../../../shared/datasets/"

func openShared(t *testing.T, rel string) *os.File {
	t.Helper()
	f, err := os.Open(sharedDatasets + rel)
	if os.IsNotExist(err) {
		t.Skip("shared datasets folder absent: " + sharedDatasets + rel)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestRealCascadedTanks(t *testing.T) {
	f := openShared(t, "cascaded_tanks/cascaded_tanks_estimation.csv")
	var got []core.Sample
	rep, err := ParseCSV(f, "cascaded_tanks_estimation.csv",
		CSVOptions{Line: "tanks", TimeCol: "time_s", IgnoreCols: []string{"k"}},
		func(b []core.Sample) error { got = append(got, b...); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if rep.Rows != 1024 || rep.Samples != 2048 || len(got) != 2048 || rep.Missing != 0 || rep.Skipped != 0 {
		t.Errorf("report %+v", rep)
	}
	if !reflect.DeepEqual(rep.Nodes, []string{"u_V", "y_V"}) {
		t.Errorf("nodes %v", rep.Nodes)
	}
	if rep.FirstTs != 0 || rep.LastTs != 4092000 {
		t.Errorf("time range %d..%d", rep.FirstTs, rep.LastTs)
	}
	// Spot check the first row: 0,0,3.2567,5.205.
	if got[0] != (core.Sample{Node: "u_V", TsUs: 0, Value: 3.2567, State: core.StateOK, Line: "tanks"}) ||
		got[1].Node != "y_V" || got[1].Value != 5.205 {
		t.Errorf("first samples %+v %+v", got[0], got[1])
	}
}

func TestRealDaisyWinding(t *testing.T) {
	f := openShared(t, "daisy_winding/winding.csv")
	n := 0
	rep, err := ParseCSV(f, "winding.csv", CSVOptions{Line: "winding", Period: 100 * time.Millisecond},
		func(b []core.Sample) error { n += len(b); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if rep.Rows != 2500 || len(rep.Nodes) != 7 || rep.Samples != 2500*7 || n != 2500*7 {
		t.Errorf("report %+v", rep)
	}
	if rep.FirstTs != 0 || rep.LastTs != 2499*100 {
		t.Errorf("time range %d..%d", rep.FirstTs, rep.LastTs)
	}
	if rep.Nodes[0] != "u1_S1_speed_reel1" || rep.Nodes[6] != "y2_T3_tension_reel2_3" {
		t.Errorf("nodes %v", rep.Nodes)
	}
}

package trainers

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/dataset"
	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/ingest"
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/store/sqlite"
)

const lego = "../../../../shared/datasets/injection_molding_lego_warpage/injection_molding_lego_warpage.csv"

// legoPartJob runs the whole platform path on real data — CSV ingest (one
// row per moulded part of the 6x2 brick) → static dataset → a job with
// trainer ref and params → platform evaluation and gates — and returns the
// finished job, its platform test R² and the data directory.
func legoPartJob(t *testing.T, ref, params string) (core.Job, float64, string) {
	t.Helper()
	if _, err := os.Stat(lego); err != nil {
		t.Skip("shared datasets folder absent")
	}
	dir := t.TempDir()
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	}()
	ctx := context.Background()
	// One part (6x2 brick): its 77 rows as one run of cycles.
	raw, _ := os.ReadFile(lego)
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	var part []string
	part = append(part, lines[0])
	for _, l := range lines[1:] {
		if strings.HasSuffix(l, ",6x2_Lego") {
			part = append(part, l)
		}
	}
	if len(part) != 78 {
		t.Fatalf("%d rows of part 6x2", len(part)-1)
	}
	partCSV := filepath.Join(dir, "lego_6x2.csv")
	if err := os.WriteFile(partCSV, []byte(strings.Join(part, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = ingest.IngestFiles(ctx, st, []string{partCSV}, ingest.CSVOptions{Line: "lego", Product: "bricks", Recipe: "ccd", Run: "lego-6x2",
		Period: time.Second, IgnoreCols: []string{"row", "part"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	spec := &dataset.Spec{LineID: "lego", ProductID: "bricks", RecipeID: "ccd", BeatMs: 1000, Purpose: dataset.PurposeStaticResponse,
		Nodes: []dataset.NodeSpec{
			{NodeID: "holding_pressure_bar", Role: dataset.RoleControl}, {NodeID: "holding_pressure_time_s", Role: dataset.RoleControl},
			{NodeID: "melt_temp_C", Role: dataset.RoleControl}, {NodeID: "mold_temp_C", Role: dataset.RoleControl},
			{NodeID: "cooling_time_s", Role: dataset.RoleControl}, {NodeID: "volume_flow_cm3_s", Role: dataset.RoleControl},
			{NodeID: "max_deformation_mm", Role: dataset.RoleTarget}},
		Split: dataset.Split{ValRatio: 0.15, TestRatio: 0.2, Seed: 3}}
	off := false
	spec.Cleaning.Hampel = &dataset.Hampel{WindowMs: 1000, Threshold: 0} // static rows: no time-series outlier filter
	spec.Cleaning.Range = &off
	ds, err := dataset.Build(ctx, st, spec, dataset.Options{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	r := jobs.NewRunner(st, jobs.Options{DataDir: dir, Trainers: jobs.NewTrainers(All()...).WithFormats(Formats()), Bus: events.New()})
	j, err := r.Submit(ctx, jobs.SubmitRequest{DatasetID: ds.Dataset.ID, TrainerRef: ref, Params: json.RawMessage(params), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(ctx, j.ID, 0); err != nil {
		t.Fatal(err)
	}
	j, _ = st.GetJob(ctx, j.ID)
	if j.Status != core.JobDone {
		t.Fatalf("job %s: %s %s", j.Status, j.ErrorCode, j.Error)
	}
	var m struct {
		Test struct {
			MeanR2 float64 `json:"meanR2"`
		} `json:"test"`
	}
	if err := json.Unmarshal(j.Metrics, &m); err != nil {
		t.Fatal(err)
	}
	t.Logf("lego part 6x2, random row split, %s: platform test R² %.4f, gates passed %v", ref, m.Test.MeanR2, j.GatePassed)
	return j, m.Test.MeanR2, dir
}

// TestStaticResponseOnLegoThroughJobs: static_response@1 on the Lego part
// through the platform.
func TestStaticResponseOnLegoThroughJobs(t *testing.T) {
	j, r2, dir := legoPartJob(t, "static_response@1", `{"degrees":[1,2]}`)
	if r2 < 0.9 {
		t.Fatalf("test R² %.3f", r2)
	}
	if _, err := os.Stat(filepath.Join(dir, "jobs", j.ID, "artifacts", "model.json")); err != nil {
		t.Fatal(err)
	}
}

package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/sim"
)

// amlAt runs the CLI with the application clock at now (the clock of
// snapshots, trials and certificates).
func amlAt(t *testing.T, now time.Time, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	a := &app{stdout: &out, stderr: &errb, log: slog.New(slog.NewTextHandler(&errb, nil)), clock: func() time.Time { return now }}
	code := runApp(a, args)
	return out.String(), errb.String(), code
}

// ownLine is a plant line that is not AML's simulator, from its exports to
// a trained linear twin model: the shared steps of the own-line tests.
type ownLine struct {
	d, dir string
	ex     *sim.PlantExports
	common []string // --line/--product/--recipe
}

func newOwnLine(t *testing.T) *ownLine {
	t.Helper()
	if testing.Short() {
		t.Skip("the own-line chain trains and gates a twin model; runs without -short")
	}
	l := &ownLine{d: t.TempDir(), dir: t.TempDir(), common: []string{"--line", "tank-line", "--product", "tank", "--recipe", "tank-level"}}
	ex, err := sim.WritePlantExports(l.dir, sim.PlantConfig{Seed: 3, ShadowRuns: 3, LiveMinutes: 12})
	if err != nil {
		t.Fatal(err)
	}
	l.ex = ex
	return l
}

func (l *ownLine) ok(t *testing.T, now time.Time, args ...string) string {
	t.Helper()
	out, errs, code := amlAt(t, now, append(args, "--data", l.d, "--json")...)
	if code != 0 {
		t.Fatalf("aml %s: exit %d\n%s%s", strings.Join(args, " "), code, errs, out)
	}
	return out
}

func (l *ownLine) fails(t *testing.T, now time.Time, code string, args ...string) string {
	t.Helper()
	out, errs, c := amlAt(t, now, append(args, "--data", l.d)...)
	if c != 1 || !strings.Contains(errs, "error: "+code+":") {
		t.Fatalf("aml %s: exit %d, want %s\n%s%s", strings.Join(args, " "), c, code, errs, out)
	}
	return errs
}

func (l *ownLine) ingest(t *testing.T, now time.Time, files []string, extra ...string) {
	t.Helper()
	args := append([]string{"ingest", "csv"}, files...)
	args = append(append(args, l.common...), "--tz", "Europe/Berlin", "--delimiter", ";", "--decimal-comma")
	l.ok(t, now, append(args, extra...)...)
}

// spec is examples/own-line/spec.json, the example script's dataset spec.
func (l *ownLine) spec(t *testing.T) string {
	t.Helper()
	f, err := filepath.Abs("../../examples/own-line/spec.json")
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// train builds the dataset and trains linear_state_space@1 on it.
func (l *ownLine) train(t *testing.T, now time.Time) (dsID string, verified bool, modelID string) {
	t.Helper()
	var ds struct {
		Dataset struct {
			ID              string
			LineageVerified bool
		}
	}
	mustJSON(t, l.ok(t, now, "dataset", "build", "--spec", l.spec(t)), &ds)
	var job struct{ ModelID, Status, Error string }
	mustJSON(t, l.ok(t, now, "job", "submit", "--dataset", ds.Dataset.ID, "--trainer", "linear_state_space@1", "--wait"), &job)
	if job.ModelID == "" {
		t.Fatalf("job %s: %s", job.Status, job.Error)
	}
	return ds.Dataset.ID, ds.Dataset.LineageVerified, job.ModelID
}

// TestOwnLine is the plant's own line from its CSV exports to an approved,
// re-validated write (docs/own-line.md, examples/own-line): plant CSVs
// with local times, ';' and decimal commas; a line file; lineage refused
// until the batch records are imported; a linear state-space twin; a scene
// drafted from the model and frozen; the twin gate; the optimiser; a
// certificate approved ten minutes later, executed after re-validation
// through the recording writer, and read back.
func TestOwnLine(t *testing.T) {
	l := newOwnLine(t)
	// The clocks: the models are made after the five history runs, shadow
	// evidence after three more runs, and the live run is snapshotted at t0.
	tMade := l.ex.StartsUTC[len(l.ex.StartsUTC)-1].Add(4 * time.Hour)
	t0 := l.ex.LiveEnd[0].Add(5 * time.Second)
	l.ingest(t, tMade, l.ex.Runs)
	var nodes []core.Node
	l.ok(t, tMade, "line", "apply", l.ex.LineFile)
	mustJSON(t, l.ok(t, tMade, "nodes", "list", "--line", "tank-line"), &nodes)
	for _, n := range nodes {
		if (n.ID == "heater_sp" || n.ID == "feed_sp") != (n.Kind == core.NodeDCW) || n.Unit == "" || n.Min == nil {
			t.Fatalf("node after the line file: %+v", n)
		}
	}

	// Without batch records the lineage is not verified, and the model
	// may not go to production for the twin.
	_, verified, unverified := l.train(t, tMade)
	if verified {
		t.Fatal("lineage verified without batch records")
	}
	l.ok(t, tMade, "model", "promote", unverified, "--to", "shadow", "--as", "ada")
	l.fails(t, tMade, core.CodeLineageUnverified, "model", "promote", unverified, "--to", "production", "--as", "ada")

	// The plant's batch records: recipe versions and run events.
	l.ok(t, tMade, "recipe", "put", l.ex.Recipe, "--line", "tank-line", "--product", "tank", "--recipe", "tank-level")
	l.ok(t, tMade, "runs", "events", l.ex.Batch, "--line", "tank-line")
	dsID, verified, m := l.train(t, tMade)
	if !verified {
		t.Fatal("lineage not verified after the batch records")
	}

	// A scene drafted from the model, checked, stored and frozen.
	out, errs, code := amlAt(t, tMade, "twin", "scene", "init", "--model", m, "--id", "tank", "--data", l.d)
	if code != 0 || !strings.Contains(out, "scene:\n") || !strings.Contains(out, "heater_sp") {
		t.Fatalf("scene init: %d %s\n%s", code, errs, out)
	}
	sceneFile := filepath.Join(l.dir, "scene.yaml")
	if err := os.WriteFile(sceneFile, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	l.ok(t, tMade, "twin", "scene", "check", sceneFile, "--model", m)
	var put struct{ SceneID, SceneVersion, Hash, Objective string }
	mustJSON(t, l.ok(t, tMade, "twin", "scene", "put", sceneFile, "--as", "erin"), &put)
	if put.Objective != "tank-objective" {
		t.Fatalf("scene put: %+v", put)
	}
	l.ok(t, tMade, "twin", "scene", "freeze", "tank", "--version", put.SceneVersion, "--expect-hash", put.Hash, "--as", "ada")
	l.ok(t, tMade, "channel", "set", "--line", "tank-line", "--profile", "hybrid_twin", "--policy", "hitl_governed", "--scene", "tank@1.0.0", "--as", "ada")

	// The line keeps running: shadow evidence on the runs after the model.
	tShadow := t0.Add(-24 * time.Hour)
	l.ingest(t, tShadow, l.ex.Shadow)
	l.ok(t, tShadow, "twin", "shadow", "--model", m)

	// The twin gate on replayed test-run snapshots.
	var g struct {
		Report struct {
			Passed bool
			Checks []struct {
				ID     string
				Passed bool
				Detail string
			}
		}
	}
	mustJSON(t, l.ok(t, tShadow, "twin", "gate", "--model", m, "--scene", "tank"), &g)
	if !g.Report.Passed {
		b, _ := json.MarshalIndent(g.Report.Checks, "", " ")
		t.Fatalf("twin gate failed: %s", b)
	}

	// An ARX model (one_step@1) of the same dataset runs in the twin too:
	// its own scene fit, shadow evidence and twin gate.
	var arx struct{ ModelID, Status, Error string }
	mustJSON(t, l.ok(t, tMade, "job", "submit", "--dataset", dsID, "--trainer", "one_step@1", "--wait"), &arx)
	l.ok(t, tShadow, "twin", "scene", "check", sceneFile, "--model", arx.ModelID)
	l.ok(t, tShadow, "twin", "shadow", "--model", arx.ModelID)
	var ga struct {
		Report struct {
			Passed bool
			Checks []struct {
				ID     string
				Passed bool
				Detail string
			}
		}
	}
	mustJSON(t, l.ok(t, tShadow, "twin", "gate", "--model", arx.ModelID, "--scene", "tank"), &ga)
	if !ga.Report.Passed {
		t.Fatalf("the ARX model's twin gate failed: %+v", ga.Report.Checks)
	}

	// The validation view: both models on a run they were not trained on.
	var cmp struct {
		Validation []struct {
			ModelID string
			Fit     *struct {
				Segments int
				FreeRun  []struct {
					Target string
					FitPct float64
				}
				KStep []struct{ FitPct float64 }
				Steps []struct {
					Control           string
					Gain, DeadTimeSec float64
				}
			}
			Error string
		}
	}
	mustJSON(t, l.ok(t, tShadow, "model", "compare", m, arx.ModelID, "--run", "shadow-01"), &cmp)
	if len(cmp.Validation) != 2 {
		t.Fatalf("validation view: %+v", cmp)
	}
	for _, v := range cmp.Validation {
		if v.Fit == nil || v.Fit.Segments != 1 || len(v.Fit.FreeRun) != 1 || v.Fit.FreeRun[0].Target != "level" || !(v.Fit.FreeRun[0].FitPct > 80) || !(v.Fit.KStep[0].FitPct > 80) {
			t.Fatalf("fit of %s on shadow-01: %+v %s", v.ModelID, v.Fit, v.Error)
		}
		// the step responses read the plant's gains (0.9 cm/degC, −0.6 cm per l/min)
		want := map[string]float64{"heater_sp": 0.9, "feed_sp": -0.6}
		for _, st := range v.Fit.Steps {
			if g := want[st.Control]; math.Abs(st.Gain-g) > 0.15*math.Abs(g) {
				t.Errorf("%s: gain %s → level %.3f, the plant's %.3f", v.ModelID, st.Control, st.Gain, g)
			}
		}
	}
	svgDir := filepath.Join(l.dir, "plots")
	if text, _, _ := amlAt(t, tShadow, "model", "compare", m, arx.ModelID, "--run", "shadow-01", "--svg", svgDir, "--data", l.d); !strings.Contains(text, "fit % on run shadow-01") {
		t.Fatalf("compare text:\n%s", text)
	}
	if b, err := os.ReadFile(filepath.Join(svgDir, "shadow-01-level.svg")); err != nil || !strings.Contains(string(b), "<svg") || !strings.Contains(string(b), "linear_state_space@1 fit ") {
		t.Fatalf("compare --svg: %v", err)
	}

	// The live run: a snapshot now, the optimiser, a certificate.
	l.ingest(t, t0, l.ex.Live[:1], "--run", "live")
	var snap struct{ Snapshot struct{ SnapshotID string } }
	mustJSON(t, l.ok(t, t0, "twin", "snapshot", "take", "--scene", "tank", "--model", m, "--run", "live"), &snap)
	var opt struct {
		Record *struct{ Trial struct{ TrialID string } }
		Result struct{ NoPass string }
	}
	mustJSON(t, l.ok(t, t0, "twin", "optimize", "--model", m, "--snapshot", snap.Snapshot.SnapshotID), &opt)
	if opt.Record == nil {
		t.Fatalf("no passing move: %s", opt.Result.NoPass)
	}
	// The unverified model does not drive the optimiser.
	l.fails(t, t0, core.CodeLineageUnverified, "twin", "optimize", "--model", unverified, "--snapshot", snap.Snapshot.SnapshotID)

	var c struct {
		Cert struct{ RecommendationID string } `json:"certificate"`
	}
	mustJSON(t, l.ok(t, t0, "cert", "issue", "--trial", opt.Record.Trial.TrialID, "--as", "erin"), &c)
	id := c.Cert.RecommendationID

	// Ten minutes later the line has kept running; a person approves.
	t10 := t0.Add(10 * time.Minute)
	l.ingest(t, t10, l.ex.Live[1:], "--run", "live")
	l.ok(t, t10, "cert", "approve", id, "--as", "ada")
	ownLineExecute(t, l, t10, id)
}

// ownLineExecute executes the approved certificate id after re-validation
// through the recording writer and reads it back: the certificate is
// executed, its write is in the result with the fresh snapshot's values,
// and the approver's view shows the predicted level in cm against its
// target.
func ownLineExecute(t *testing.T, l *ownLine, now time.Time, id string) {
	t.Helper()
	out := l.ok(t, now, "cert", "execute", id, "--as", "otto")
	var res struct {
		Allowed, Executed bool
		Writes            []struct {
			NodeID string
			Value  float64
		}
		Revalidation *struct {
			SnapshotID string
			Passed, OK bool
			CapturedAt time.Time
		}
	}
	mustJSON(t, out, &res)
	if !res.Allowed || !res.Executed || len(res.Writes) == 0 {
		t.Fatalf("execute: %s", out)
	}
	if r := res.Revalidation; r == nil || !r.Passed || !r.OK || !r.CapturedAt.Equal(now) {
		t.Fatalf("execute did not re-validate from a fresh snapshot at %s: %+v", now, r)
	}
	for _, w := range res.Writes {
		if w.NodeID != "heater_sp" && w.NodeID != "feed_sp" {
			t.Fatalf("write to %s", w.NodeID)
		}
	}
	var shown struct {
		Certificate struct{ Status string }
		Targets     []struct {
			NodeID, Unit string
			Target       float64
			Mean         []float64
		}
	}
	mustJSON(t, l.ok(t, now, "cert", "show", id), &shown)
	if shown.Certificate.Status != "EXECUTED" || len(shown.Targets) != 1 || shown.Targets[0].Unit != "cm" || shown.Targets[0].NodeID != "level" || len(shown.Targets[0].Mean) == 0 {
		t.Fatalf("certificate after execute: %+v", shown)
	}
	text, errs, code := amlAt(t, now, "cert", "show", id, "--data", l.d)
	if code != 0 || !strings.Contains(text, "level [cm]: target 50") {
		t.Fatalf("cert show: %d %s\n%s", code, errs, text)
	}
}

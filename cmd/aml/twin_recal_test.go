package main

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// aml twin shadow and aml twin calibrate on a simulated line: a model
// trained on the first 4 of 5 runs (test_mean@1), the fifth run is new. The
// simulated runs ended before the model was made, so there is no shadow
// evidence; the new run's 600 rows reach minNewRows and a request is
// queued, a second refused; --run rebuilds the dataset and trains a new
// candidate; list shows the request cooling down.
func TestTwinShadowAndCalibrateCLI(t *testing.T) {
	t.Setenv("AML_TEST_TRAINERS", "1")
	d := t.TempDir()
	if _, errs, code := aml(t, "sim", "injection", "--runs", "5", "--seed", "4", "--duration", "10m", "--data", d); code != 0 {
		t.Fatal(errs)
	}
	b, _ := os.ReadFile("../../examples/specs/injection.json")
	var spec map[string]any
	if err := json.Unmarshal(b, &spec); err != nil {
		t.Fatal(err)
	}
	spec["stride"] = 5
	spec["runIds"] = []string{"recipe-injection-a-run-001", "recipe-injection-a-run-002", "recipe-injection-a-run-003", "recipe-injection-a-run-004"}
	spec["split"].(map[string]any)["valRatio"] = 0.25
	spec["split"].(map[string]any)["testRatio"] = 0.25
	sb, _ := json.Marshal(spec)
	if err := os.WriteFile(d+"/spec.json", sb, 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := aml(t, "dataset", "build", "--spec", d+"/spec.json", "--data", d, "--json")
	if code != 0 {
		t.Fatal(errs)
	}
	var ds struct {
		Dataset struct{ ID string } `json:"dataset"`
	}
	mustJSON(t, out, &ds)
	out, errs, code = aml(t, "job", "submit", "--dataset", ds.Dataset.ID, "--trainer", "test_mean@1", "--params", `{"steps":10,"stepMs":1}`, "--wait", "--data", d, "--json")
	if code != 0 {
		t.Fatal(errs)
	}
	var j struct{ ModelID string }
	mustJSON(t, out, &j)

	out, errs, code = aml(t, "twin", "shadow", "--model", j.ModelID, "--data", d, "--json")
	if code != 0 {
		t.Fatal(errs)
	}
	var ev struct {
		ModelID  string
		Eligible int
		Runs     []any
	}
	mustJSON(t, out, &ev)
	if ev.ModelID != j.ModelID || ev.Eligible != 0 || len(ev.Runs) != 0 {
		t.Fatalf("shadow: %s", out)
	}
	out, _, _ = aml(t, "twin", "shadow", "--model", j.ModelID, "--data", d)
	if !strings.Contains(out, "no shadow evidence yet") {
		t.Fatalf("shadow text:\n%s", out)
	}
	if _, errs, code := aml(t, "twin", "shadow", "--data", d); code != 2 || !strings.Contains(errs, "--model") {
		t.Fatalf("missing --model: %d %s", code, errs)
	}

	calibrate := func(extra ...string) (map[string]any, string) {
		t.Helper()
		out, errs, code := aml(t, append([]string{"twin", "calibrate", "--model", j.ModelID, "--scene", "inj", "--by", "ann", "--data", d, "--json"}, extra...)...)
		if code != 0 {
			t.Fatal(errs)
		}
		var res map[string]any
		mustJSON(t, out, &res)
		return res["decision"].(map[string]any), out
	}
	dec, out := calibrate()
	sig := dec["signal"].(map[string]any)
	if dec["accepted"] != true || dec["reason"] != "QUEUED" || sig["newRuns"].(float64) != 1 || sig["newRows"].(float64) != 600 || dec["dedupKey"] != "inj:line-injection-01:recipe-injection-a:twin-calibration-v1" {
		t.Fatalf("first calibrate: %s", out)
	}
	dec, out = calibrate("--run")
	if dec["accepted"] != false || dec["reason"] != "ACTIVE_OR_COOLDOWN" {
		t.Fatalf("second calibrate: %s", out)
	}
	var res struct {
		Step struct {
			Claimed struct {
				State, DatasetID, JobID, NewModelID, Error string
			}
		}
	}
	mustJSON(t, out, &res)
	c := res.Step.Claimed
	if c.State != "cooldown" || c.NewModelID == "" || c.Error != "" {
		t.Fatalf("worker step: %s", out)
	}
	out, _, _ = aml(t, "model", "show", c.NewModelID, "--data", d, "--json")
	if !strings.Contains(out, `"stage": "candidate"`) {
		t.Fatalf("new model:\n%s", out)
	}
	out, _, _ = aml(t, "twin", "calibrate", "list", "--data", d)
	if !strings.Contains(out, "cooldown") || !strings.Contains(out, c.NewModelID) {
		t.Fatalf("list:\n%s", out)
	}
	out, _, _ = aml(t, "twin", "calibrate", "--model", j.ModelID, "--scene", "inj", "--data", d)
	if !strings.Contains(out, "decision    ACTIVE_OR_COOLDOWN") || !strings.Contains(out, "new rows    600") {
		t.Fatalf("text:\n%s", out)
	}
}

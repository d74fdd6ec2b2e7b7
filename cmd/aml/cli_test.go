package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// aml runs the CLI in-process and returns stdout, stderr and exit status.
func aml(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return out.String(), errb.String(), code
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("stdout is not one JSON value: %v\n%s", err, s)
	}
}

func TestSimRunsAndQuery(t *testing.T) {
	d := t.TempDir()
	out, errs, code := aml(t, "sim", "injection", "--runs", "12", "--seed", "7", "--data", d, "--json")
	if code != 0 {
		t.Fatalf("sim: %d %s", code, errs)
	}
	var simRes struct {
		Runs    []string `json:"runs"`
		Samples int      `json:"samples"`
	}
	mustJSON(t, out, &simRes)
	if len(simRes.Runs) != 12 || simRes.Samples < 100_000 {
		t.Fatalf("sim result %+v", simRes)
	}
	out, _, code = aml(t, "runs", "list", "--data", d, "--json")
	var runs []struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	mustJSON(t, out, &runs)
	if code != 0 || len(runs) != 12 {
		t.Fatalf("runs list: %d runs", len(runs))
	}
	for _, r := range runs {
		if r.Status != "ended" {
			t.Fatalf("run %s is %s", r.ID, r.Status)
		}
	}
	out, _, code = aml(t, "ts", "query", "--data", d, "--node", "part_weight", "--run", runs[2].ID, "--json")
	var page struct {
		Points []struct {
			Ts    int64   `json:"tsUs"`
			Value float64 `json:"value"`
			State string  `json:"state"`
		} `json:"points"`
		HasMore bool `json:"hasMore"`
	}
	mustJSON(t, out, &page)
	if code != 0 || len(page.Points) < 1500 || page.HasMore {
		t.Fatalf("ts query: %d points, hasMore %v", len(page.Points), page.HasMore)
	}
	// --limit reports that more exist instead of truncating silently.
	out, _, _ = aml(t, "ts", "query", "--data", d, "--node", "part_weight", "--run", runs[2].ID, "--limit", "10", "--json")
	var lim struct {
		Points      []any `json:"points"`
		HasMore     bool  `json:"hasMore"`
		NextAfterTs int64 `json:"nextAfterTsUs"`
	}
	mustJSON(t, out, &lim)
	if len(lim.Points) != 10 || !lim.HasMore || lim.NextAfterTs == 0 || lim.NextAfterTs != page.Points[9].Ts {
		t.Fatalf("limit: %+v", lim)
	}
	// Same seed again: idempotent, still 12 runs and the same counts.
	aml(t, "sim", "injection", "--runs", "12", "--seed", "7", "--data", d)
	out, _, _ = aml(t, "runs", "show", runs[2].ID, "--data", d, "--json")
	var show struct {
		Segments []any          `json:"contextSegments"`
		Samples  map[string]int `json:"samplesByNode"`
	}
	mustJSON(t, out, &show)
	total := 0
	for _, c := range show.Samples {
		total += c
	}
	if len(show.Segments) != 1 || len(show.Samples) != 10 || total < 15_000 {
		t.Fatalf("runs show: %+v", show)
	}
	out, _, _ = aml(t, "ts", "query", "--data", d, "--node", "part_weight", "--run", runs[2].ID, "--bucket", "1m", "--json")
	var bk struct {
		Buckets []struct{ Count, Bad int } `json:"buckets"`
	}
	mustJSON(t, out, &bk)
	if len(bk.Buckets) != 30 {
		t.Fatalf("%d buckets", len(bk.Buckets))
	}
}

func TestErrorsAndExitCodes(t *testing.T) {
	d := t.TempDir()
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"ts", "query", "--data", d, "--node", "ghost"}, 1, "error: AML_NOT_FOUND: node \"ghost\" not found"},
		{[]string{"ts", "query", "--data", d}, 2, "error: AML_USAGE: --node is required"},
		{[]string{"runs", "list", "--data", d, "--bogus"}, 2, "error: AML_USAGE: unknown flag: --bogus"},
		{[]string{"nosuch", "--data", d}, 2, "error: AML_USAGE: unknown command"},
		{[]string{"runs", "show", "--data", d}, 2, "error: AML_USAGE"},
		{[]string{"runs", "show", "nope", "--data", d}, 1, "error: AML_NOT_FOUND"},
		{[]string{"sim", "injection", "--runs", "0", "--data", d}, 1, "error: AML_INVALID_ARGUMENT: runs must be 1..1000, got 0"},
		{[]string{"ts", "query", "--data", d, "--node", "x", "--from", "yesterday"}, 2, "--from"},
		{[]string{"ingest", "csv", "--data", d, "--line", "L", "--product", "P", "--recipe", "R", "/nonexistent.csv"}, 2, "no such file"},
		{[]string{"ingest", "csv", "--data", d, "x.csv"}, 2, "is required"},
		{[]string{"runs", "list", "--data", d, "--log-level", "loud"}, 2, "--log-level"},
	}
	for _, c := range cases {
		out, errs, code := aml(t, c.args...)
		if code != c.code || !strings.HasPrefix(errs, "error: ") || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d stderr %q; want exit %d containing %q", c.args, code, errs, c.code, c.want)
		}
		if out != "" {
			t.Errorf("%v: stdout not empty on error: %q", c.args, out)
		}
		if c.code == 1 && strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%v: error is not one line: %q", c.args, errs)
		}
	}
}

func shared(t *testing.T, rel string) string {
	p := filepath.Join("..", "..", "..", "shared", "datasets", rel)
	if _, err := os.Stat(p); err != nil {
		t.Skipf("shared datasets folder absent (%s): %v", p, err)
	}
	return p
}

func TestIngestSharedDatasets(t *testing.T) {
	est := shared(t, "cascaded_tanks/cascaded_tanks_estimation.csv")
	val := shared(t, "cascaded_tanks/cascaded_tanks_validation.csv")
	d := t.TempDir()
	out, errs, code := aml(t, "ingest", "csv", est, val, "--data", d, "--line", "tanks", "--product", "water", "--recipe", "multisine",
		"--time-col", "time_s", "--time-unit", "s", "--ignore-col", "k", "--unit", "u_V=V", "--unit", "y_V=V", "--sequential", "--json")
	if code != 0 {
		t.Fatalf("ingest tanks: %s", errs)
	}
	var res struct {
		Samples int `json:"samples"`
	}
	mustJSON(t, out, &res)
	if res.Samples != 4096 {
		t.Fatalf("tanks samples %d", res.Samples)
	}
	out, _, _ = aml(t, "runs", "list", "--data", d, "--json")
	var runs []struct {
		ID      string `json:"id"`
		Started int64  `json:"startedAtMs"`
		Ended   int64  `json:"endedAtMs"`
	}
	mustJSON(t, out, &runs)
	// Both records start at t=0 s; --sequential places the validation
	// record one hour after the estimation record ends.
	if len(runs) != 2 || runs[0].Started != 0 || runs[0].Ended != 4092000 || runs[1].Started != 4092000+3600000 || runs[1].Ended != 2*4092000+3600000 {
		t.Fatalf("tanks runs %+v", runs)
	}
	out, _, _ = aml(t, "nodes", "list", "--data", d, "--json")
	var nodes []struct{ ID, Unit string }
	mustJSON(t, out, &nodes)
	if len(nodes) != 2 || nodes[0].Unit != "V" {
		t.Fatalf("nodes %+v", nodes)
	}
	out, _, _ = aml(t, "ts", "query", "--data", d, "--node", "y_V", "--run", "cascaded_tanks_validation", "--json")
	var page struct {
		Points []struct {
			Ts    int64 `json:"tsUs"`
			Value float64
		} `json:"points"`
	}
	mustJSON(t, out, &page)
	if len(page.Points) != 1024 || page.Points[1].Ts-page.Points[0].Ts != 4_000_000 || page.Points[0].Value != 4.9728 {
		t.Fatalf("tanks y_V: %d points, first %+v", len(page.Points), page.Points[:2])
	}
	// The estimation record is intact (no overwrite by the second file).
	out, _, _ = aml(t, "ts", "query", "--data", d, "--node", "y_V", "--run", "cascaded_tanks_estimation", "--json")
	mustJSON(t, out, &page)
	if len(page.Points) != 1024 || page.Points[0].Value != 5.205 {
		t.Fatalf("estimation y_V: %d points, first %+v", len(page.Points), page.Points[:1])
	}
	// Without --sequential the second file would land on the same instants:
	// refused, nothing overwritten.
	d2 := t.TempDir()
	_, errs, code = aml(t, "ingest", "csv", est, val, "--data", d2, "--line", "tanks", "--product", "water", "--recipe", "multisine", "--time-col", "time_s", "--ignore-col", "k")
	if code != 1 || !strings.Contains(errs, "AML_CONFLICT") || !strings.Contains(errs, "--start") {
		t.Fatalf("overlapping runs: %d %q", code, errs)
	}

	wind := shared(t, "daisy_winding/winding.csv")
	out, errs, code = aml(t, "ingest", "csv", wind, "--data", d, "--line", "winding", "--product", "web", "--recipe", "daisy", "--run", "winding-1", "--period", "100ms", "--json")
	if code != 0 {
		t.Fatalf("ingest winding: %s", errs)
	}
	mustJSON(t, out, &res)
	if res.Samples != 2500*7 {
		t.Fatalf("winding samples %d", res.Samples)
	}
	out, _, _ = aml(t, "runs", "show", "winding-1", "--data", d, "--json")
	var show struct {
		Ended   int64            `json:"endedAtMs"`
		Samples map[string]int64 `json:"samplesByNode"`
	}
	mustJSON(t, out, &show)
	if show.Ended != 249_900 || len(show.Samples) != 7 || show.Samples["y1_T1_tension_reel1_2"] != 2500 {
		t.Fatalf("winding run %+v", show)
	}
}

func TestIngestBadFileWritesNothing(t *testing.T) {
	d := t.TempDir()
	good := filepath.Join(d, "good.csv")
	bad := filepath.Join(d, "bad.csv")
	if err := os.WriteFile(good, []byte("time,a,b\n1000,1,2\n2000,3,4\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("time,a,b\n1000,1,2\n2000,x,4\n3000,5,6\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, errs, code := aml(t, "ingest", "csv", good, bad, "--data", d, "--line", "L", "--product", "P", "--recipe", "R", "--time-unit", "ms")
	if code != 1 || !strings.Contains(errs, "error: AML_INGEST_INVALID: ") || !strings.Contains(errs, "bad.csv:3") {
		t.Fatalf("exit %d stderr %q", code, errs)
	}
	out, _, _ := aml(t, "runs", "list", "--data", d, "--json")
	var runs []struct{ ID string }
	mustJSON(t, out, &runs)
	if len(runs) != 1 || runs[0].ID != "good" {
		t.Fatalf("runs after failed file: %+v", runs)
	}
	out, _, code = aml(t, "ingest", "csv", bad, "--data", d, "--line", "L", "--product", "P", "--recipe", "R", "--skip-bad", "--json")
	var res struct {
		Files []struct {
			Skipped int `json:"skipped"`
			Samples int `json:"samples"`
		} `json:"files"`
	}
	mustJSON(t, out, &res)
	if code != 0 || res.Files[0].Skipped != 1 || res.Files[0].Samples != 4 {
		t.Fatalf("skip-bad: %+v", res)
	}
}

// TestBinaryNoProgressWhenPiped runs the real binary with stdout piped: the
// output must be exactly one JSON document and stderr must hold no progress bar.
func TestBinaryNoProgressWhenPiped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped in -short mode")
	}
	bin := filepath.Join(t.TempDir(), "aml")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	d := t.TempDir()
	cmd := exec.Command(bin, "sim", "injection", "--runs", "2", "--seed", "3", "--json")
	cmd.Env = append(os.Environ(), "AML_DATA="+d)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v: %s", err, errb.String())
	}
	var v map[string]any
	mustJSON(t, out.String(), &v)
	if errb.Len() != 0 {
		t.Fatalf("stderr not empty: %q", errb.String())
	}
	cmd = exec.Command(bin, "runs", "show", "nope", "--data", d)
	cmd.Stderr = &errb
	errb.Reset()
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.HasPrefix(errb.String(), "error: AML_NOT_FOUND: ") {
		t.Fatalf("exit %v stderr %q", err, errb.String())
	}
}

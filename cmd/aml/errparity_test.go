package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/api"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// headerRT adds the bearer token to every request of the MCP client.
type headerRT struct {
	token string
	next  http.RoundTripper
}

func (h headerRT) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+h.token)
	return h.next.RoundTrip(r)
}

// TestSameErrorEverySurface gives the same bad input to the CLI (on the
// data dir itself and with --server), the HTTP API and the MCP tools, and
// checks that every surface answers with the same error code: the rule is
// the op's, written once in internal/app.
func TestSameErrorEverySurface(t *testing.T) {
	d := simDir(t)
	srv := startServer(t, d, api.Options{})
	ctx := context.Background()
	// A token scoped to another line, for the scope refusals.
	_, scoped, err := auth.NewTokens(srv.st.SQL()).Create(ctx, "test", auth.NewToken{Name: "otto", Role: auth.RoleEngineer, Lines: []string{"line-other"}})
	if err != nil {
		t.Fatal(err)
	}
	srv.tok["scoped"] = scoped
	badSpec := filepath.Join(t.TempDir(), "bad-spec.json")
	if err := os.WriteFile(badSpec, []byte(`{"lineId":"line-injection-01","productId":"p","recipeId":"r","nodes":[],"beatMs":0,"historySteps":1,"horizonSteps":1,"purpose":"mpc_surrogate"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var spec, good map[string]any
	b, _ := os.ReadFile(badSpec)
	_ = json.Unmarshal(b, &spec)
	goodSpec := filepath.Join(d, "spec.json")
	b, _ = os.ReadFile(goodSpec)
	_ = json.Unmarshal(b, &good)

	sessions := map[string]*sdk.ClientSession{}
	mcpFor := func(role string) *sdk.ClientSession {
		if cs, ok := sessions[role]; ok {
			return cs
		}
		hc := &http.Client{Transport: headerRT{token: srv.tok[role], next: http.DefaultTransport}}
		c := sdk.NewClient(&sdk.Implementation{Name: "aml-parity", Version: "1"}, nil)
		cs, err := c.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: srv.url + "/mcp", HTTPClient: hc, DisableStandaloneSSE: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		sessions[role] = cs
		return cs
	}

	type surface struct {
		method, path string
		body         any
	}
	cases := []struct {
		name, role, code string
		local            bool // also on the data dir itself (an admin there)
		cli              []string
		api              surface
		tool             string
		args             map[string]any
	}{
		{"unknown job", "viewer", "AML_NOT_FOUND", true, []string{"job", "status", "no-such-job"},
			surface{"GET", "/jobs/no-such-job", nil}, "aml_job_status", map[string]any{"id": "no-such-job"}},
		{"log of an unknown job", "viewer", "AML_NOT_FOUND", true, []string{"job", "logs", "no-such-job"},
			surface{"GET", "/jobs/no-such-job/logs", nil}, "aml_job_logs", map[string]any{"id": "no-such-job"}},
		{"cancel an unknown job", "engineer", "AML_NOT_FOUND", true, []string{"job", "cancel", "no-such-job"},
			surface{"POST", "/jobs/no-such-job/cancel", nil}, "aml_job_cancel", map[string]any{"id": "no-such-job"}},
		{"train on an unknown dataset", "engineer", "AML_NOT_FOUND", true, []string{"job", "submit", "--dataset", "no-such-ds", "--trainer", "linear_state_space@1"},
			surface{"POST", "/jobs", map[string]any{"datasetId": "no-such-ds", "trainer": "linear_state_space@1"}}, "aml_job_submit", map[string]any{"datasetId": "no-such-ds", "trainer": "linear_state_space@1"}},
		{"report of an unknown dataset", "viewer", "AML_NOT_FOUND", true, []string{"dataset", "report", "no-such-ds"},
			surface{"GET", "/datasets/no-such-ds/report", nil}, "aml_dataset_stats", map[string]any{"id": "no-such-ds"}},
		{"a spec the dataset rules refuse", "engineer", "AML_SPEC_INVALID", true, []string{"dataset", "build", "--spec", badSpec},
			surface{"POST", "/datasets", map[string]any{"spec": spec}}, "aml_dataset_build", map[string]any{"spec": spec}},
		{"unknown scene", "viewer", "AML_NOT_FOUND", true, []string{"twin", "scene", "show", "no-such-scene"},
			surface{"GET", "/scenes/no-such-scene", nil}, "twin_scene_read", map[string]any{"id": "no-such-scene"}},
		{"snapshot of an unknown scene", "engineer", "AML_NOT_FOUND", true, []string{"twin", "snapshot", "take", "--scene", "no-such-scene"},
			surface{"POST", "/snapshots", map[string]any{"scene": "no-such-scene"}}, "twin_snapshot_create", map[string]any{"scene": "no-such-scene"}},
		{"trial of an unknown model", "engineer", "AML_NOT_FOUND", true, []string{"twin", "trial", "--model", "no-such-model", "--snapshot", "no-such-snap", "--set", "hold_pressure=1"},
			surface{"POST", "/trials", map[string]any{"model": "no-such-model", "snapshot": "no-such-snap", "set": map[string]any{"hold_pressure": 1}}},
			"twin_trial_run", map[string]any{"model": "no-such-model", "snapshot": "no-such-snap", "set": map[string]any{"hold_pressure": 1}}},
		{"optimise an unknown model", "engineer", "AML_NOT_FOUND", true, []string{"twin", "optimize", "--model", "no-such-model", "--snapshot", "no-such-snap"},
			surface{"POST", "/optimize", map[string]any{"model": "no-such-model", "snapshot": "no-such-snap"}}, "mpc_optimize", map[string]any{"model": "no-such-model", "snapshot": "no-such-snap"}},
		{"gate of an unknown model", "engineer", "AML_NOT_FOUND", true, []string{"twin", "gate", "--model", "no-such-model", "--scene", "no-such-scene"},
			surface{"POST", "/gate", map[string]any{"model": "no-such-model", "scene": "no-such-scene"}}, "twin_gate_evaluate", map[string]any{"model": "no-such-model", "scene": "no-such-scene"}},
		{"recalibrate an unknown model", "engineer", "AML_NOT_FOUND", true, []string{"twin", "calibrate", "--model", "no-such-model"},
			surface{"POST", "/calibrate", map[string]any{"model": "no-such-model"}}, "twin_calibration_request", map[string]any{"model": "no-such-model"}},
		{"certify an unknown trial", "engineer", "AML_NOT_FOUND", true, []string{"cert", "issue", "--trial", "no-such-trial", "--as", "erin"},
			surface{"POST", "/certificates", map[string]any{"trial": "no-such-trial"}}, "twin_certificate_request", map[string]any{"trial": "no-such-trial"}},
		{"nodes of a line out of scope", "scoped", "AML_FORBIDDEN", false, []string{"nodes", "list", "--line", "line-injection-01"},
			surface{"GET", "/nodes?line=line-injection-01", nil}, "aml_node_catalog", map[string]any{"line": "line-injection-01"}},
		{"leaderboard of a line out of scope", "scoped", "AML_FORBIDDEN", false, nil,
			surface{}, "aml_leaderboard", map[string]any{"line": "line-injection-01"}},
		{"scenes of a line out of scope", "scoped", "AML_FORBIDDEN", false, []string{"twin", "scene", "list", "--line", "line-injection-01"},
			surface{"GET", "/scenes?line=line-injection-01", nil}, "twin_scene_list", map[string]any{"line": "line-injection-01"}},
		{"a viewer submits a job", "viewer", "AML_FORBIDDEN", false, []string{"job", "submit", "--dataset", "ds", "--trainer", "linear_state_space@1"},
			surface{"POST", "/jobs", map[string]any{"datasetId": "ds", "trainer": "linear_state_space@1"}}, "aml_job_submit", map[string]any{"datasetId": "ds", "trainer": "linear_state_space@1"}},
		{"a viewer builds a dataset", "viewer", "AML_FORBIDDEN", false, []string{"dataset", "build", "--spec", goodSpec},
			surface{"POST", "/datasets", map[string]any{"spec": good}}, "aml_dataset_build", map[string]any{"spec": good}},
		{"a viewer takes a snapshot", "viewer", "AML_FORBIDDEN", false, []string{"twin", "snapshot", "take", "--scene", "s"},
			surface{"POST", "/snapshots", map[string]any{"scene": "s"}}, "twin_snapshot_create", map[string]any{"scene": "s"}},
		{"a viewer optimises", "viewer", "AML_FORBIDDEN", false, []string{"twin", "optimize", "--model", "m", "--snapshot", "s"},
			surface{"POST", "/optimize", map[string]any{"model": "m", "snapshot": "s"}}, "mpc_optimize", map[string]any{"model": "m", "snapshot": "s"}},
		{"an agent approves", "agent", "AML_FORBIDDEN", false, []string{"cert", "approve", "rec-x"},
			surface{"POST", "/certificates/rec-x/approve", nil}, "", nil},
		{"an agent executes", "agent", "AML_FORBIDDEN", false, []string{"cert", "execute", "rec-x"},
			surface{"POST", "/certificates/rec-x/execute", nil}, "", nil},
		{"an engineer creates a token", "engineer", "AML_FORBIDDEN", false, []string{"token", "create", "--name", "x", "--role", "viewer"},
			surface{"POST", "/tokens", map[string]any{"name": "x", "role": "viewer"}}, "", nil},
		{"unknown run", "viewer", "AML_NOT_FOUND", true, []string{"runs", "show", "no-such-run"},
			surface{"GET", "/runs/no-such-run", nil}, "", nil},
		{"unknown model", "viewer", "AML_NOT_FOUND", true, []string{"model", "show", "no-such-model"},
			surface{"GET", "/models/no-such-model", nil}, "aml_model_reference", map[string]any{"id": "no-such-model"}},
		{"unknown certificate", "viewer", "AML_NOT_FOUND", true, []string{"cert", "show", "no-such-cert"},
			surface{"GET", "/certificates/no-such-cert", nil}, "", nil},
		{"samples of an unknown node", "viewer", "AML_NOT_FOUND", true, []string{"ts", "query", "--node", "no-such-node"},
			surface{"GET", "/ts?node=no-such-node", nil}, "", nil},
		{"delete an unknown dataset", "engineer", "AML_NOT_FOUND", true, []string{"dataset", "delete", "no-such-ds"},
			surface{"DELETE", "/datasets/no-such-ds", nil}, "", nil},
	}
	withMCP := 0
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.cli != nil {
				_, errs, code := srv.as(t, c.role, c.cli...)
				if code != 1 || !strings.HasPrefix(errs, "error: "+c.code+":") {
					t.Errorf("CLI --server: exit %d %q, want exit 1 with %s", code, errs, c.code)
				}
				if c.local {
					_, errs, code := aml(t, append(append([]string{}, c.cli...), "--data", d)...)
					if code != 1 || !strings.HasPrefix(errs, "error: "+c.code+":") {
						t.Errorf("CLI on the data dir: exit %d %q, want exit 1 with %s", code, errs, c.code)
					}
				}
			}
			if c.api.method != "" {
				var body io.Reader
				if c.api.body != nil {
					b, _ := json.Marshal(c.api.body)
					body = bytes.NewReader(b)
				}
				req, _ := http.NewRequest(c.api.method, srv.url+api.Prefix+c.api.path, body)
				req.Header.Set("Authorization", "Bearer "+srv.tok[c.role])
				res, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				var eb auth.ErrorBody
				_ = json.NewDecoder(res.Body).Decode(&eb)
				_ = res.Body.Close()
				if eb.Code != c.code || res.StatusCode != auth.HTTPStatus(core.KindOfCode(eb.Code)) {
					t.Errorf("API: %d %+v, want %s", res.StatusCode, eb, c.code)
				}
			}
			if c.tool != "" {
				res, err := mcpFor(c.role).CallTool(ctx, &sdk.CallToolParams{Name: c.tool, Arguments: c.args})
				if err != nil {
					t.Fatal(err)
				}
				b, _ := json.Marshal(res.StructuredContent)
				var te struct {
					Code string `json:"code"`
				}
				_ = json.Unmarshal(b, &te)
				if !res.IsError || te.Code != c.code {
					t.Errorf("MCP %s: error %v %s, want %s", c.tool, res.IsError, b, c.code)
				}
			}
		})
		if c.tool != "" && c.cli != nil && c.api.method != "" {
			withMCP++
		}
	}
	if withMCP < 20 {
		t.Errorf("only %d cases run on all three surfaces", withMCP)
	}
}

package app_test

import (
	"context"
	"testing"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/service"
	"github.com/aml-project/aml/internal/testfix"
)

// The comparison ops on an empty store: validation, role and line scope.
// Their results on a trained model are checked through the MCP tools
// (internal/mcp TestHTTP: aml_leaderboard, aml_model_reference).
func TestCompareOps(t *testing.T) {
	st, dir := testfix.SQLite(t)
	a := app.New(&service.Deps{Store: st, DataDir: dir}, app.Options{})
	ctx := context.Background()
	viewer := auth.Principal{Name: "v", Role: auth.RoleViewer}
	scoped := auth.Principal{Name: "agent", Role: auth.RoleAgent, Lines: []string{"line-a"}}

	for _, op := range []string{"model.compare", "model.reference"} {
		o, ok := app.Lookup(op)
		if !ok || o.Act != auth.ActRead {
			t.Fatalf("op %s: %v", op, o)
		}
	}
	if o, _ := app.Lookup("model.reference"); !o.Heavy {
		t.Error("model.reference predicts: it must take a heavy slot")
	}

	res, err := a.ModelCompare(ctx, viewer, app.ModelCompareRequest{})
	if err != nil || res.Total != 0 || res.Entries == nil || res.RankedBy != app.RankedBy {
		t.Fatalf("empty leaderboard: %+v %v", res, err)
	}
	for _, c := range []struct {
		p     auth.Principal
		req   app.ModelCompareRequest
		code  string
		field string
	}{
		{viewer, app.ModelCompareRequest{Limit: app.MaxCompareLimit + 1}, core.CodeInvalidArgument, "limit"},
		{viewer, app.ModelCompareRequest{Limit: -1}, core.CodeInvalidArgument, "limit"},
		{scoped, app.ModelCompareRequest{Line: "line-b"}, core.CodeForbidden, "lineId"},
		{auth.Principal{Name: "x", Role: "nobody"}, app.ModelCompareRequest{}, core.CodeForbidden, "role"},
	} {
		_, err := a.ModelCompare(ctx, c.p, c.req)
		if ae, ok := err.(*core.Error); !ok || ae.Code != c.code || ae.Field != c.field {
			t.Errorf("compare %+v as %s: %v, want %s on %s", c.req, c.p.Role, err, c.code, c.field)
		}
	}

	for _, c := range []struct {
		p     auth.Principal
		req   app.ModelReferenceRequest
		code  string
		field string
	}{
		{viewer, app.ModelReferenceRequest{}, core.CodeInvalidArgument, "id"},
		{viewer, app.ModelReferenceRequest{Line: "line-a", Product: "p"}, core.CodeInvalidArgument, "id"},
		{viewer, app.ModelReferenceRequest{ID: "m", Steps: -1}, core.CodeInvalidArgument, "steps"},
		{scoped, app.ModelReferenceRequest{Line: "line-b", Product: "p", Recipe: "r"}, core.CodeForbidden, "lineId"},
		{scoped, app.ModelReferenceRequest{Line: "line-a", Product: "p", Recipe: "r"}, core.CodeNotFound, "id"},
		{viewer, app.ModelReferenceRequest{ID: "no-such-model"}, core.CodeNotFound, ""},
	} {
		_, err := a.ModelReference(ctx, c.p, c.req)
		if ae, ok := err.(*core.Error); !ok || ae.Code != c.code || (c.field != "" && ae.Field != c.field) {
			t.Errorf("reference %+v as %s: %v, want %s on %s", c.req, c.p.Name, err, c.code, c.field)
		}
	}
}

// The published gate profiles are listable: every dataset purpose names
// its model gate, and the twin gates carry their thresholds.
func TestGateProfiles(t *testing.T) {
	st, dir := testfix.SQLite(t)
	a := app.New(&service.Deps{Store: st, DataDir: dir}, app.Options{})
	r, err := a.GateProfiles(context.Background(), auth.Principal{Name: "v", Role: auth.RoleViewer}, app.GateProfilesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Models) < 3 || r.ByPurpose["mpc_surrogate"] != "upstream-mpc-v2" || len(r.Twin) < 2 {
		t.Fatalf("profiles %+v", r)
	}
	for _, p := range r.Models {
		if len(p.Rules) == 0 {
			t.Errorf("profile %s has no rules", p.ID)
		}
	}
}

package app

import (
	"context"
	"testing"
)

// TestInfoHidesServerPathsFromNonAdmins: the data directory and the
// database location are the server's file system and connection; a viewer,
// engineer, approver or agent (possibly scoped to one line) learns the
// schema version, build and itself, not where the server keeps its data.
func TestInfoHidesServerPathsFromNonAdmins(t *testing.T) {
	a := newApp(t, Options{})
	ctx := context.Background()
	got, err := a.Info(ctx, admin, InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if got.DataDir == "" || got.Database == "" {
		t.Fatalf("admin: %+v, want the data directory and database", got)
	}
	for _, p := range []Principal{viewer, engineer, agent} {
		got, err := a.Info(ctx, p, InfoRequest{})
		if err != nil {
			t.Fatalf("%s: %v", p.Role, err)
		}
		if got.DataDir != "" || got.Database != "" {
			t.Errorf("%s sees the server's paths: dataDir %q, database %q", p.Role, got.DataDir, got.Database)
		}
		if got.SchemaVersion == 0 || got.Principal.Name != p.Name {
			t.Errorf("%s: %+v, want the schema version and the caller", p.Role, got)
		}
	}
}

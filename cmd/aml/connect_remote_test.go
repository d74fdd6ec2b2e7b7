package main

import (
	"context"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/api"
	"github.com/aml-project/aml/internal/connect"
)

// aml connect status --server reads the same rows as locally.
func TestConnectStatusRemote(t *testing.T) {
	d := t.TempDir()
	// The server lists the row at the instant it was written: fresh.
	at := time.Date(2026, 4, 5, 6, 7, 8, 0, time.UTC)
	s := startServer(t, d, api.Options{Now: func() time.Time { return at }})
	row := connect.Status{ID: "opcua:opc.tcp://x:4840", Line: "line-injection-01", Kind: connect.KindOPCUA, Endpoint: "opc.tcp://x:4840",
		State: connect.StateConnected, Received: 12, Stored: 12, IntervalMs: 2000, UpdatedAt: at}
	if err := statusStore(s.st).Put(context.Background(), row); err != nil {
		t.Fatal(err)
	}
	out, errs, code := s.as(t, "viewer", "connect", "status", "--json")
	if code != 0 {
		t.Fatalf("remote: %d %s", code, errs)
	}
	var remote []connect.Status
	mustJSON(t, out, &remote)
	if len(remote) != 1 || remote[0].ID != row.ID || remote[0].Stored != 12 || remote[0].State != connect.StateConnected || remote[0].Stale {
		t.Fatalf("remote rows: %+v", remote)
	}
	out, errs, code = s.as(t, "viewer", "connect", "status", "--line", "another-line", "--json")
	if code != 0 {
		t.Fatalf("remote --line: %d %s", code, errs)
	}
	mustJSON(t, out, &remote)
	if len(remote) != 0 {
		t.Fatalf("rows of another line: %+v", remote)
	}
}

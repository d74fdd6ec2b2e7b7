package main

// aml cert execute --opcua-endpoint URL --map FILE: the governed write over
// OPC UA instead of the recording writer.

import (
	"context"
	"os"

	"github.com/aml-project/aml/internal/connect/opcua"
	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/govern"
)

// certOPCUA are the execute command's OPC UA flags.
type certOPCUA struct {
	endpoint, mapFile, passwordEnv string
	sec                            opcua.Security
}

func (o certOPCUA) set() bool { return o.endpoint != "" || o.mapFile != "" }

// execute dials the line's server with the map's nodes (the same map
// file aml connect opcua reads: AML node → OPC UA node) and runs the
// guard with the OPC UA writer: each move is read (it must hold the
// certified From), written, and read back; a readback that differs raises
// the write.alarm and stops the remaining moves.
func (o certOPCUA) execute(ctx context.Context, s store.Store, k *cert.KeyPair, id string, opts govern.Options) (govern.Result, error) {
	if o.endpoint == "" || o.mapFile == "" {
		return govern.Result{}, usagef("--opcua-endpoint and --map go together")
	}
	raw, err := os.ReadFile(o.mapFile)
	if err != nil {
		return govern.Result{}, usagef("--map: %v", err)
	}
	m, err := opcua.ParseMap(raw)
	if err != nil {
		return govern.Result{}, err
	}
	if o.passwordEnv != "" {
		o.sec.Password = os.Getenv(o.passwordEnv)
	}
	w, err := opcua.DialWriter(ctx, o.endpoint, m, o.sec)
	if err != nil {
		return govern.Result{}, err
	}
	defer func() { _ = w.Close() }() // every write is read back before it counts: closing loses nothing
	return govern.ExecuteGoverned(ctx, s, k.Public, id, w, opts, nil)
}

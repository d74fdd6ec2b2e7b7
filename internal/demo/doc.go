// Package demo is AML's main job end to end on a fresh store — the scenario
// behind `aml demo`: simulate the injection-moulding line, build the
// dataset, train the hybrid twin, freeze the scene, collect shadow
// evidence, evaluate the twin gate (recalibrating once when it fails on the
// shadow evidence), snapshot, optimise, certify, approve as another person
// and write through the guard — offline with a recording writer, or on a
// live line served over OPC UA and ingested by the OPC UA connector.
//
// It is a sequence of application calls (internal/app) made by three
// people (Engineer, Approver, Operator) on the demo's own clock, the
// simulated line's (Anchor: 06:00 UTC on the latest day that lets the whole
// demo end an hour before now, so its figures do not depend on the hour it
// runs). Only simulating the line and running the training job in this
// process are the demo's own; every step is stored and audited, so the
// usual commands work on the data directory afterwards. The governed
// write is recorded in the write history at the wall clock (Options.Now),
// never at the demo's own clock, so no entry of the history is dated
// after the wall clock and later real writes are not held back by it.
package demo

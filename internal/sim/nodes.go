package sim

import (
	"time"

	"github.com/aml-project/aml/internal/core"
)

// Node IDs of the simulated injection-moulding line.
const (
	// Controls (kind dcw): logged at every step, always state ok.
	NodeHoldPressure            = "hold_pressure"
	NodeHoldTime                = "hold_time"
	NodeMeltTemperatureSetpoint = "melt_temperature_setpoint"
	// Measured states (kind daq).
	NodeMeltTemperature = "melt_temperature"
	NodeCavityPressure  = "cavity_pressure"
	// Measured disturbances (kind daq).
	NodeAmbientTemperature  = "ambient_temperature"
	NodeMaterialBatchFactor = "material_batch_factor"
	// Quality observations (kind daq).
	NodePartWeight = "part_weight"
	NodeFlashRate  = "flash_rate"
	NodeSinkRate   = "sink_rate"
)

// Node roles in the process model.
const (
	RoleControl     = "control"
	RoleState       = "state"
	RoleDisturbance = "disturbance"
	RoleObservation = "observation"
)

// signalSpec describes one node: its descriptive fields, its role and the
// standard deviation of its gaussian sensor noise (0 for controls).
type signalSpec struct {
	id, unit, kind, role, meaning string
	min, max                      float64
	noiseSD                       float64
	// nonNegative clamps measured values (noise included) at 0.
	nonNegative bool
}

// signals lists every node in node-ID byte order, which is the order samples
// of one timestamp are emitted in.
var signals = [...]signalSpec{
	{id: NodeAmbientTemperature, unit: "degC", kind: core.NodeDAQ, role: RoleDisturbance, min: 10, max: 40, noiseSD: 0.1,
		meaning: "Air temperature in the moulding hall next to the machine; slowly varying disturbance (daily cycle plus weather)."},
	{id: NodeCavityPressure, unit: "bar", kind: core.NodeDAQ, role: RoleState, min: 0, max: 150, noiseSD: 0.5,
		meaning: "Cycle-averaged pressure measured by the sensor in the mould cavity during the hold phase; follows the hold-pressure setpoint with a first-order lag."},
	{id: NodeFlashRate, unit: "%", kind: core.NodeDAQ, role: RoleObservation, min: 0, max: 20, noiseSD: 0.02, nonNegative: true,
		meaning: "Share of parts rejected for flash (excess material squeezed out at the parting line), from the vision inspection; rises when cavity pressure is too high."},
	{id: NodeHoldPressure, unit: "bar", kind: core.NodeDCW, role: RoleControl, min: 50, max: 90,
		meaning: "Hold (packing) pressure setpoint applied after injection to pack the cavity while the part cools."},
	{id: NodeHoldTime, unit: "s", kind: core.NodeDCW, role: RoleControl, min: 4, max: 14,
		meaning: "Hold (packing) time setpoint: how long the hold pressure is kept on before the gate freezes and screw recovery starts."},
	{id: NodeMaterialBatchFactor, unit: "ratio", kind: core.NodeDAQ, role: RoleDisturbance, min: 0.8, max: 1.2, noiseSD: 0.002,
		meaning: "Relative melt density/viscosity of the current resin batch from the incoming-goods lab test, 1 = reference batch; changes between runs and occasionally within one."},
	{id: NodeMeltTemperature, unit: "degC", kind: core.NodeDAQ, role: RoleState, min: 200, max: 300, noiseSD: 0.3,
		meaning: "Melt temperature measured by the thermocouple at the nozzle; follows the barrel setpoint with a slow first-order lag."},
	{id: NodeMeltTemperatureSetpoint, unit: "degC", kind: core.NodeDCW, role: RoleControl, min: 235, max: 260,
		meaning: "Melt (barrel zone) temperature setpoint of the heater controller."},
	{id: NodePartWeight, unit: "g", kind: core.NodeDAQ, role: RoleObservation, min: 25, max: 40, noiseSD: 0.03,
		meaning: "Weight of the moulded part measured by the inline scale after ejection; the main quality characteristic."},
	{id: NodeSinkRate, unit: "%", kind: core.NodeDAQ, role: RoleObservation, min: 0, max: 20, noiseSD: 0.02, nonNegative: true,
		meaning: "Share of parts rejected for sink marks (surface depressions from shrinkage), from the vision inspection; rises when packing pressure is too low or the melt too hot."},
}

// index of each signal in signals, resolved once.
var (
	idxAmbient  = signalIndex(NodeAmbientTemperature)
	idxPressure = signalIndex(NodeCavityPressure)
	idxFlash    = signalIndex(NodeFlashRate)
	idxHoldP    = signalIndex(NodeHoldPressure)
	idxHoldT    = signalIndex(NodeHoldTime)
	idxBatch    = signalIndex(NodeMaterialBatchFactor)
	idxMelt     = signalIndex(NodeMeltTemperature)
	idxMeltSP   = signalIndex(NodeMeltTemperatureSetpoint)
	idxWeight   = signalIndex(NodePartWeight)
	idxSink     = signalIndex(NodeSinkRate)
)

func signalIndex(id string) int {
	for i, s := range signals {
		if s.id == id {
			return i
		}
	}
	panic("sim: unknown signal " + id)
}

// InjectionNodes returns the ten nodes of the simulated line, sorted by ID,
// with Min/Max set to the physically plausible (controls: recipe) range.
func InjectionNodes(lineID string, createdAt time.Time) []core.Node {
	nodes := make([]core.Node, len(signals))
	for i, s := range signals {
		lo, hi := s.min, s.max
		nodes[i] = core.Node{
			ID: s.id, LineID: lineID, Unit: s.unit, Min: &lo, Max: &hi,
			Kind: s.kind, Meaning: s.meaning, CreatedAt: createdAt,
		}
	}
	return nodes
}

// NodesByRole returns the node IDs of one role (RoleControl, RoleState,
// RoleDisturbance, RoleObservation) in ID order. The unmeasured state
// fill_fraction is not a node and is not listed.
func NodesByRole(role string) []string {
	var ids []string
	for _, s := range signals {
		if s.role == role {
			ids = append(ids, s.id)
		}
	}
	return ids
}

// SensorNoiseSD returns the standard deviation of the gaussian sensor noise
// on each measured node, in the node's unit.
func SensorNoiseSD() map[string]float64 {
	m := make(map[string]float64)
	for _, s := range signals {
		if s.kind == core.NodeDAQ {
			m[s.id] = s.noiseSD
		}
	}
	return m
}

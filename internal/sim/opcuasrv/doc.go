// Package opcuasrv runs the simulated injection-moulding line (package sim)
// — or, with Options.Kind KindTank, the plant's tank line — live, as an
// OPC UA server, so AML's connectors, governed writer and the
// whole twin loop can be exercised against a real protocol stack on
// 127.0.0.1 without a machine.
//
// # The line
//
// [Start] creates a [Server]: a line that advances sim.TruePlant by one
// physics step (Options.StepMs of simulated time, default 1 s) every
// StepMs/Speed of wall time (Speed 10 runs a 1 s step every 100 ms).
// The line has its own clock (Options.StartMs, default the wall clock at
// Start) that advances exactly StepMs per step, so the samples' source
// timestamps are the simulated instants, evenly spaced whatever the
// scheduling jitter; a client compares them with [Server.Now], not with
// the wall clock.
//
// Between steps the controls hold the setpoints last written. A write to
// hold_pressure, hold_time or melt_temperature_setpoint takes effect at the
// next step, as the physics says: cavity pressure and melt temperature
// follow with their time constants, part weight follows them. Ambient
// temperature is a slow mean-reverting random walk, the material batch
// factor is drawn per run, the mould-wear bias on part weight grows with
// the line's run count (Options.WearRuns is the line's age in runs), and
// measured nodes carry the same gaussian sensor noise and resolution as
// the offline simulator (sim.SensorNoiseSD). Impairments (bad states,
// dropouts, gaps) are not simulated here: a live connector's own losses
// (reconnects) are what the live path must show.
//
// Runs: the line runs RunSteps steps per run; the tag run_id holds the
// active run's id (sim.RunID of the recipe and the run number, continuing
// from Options.FirstRun) and is empty during the IdleSteps between runs;
// the tag cycle counts steps since Start (the shot counter).
//
// # Address space
//
// Namespace 1 ("urn:aml:sim:injection") holds a folder "InjectionLine"
// under Objects with one variable per node of the simulated line, string
// node ids "ns=1;s=<node>" (hold_pressure, part_weight, ...), of type
// Double, plus run_id (String) and cycle (UInt32). Measurements are
// read-only (AccessLevel CurrentRead); the three setpoints are read-write
// (CurrentRead|CurrentWrite), or write-only with Options.WriteOnlySetpoints
// (a server that does not let a client read a setpoint back: the governed
// writer then reports transport-ack instead of readback-verified). Each
// numeric variable has the standard properties (HasProperty) EURange
// (Range: the node's plausible or recipe range) and EngineeringUnits
// (EUInformation: the unit's display name). A write of a non-numeric, non
// finite or out-of-range value is refused (BadTypeMismatch,
// BadOutOfRange); a write to a measurement is refused (BadNotWritable).
//
// Every step notifies the server's monitored items of every changed node.
// The server package keeps one value per monitored item between publishes,
// so a client sees every step only if its publishing interval is shorter
// than a step's wall time and it is served in time; [Server.Stats] counts
// the steps so tests can check that nothing was lost.
//
// # History
//
// The server keeps the last Options.HistorySteps steps (default 3600; -1
// none) and answers the OPC UA HistoryRead service with their raw values
// (ReadRawModifiedDetails: each node's values in [StartTime, EndTime) on
// the line's clock, the run tag and cycle counter as they were at each
// step), so a client that lost steps between two publishes reads them
// back (connect/opcua does). Its readable variables then carry the
// HistoryRead bit in AccessLevel and Historizing true.
//
// # The tank line (Options.Kind = KindTank)
//
// The plant's own line (sim.TankLine: the heated, fed tank whose level is
// a first-order-plus-dead-time response to its two setpoints, true
// parameters sim.PlantTruth()) on the same clock, run bookkeeping (run ids
// of recipe "tank-level" on line "tank-line" by default) and manual
// stepping. Namespace 1 ("urn:aml:sim:tank"), folder "TankLine", three
// Double variables with EURange and EngineeringUnits as above — heater_sp
// (degC, 40..60) and feed_sp (l/min, 10..20) read-write, level (cm,
// 30..70) read-only, measured with the tank's own sensor noise — plus
// run_id and cycle. StepMs must be whole seconds (the tank's sampling
// period); Options.Initial setpoints are settled on (ten time constants)
// before the first reported step. A written setpoint acts from the next
// step; the level moves after the input's dead time. WearRuns does not
// apply.
//
// Security: None with anonymous login (what the server package
// implements); the client side's security options are still wired
// (internal/connect/opcua).
package opcuasrv

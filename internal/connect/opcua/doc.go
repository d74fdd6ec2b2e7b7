// Package opcua connects AML to a line's OPC UA server: Connector ingests
// the mapped nodes (aml connect opcua, a map file: OPC UA node → AML
// node); Writer is the governed writer the write guard writes a
// certificate's or a step test's moves through, each read back; and
// LineWriters is a process's registry of those writers, one per line,
// configured by the process's operator (aml serve --line-writers FILE,
// parsed by ParseLineWriters; the CLI's --opcua-endpoint and --map) and
// dialled on first use. No request names an endpoint or a map: the
// application (internal/app, Options.LineWriters) picks the writer by the
// line of what it executes.
package opcua

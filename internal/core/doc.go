// Package core holds AML's domain types, the ports (interfaces) that storage
// back-ends implement, and the typed errors every layer returns.
//
// It imports nothing outside the standard library so that every other package
// can depend on it without cycles: the SQLite and PostgreSQL stores, the CLI,
// the API and the trainers all speak in these types. A newcomer should read
// this package first.
//
// Errors carry a stable upper-case code (AML_SPEC_INVALID, AML_INGEST_INVALID,
// ...), the offending field when there is one, and the HTTP status the API
// maps them to. Callers test for a code with [CodeOf] or errors.As.
package core

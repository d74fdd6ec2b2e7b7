// Package storetest is the conformance suite every storage back-end runs:
// one set of behaviours (metadata rules, sample write/replace/conflict
// semantics, paging, queries, transactions, the job state machine, model
// promotion races) checked against SQLite and PostgreSQL alike, so that
// "the same behaviour on both back-ends" is a test, not a hope.
//
// A back-end's test file calls Run with a Harness that makes an empty store
// per test (and, for the concurrency cases, a second handle on the same
// database — what another process would have). The suite uses only the
// core ports; back-end specific checks (migrations, the on-disk schema,
// partitions) stay in the back-end's own tests.
package storetest

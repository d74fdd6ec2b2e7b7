// Package storetest is the conformance suite every storage back-end runs:
// one set of behaviours (metadata rules, sample write/replace/conflict
// semantics, paging, queries, transactions, the job state machine, model
// promotion races, the read-then-write races of recipe versions, job limits
// and dataset deletion) checked against SQLite and PostgreSQL alike, so
// that "the same behaviour on both back-ends" is a test, not a hope. Most
// of what it checks is one implementation since internal/store/records;
// the races are what the back-ends' dialects (their locks) must get right.
//
// A back-end's test file calls Run with a Harness that makes an empty store
// per test (and, for the concurrency cases, a second handle on the same
// database — what another process would have). The suite uses only the
// core ports and the retention listings every back-end offers; back-end
// specific checks (migrations, the on-disk schema, partitions) stay in the
// back-end's own tests. bench.go holds the record-path benchmarks both
// back-ends run; benchsamples.go the data, batches and timed write loop of
// their sample-path benchmarks.
package storetest

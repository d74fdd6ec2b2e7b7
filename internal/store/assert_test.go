package store_test

import (
	"github.com/aml-project/aml/internal/jobs"
	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/store/postgres"
	"github.com/aml-project/aml/internal/store/sqlite"
)

// Both back-ends are complete stores, and a complete store declares the
// job-queue capability (store.Store lists jobs.QueueHost's method, as the
// store package does not import internal/jobs).
var (
	_ store.Store    = (*sqlite.Store)(nil)
	_ store.Store    = (*postgres.Store)(nil)
	_ jobs.QueueHost = store.Store(nil)
)

package store_test

import (
	"github.com/aml-project/aml/internal/store"
	"github.com/aml-project/aml/internal/store/postgres"
	"github.com/aml-project/aml/internal/store/sqlite"
)

// Both back-ends are complete stores.
var (
	_ store.Store = (*sqlite.Store)(nil)
	_ store.Store = (*postgres.Store)(nil)
)

package twinstore_test

import (
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/guard"
)

// The store is the write guard's channel lookup, write history and
// recorder (the store itself does not import the guard).
var (
	_ guard.Channels = (*twinstore.Store)(nil)
	_ guard.History  = (*twinstore.Store)(nil)
	_ guard.Recorder = (*twinstore.Store)(nil)
)

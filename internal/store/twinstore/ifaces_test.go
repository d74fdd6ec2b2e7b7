package twinstore_test

import (
	"github.com/aml-project/aml/internal/store/twinstore"
	"github.com/aml-project/aml/internal/twin/cert"
	"github.com/aml-project/aml/internal/twin/guard"
)

// The store is the write guard's channel lookup, write history and
// recorder, and issues and registers with the certificate authority's
// key, while importing neither package.
var (
	_ guard.Channels       = (*twinstore.Store)(nil)
	_ guard.History        = (*twinstore.Store)(nil)
	_ guard.Recorder       = (*twinstore.Store)(nil)
	_ twinstore.CertSigner = (*cert.KeyPair)(nil)
)

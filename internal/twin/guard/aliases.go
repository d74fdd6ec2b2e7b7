package guard

import "github.com/aml-project/aml/internal/twin/contract"

// The channel profile and the write record moved to package twin/contract
// (the twin's records live there, so the record store need not import the
// guard). Moved to contract; alias kept while callers move.
type (
	Bound          = contract.Bound
	ChannelProfile = contract.ChannelProfile
	WriteRecord    = contract.WriteRecord
)

// Channel profiles: moved to contract; alias kept while callers move.
const (
	ProfileLegacy     = contract.ProfileLegacy
	ProfileHybridTwin = contract.ProfileHybridTwin
)

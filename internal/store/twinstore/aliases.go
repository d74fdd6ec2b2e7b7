package twinstore

import "github.com/aml-project/aml/internal/twin/contract"

// The twin's records moved to package twin/contract, so that the domain
// packages depend on contract rather than on the store. The names below
// are aliases of contract's (moved to contract; alias kept while callers
// move): identical types and constants, not copies.

// Records and filters: moved to contract; alias kept while callers move.
type (
	CertRecord            = contract.CertRecord
	CertFilter            = contract.CertFilter
	CertListItem          = contract.CertListItem
	TrialRecord           = contract.TrialRecord
	TrialFilter           = contract.TrialFilter
	SnapshotInfo          = contract.SnapshotInfo
	ShadowRecord          = contract.ShadowRecord
	TwinPromotionEvidence = contract.TwinPromotionEvidence
	GateEvalRecord        = contract.GateEvalRecord
	ChannelRecord         = contract.ChannelRecord
	ChannelBound          = contract.ChannelBound
	WriteRow              = contract.WriteRow
	WriteClaimRequest     = contract.WriteClaimRequest
	CalibrationRequest    = contract.CalibrationRequest
)

// Trial purposes: moved to contract; alias kept while callers move.
const (
	TrialManual   = contract.TrialManual
	TrialOptimize = contract.TrialOptimize
	TrialGate     = contract.TrialGate
	TrialDemo     = contract.TrialDemo
)

// Write history outcomes: moved to contract; alias kept while callers
// move.
const (
	WriteClaim     = contract.WriteClaim
	WriteAttempted = contract.WriteAttempted
)

// Recalibration request states: moved to contract; alias kept while
// callers move.
const (
	CalibrationQueued   = contract.CalibrationQueued
	CalibrationRunning  = contract.CalibrationRunning
	CalibrationCooldown = contract.CalibrationCooldown
	CalibrationDone     = contract.CalibrationDone
	CalibrationFailed   = contract.CalibrationFailed
)

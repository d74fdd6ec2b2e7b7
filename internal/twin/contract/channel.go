package contract

import "time"

// Channel profiles (upstream channel-profile.ts): a line's channel is
// legacy (no twin writes) or hybrid_twin.
const (
	ProfileLegacy     = "legacy"
	ProfileHybridTwin = "hybrid_twin"
)

// Bound is an absolute range [Min, Max] for one control.
type Bound struct{ Min, Max float64 }

// ChannelProfile is the twin profile of a line's channel, as the write
// guard (package twin/guard) checks it.
type ChannelProfile struct {
	ChannelID, LineID string
	// Profile is legacy or hybrid_twin.
	Profile string
	// ControlPolicy is recommendation_only, hitl_governed or bounded_auto
	// (Policy*).
	ControlPolicy string
	// Bounds (bounded_auto) holds the absolute bounds of each control,
	// keyed by scene variable id; a control without bounds is never
	// written automatically.
	Bounds map[string]Bound
}

// WriteClockTolerance is how far after the wall clock a write-history
// entry may be dated before it is a clock fault: the history is kept on
// the wall clock, and the clocks of processes sharing a store differ a
// little. The store refuses a later entry at insert (AML_CLOCK_FAULT) and
// the write guard denies facing one (CLOCK_FAULT).
const WriteClockTolerance = 5 * time.Second

// WriteRecord is one recorded write to a node. At is on the wall clock.
type WriteRecord struct {
	LineID, NodeID, CertificateID, RunID string
	At                                   time.Time
	Value, Delta                         float64
}

// ChannelRecord is the stored channel profile of one line.
type ChannelRecord struct {
	LineID        string                  `json:"lineId"`
	ChannelID     string                  `json:"channelId"`
	Profile       string                  `json:"profile"`
	ControlPolicy string                  `json:"controlPolicy"`
	SceneID       string                  `json:"sceneId,omitempty"`
	SceneVersion  string                  `json:"sceneVersion,omitempty"`
	Bounds        map[string]ChannelBound `json:"bounds,omitempty"`
	UpdatedBy     string                  `json:"updatedBy"`
	CreatedAt     time.Time               `json:"createdAt"`
	UpdatedAt     time.Time               `json:"updatedAt"`
}

// ChannelBound is an absolute range of one control (bounded_auto).
type ChannelBound struct {
	Min float64 `json:"min"`
	Max float64 `json:"max"`
}

// GuardProfile is the channel as the write guard sees it.
func (c *ChannelRecord) GuardProfile() *ChannelProfile {
	p := &ChannelProfile{ChannelID: c.ChannelID, LineID: c.LineID, Profile: c.Profile, ControlPolicy: c.ControlPolicy}
	if len(c.Bounds) > 0 {
		p.Bounds = make(map[string]Bound, len(c.Bounds))
		for k, b := range c.Bounds {
			p.Bounds[k] = Bound(b)
		}
	}
	return p
}

// Outcomes of rows of the write history (WriteRow.Outcome).
const (
	// WriteClaim marks the start of a governed action (no node written):
	// it makes the line busy for concurrent guards at once.
	WriteClaim = "claim"
	// WriteAttempted: a node write was attempted; its verified result is
	// in the audit log ("write.executed" / "write.failed").
	WriteAttempted = "attempted"
)

// WriteRow is one row of the write history: a WriteRecord plus the scene
// variable written and the row's outcome (WriteClaim, WriteAttempted).
type WriteRow struct {
	WriteRecord
	ID         int64  `json:"writeId"`
	VariableID string `json:"variableId,omitempty"`
	Outcome    string `json:"outcome"`
}

// WriteClaimRequest is a governed action about to write.
type WriteClaimRequest struct {
	LineID, CertificateID, RunID, Actor string
	At                                  time.Time
	// ExpectLastWriteID is the id of the newest row of the line's write
	// history as read before the guard checked the history.
	ExpectLastWriteID int64
}

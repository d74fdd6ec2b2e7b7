package benefit

import (
	"fmt"
	"os"

	"github.com/aml-project/aml/internal/twin/contract"
)

// Envelope is the operating envelope a person approved for the envelope
// mode: the study asks it before every write and tells it of every write
// made. [StudyEnvelope] is the study's own; the operating-envelope
// certificate of bounded_auto (bounds, moves per hour, expiry, signed
// approval) is meant to stand behind this interface.
type Envelope interface {
	// Allow checks a write at tMs (epoch ms) that moves the controls from
	// from to to (scene control id → value); nil allows it, an error says
	// why not.
	Allow(tMs int64, from, to map[string]float64) error
	// Record notes a write made at tMs.
	Record(tMs int64)
	// Approval names the person who approved the envelope.
	Approval() string
}

// StudyEnvelope is an envelope over absolute bounds per control, a
// number of moves per rolling hour and an expiry, approved by a person
// other than its requester.
type StudyEnvelope struct {
	Bounds          map[string][2]float64
	MaxMovesPerHour int
	FromMs, UntilMs int64
	RequestedBy     string
	ApprovedBy      string
	writes          []int64
}

// NewStudyEnvelope bounds every scene control by its scene range.
func NewStudyEnvelope(sc *contract.SceneContract, requestedBy, approvedBy string, fromMs, untilMs int64, maxMovesPerHour int) *StudyEnvelope {
	e := &StudyEnvelope{Bounds: map[string][2]float64{}, MaxMovesPerHour: maxMovesPerHour, FromMs: fromMs, UntilMs: untilMs,
		RequestedBy: requestedBy, ApprovedBy: approvedBy}
	for _, c := range sc.Controls {
		if c.Min != nil && c.Max != nil {
			e.Bounds[c.ID] = [2]float64{*c.Min, *c.Max}
		}
	}
	return e
}

// Allow implements [Envelope].
func (e *StudyEnvelope) Allow(tMs int64, from, to map[string]float64) error {
	switch {
	case e.ApprovedBy == "" || e.ApprovedBy == e.RequestedBy:
		return fmt.Errorf("the envelope is not approved by a second person")
	case tMs < e.FromMs:
		return fmt.Errorf("the envelope is not yet valid")
	case tMs >= e.UntilMs:
		return fmt.Errorf("the envelope expired")
	}
	for id, v := range to {
		b, ok := e.Bounds[id]
		if !ok {
			if from[id] != v {
				return fmt.Errorf("%s is not in the envelope", id)
			}
			continue
		}
		if v < b[0] || v > b[1] {
			return fmt.Errorf("%s = %g is outside the envelope [%g, %g]", id, v, b[0], b[1])
		}
	}
	n := 0
	for _, w := range e.writes {
		if w > tMs-3_600_000 {
			n++
		}
	}
	if n >= e.MaxMovesPerHour {
		return fmt.Errorf("%d moves in the last hour: the envelope allows %d", n, e.MaxMovesPerHour)
	}
	return nil
}

// Record implements [Envelope].
func (e *StudyEnvelope) Record(tMs int64) { e.writes = append(e.writes, tMs) }

// Approval implements [Envelope].
func (e *StudyEnvelope) Approval() string { return e.ApprovedBy }

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o600) }

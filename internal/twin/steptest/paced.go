package steptest

import (
	"time"

	"github.com/aml-project/aml/internal/twin/guard"
)

// PacedLine is a live line reached through a governed writer (the OPC UA
// writer of internal/connect/opcua in production) on the wall clock:
// Step waits until the next sampling instant, Period after the last, and
// returns that instant; the samples Execute then reads are the line's
// values at it. A step that comes late (the reads took longer than a
// period) restarts the cadence from the late instant rather than
// bunching samples up. Clock and Sleep default to the wall clock; tests
// inject both.
type PacedLine struct {
	guard.Writer
	Period time.Duration
	Clock  func() time.Time
	Sleep  func(time.Duration)

	next time.Time
}

// Now is the line's clock.
func (l *PacedLine) Now() time.Time {
	if l.Clock == nil {
		return time.Now().UTC()
	}
	return l.Clock().UTC()
}

// Step waits for the next sampling instant and returns it.
func (l *PacedLine) Step() (time.Time, float64) {
	now := l.Now()
	if l.next.IsZero() {
		l.next = now
	}
	l.next = l.next.Add(l.Period)
	if d := l.next.Sub(now); d > 0 {
		if l.Sleep == nil {
			time.Sleep(d)
		} else {
			l.Sleep(d)
		}
	} else {
		l.next = now
	}
	return l.next, 0
}

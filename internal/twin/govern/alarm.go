package govern

import (
	"context"
	"crypto/ed25519"
	"errors"
	"strings"

	"github.com/aml-project/aml/internal/events"
	"github.com/aml-project/aml/internal/twin/guard"
)

// The write alarm: a move was written but what the line reads back is not
// what was written.
const (
	AuditAlarm = "write.alarm" // audit action
	EventAlarm = "write.alarm" // event kind
)

// ExecuteGoverned runs Execute for certificate certID through w (the guard
// decides) and, for every move that was written but whose readback
// differs from what was written, raises an alarm: an audit entry
// "write.alarm" and an event "write.alarm" on bus (nil: none), naming the
// certificate, the node, the value written and the value read back. The
// guard has already stopped the certificate's remaining moves. Every
// governed write goes through here, whatever the writer (recording, OPC
// UA, …).
func ExecuteGoverned(ctx context.Context, st Store, pub ed25519.PublicKey, certID string, w guard.Writer, opts Options, bus *events.Bus) (Result, error) {
	res, err := Execute(ctx, st, pub, certID, w, opts)
	for _, m := range res.Writes {
		if !m.Written || m.Verified || m.Acked || !strings.Contains(m.Error, "read back") {
			continue
		}
		payload := map[string]any{"certificateId": certID, "nodeId": m.NodeID, "variableId": m.VariableID,
			"written": m.To, "readback": m.Readback, "detail": m.Error, "stoppedMoves": true}
		actor := opts.Actor
		if actor == "" {
			actor = "(unknown)"
		}
		if _, aerr := st.AppendAudit(ctx, actor, AuditAlarm, certID, res.LineID, payload); aerr != nil {
			err = errors.Join(err, aerr)
		}
		if bus != nil {
			bus.Publish(events.Event{Kind: EventAlarm, Line: res.LineID, ID: certID, Data: payload})
		}
	}
	return res, err
}

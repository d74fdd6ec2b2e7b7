package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/events"
)

// Event stream tuning.
const (
	// EventBuffer is each stream's buffer; a client that falls this far
	// behind is disconnected (it must re-read the state it follows).
	EventBuffer = 256
	// heartbeat keeps proxies from closing an idle stream.
	heartbeat = 15 * time.Second
	// writeTimeout bounds one event write: a client that stops reading
	// altogether is disconnected too.
	writeTimeout = 10 * time.Second
)

// stream serves one SSE client until it hangs up, the server shuts down,
// the client falls behind by more than buf events, or its token stops
// verifying (revoked, expired: re-checked every Options.StreamRecheck, and
// at once through reg when revoked by this process).
func (s *Server) stream(w http.ResponseWriter, r *http.Request, p auth.Principal, buf int, reg *openStream) {
	kinds := map[string]bool{}
	for _, k := range strings.Split(r.URL.Query().Get("kinds"), ",") {
		if k = strings.TrimSpace(k); k != "" {
			kinds[k] = true
		}
	}
	id := r.URL.Query().Get("id")
	// The filter runs in the publisher: it must be cheap and never block.
	// Events without a line (job recovery, cancellation) are resolved
	// below, on this stream's goroutine.
	sub := s.d.Bus.Subscribe(buf, func(e events.Event) bool {
		if len(kinds) > 0 && !kinds[e.Kind] {
			return false
		}
		if id != "" && e.ID != id {
			return false
		}
		return e.Line == "" || p.InScope(e.Line)
	})
	defer sub.Close()
	s.metrics.sseClients.Inc()
	defer s.metrics.sseClients.Dec()

	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(text string) bool {
		if err := rc.SetWriteDeadline(time.Now().Add(writeTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return false // the connection is gone
		}
		if _, err := io.WriteString(w, text); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send(": connected\n\n") {
		return
	}
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	// The token is re-verified as long as the stream is open (the dev
	// admin has none).
	var ended <-chan struct{}
	if reg != nil {
		ended = reg.done
	}
	tok, recheck, stop := s.recheck(r)
	defer stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.closing:
			send("event: shutdown\ndata: {}\n\n")
			return
		case <-ended:
			send("event: " + reg.why + "\ndata: {}\n\n")
			return
		case <-recheck:
			if _, err := s.o.Verifier.VerifyToken(r.Context(), tok); err != nil {
				// Revoked, expired, or the store cannot say: fail closed
				// (a browser's EventSource reconnects and is told why).
				send("event: revoked\ndata: {}\n\n")
				return
			}
		case <-tick.C:
			if !send(": ping\n\n") {
				return
			}
		case e, ok := <-sub.C:
			if !ok {
				return
			}
			select {
			case <-ended: // ended while events were waiting: none is sent
				send("event: " + reg.why + "\ndata: {}\n\n")
				return
			default:
			}
			if n := sub.Dropped(); n > 0 {
				s.metrics.sseDropped.Inc()
				send(fmt.Sprintf("event: overflow\ndata: {\"dropped\":%d}\n\n", n))
				return
			}
			if e.Line == "" && !p.AllLines() {
				line, err := s.eventLine(r, e)
				if err != nil || !p.InScope(line) {
					continue
				}
				e.Line = line
			}
			b, err := json.Marshal(e)
			if err != nil {
				continue
			}
			if !send(fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\n", e.Seq, e.Kind, b)) {
				return
			}
		}
	}
}

// eventLine finds the line of an event published without one (only job
// events are; the job's dataset names the line).
func (s *Server) eventLine(r *http.Request, e events.Event) (string, error) {
	if strings.HasPrefix(e.Kind, "job.") {
		return s.app.JobLine(r.Context(), core.Job{ID: e.ID})
	}
	return "", core.Errorf(core.CodeNotFound, "event %s has no line", e.Kind)
}

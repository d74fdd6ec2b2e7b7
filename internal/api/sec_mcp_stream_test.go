package api

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// mcpStreamHandler stands for the MCP transport: a GET holds a
// server-to-client stream open until its request ends.
func mcpStreamHandler(ended chan<- struct{}) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, ": open\n\n")
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
		ended <- struct{}{}
	})
}

// openMCP opens GET /mcp as token and returns the status and, for 200,
// a channel closed when the server ends the stream.
func (e *env) openMCP(token string) (int, <-chan struct{}) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/mcp", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	done := make(chan struct{})
	if res.StatusCode != http.StatusOK {
		_ = res.Body.Close()
		close(done)
		return res.StatusCode, done
	}
	br := bufio.NewReader(res.Body)
	if _, err := br.ReadString('\n'); err != nil {
		e.t.Fatal(err)
	}
	go func() {
		_, _ = io.Copy(io.Discard, br)
		_ = res.Body.Close()
		close(done)
	}()
	return res.StatusCode, done
}

// Security finding 10b (MCP): the MCP transport's streams were not
// counted — one token could open any number; now a GET on /mcp counts
// against the same per-token limit as /events, and a revoked token's MCP
// stream ends.
func TestSec10b_MCPStreamsBounded(t *testing.T) {
	ended := make(chan struct{}, 16)
	e := newEnv(t, Options{MaxStreams: 2, MCP: mcpStreamHandler(ended)})
	var tk struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	e.want(e.do("admin", "POST", "/api/v1/tokens", map[string]any{"name": "mcp-agent", "role": "agent"}), 201, "").json(t, &tk)
	_, first := e.openMCP(tk.Token)
	if st, _ := e.openMCP(tk.Token); st != http.StatusOK {
		t.Fatalf("second stream: %d", st)
	}
	if st, _ := e.openMCP(tk.Token); st != http.StatusTooManyRequests {
		t.Fatalf("third MCP stream of one token (limit 2): %d, want 429", st)
	}
	// An /events stream of the same token is over the limit too.
	if s := e.openStream(tk.Token); s.status != http.StatusTooManyRequests {
		t.Fatalf("event stream beside two MCP streams: %d", s.status)
	} else if b := (resp{status: s.status, body: s.body}).errBody(t); b.Code != core.CodeStreamLimit {
		t.Fatalf("refusal %+v", b)
	}
	// Calls (POST) are not streams.
	if r := e.do("agent", "POST", "/mcp", []byte(`{}`)); r.status != http.StatusAccepted {
		t.Fatalf("MCP call: %d", r.status)
	}
	e.want(e.do("admin", "DELETE", "/api/v1/tokens/"+tk.ID, nil), 200, "")
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		t.Fatal("the revoked token's MCP stream stayed open")
	}
}

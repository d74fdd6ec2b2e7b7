package api

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/events"
)

// rawStream is an open /events response read line by line.
type rawStream struct {
	status int
	lines  chan string // closed when the server ends the stream
	body   []byte      // the error body of a refused stream
}

// openStream opens /api/v1/events with token (bearer) and reads it until
// the server closes it or the test ends.
func (e *env) openStream(token string) *rawStream {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, "GET", e.srv.URL+"/api/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	s := &rawStream{status: res.StatusCode, lines: make(chan string, 1024)}
	if res.StatusCode != http.StatusOK {
		var b strings.Builder
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			b.WriteString(sc.Text())
		}
		res.Body.Close()
		s.body = []byte(b.String())
		close(s.lines)
		return s
	}
	first := make(chan struct{})
	go func() {
		defer close(s.lines)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		for n := 0; sc.Scan(); n++ {
			if n == 0 {
				close(first)
			}
			s.lines <- sc.Text()
		}
	}()
	select {
	case <-first:
	case <-time.After(10 * time.Second):
		e.t.Fatal("event stream did not open")
	}
	return s
}

// untilClosed reads s until the server ends it and returns every line;
// it fails the test if that takes longer than 10 s.
func (s *rawStream) untilClosed(t *testing.T) []string {
	t.Helper()
	var got []string
	deadline := time.After(10 * time.Second)
	for {
		select {
		case l, ok := <-s.lines:
			if !ok {
				return got
			}
			got = append(got, l)
		case <-deadline:
			t.Fatalf("the stream was not closed; read %q", got)
		}
	}
}

// TestSec10b_StreamsPerTokenLimited: one token cannot hold more than the
// limit of event streams; the refusal names the limit (429); another token
// is not affected, and a closed stream frees its place.
func TestSec10b_StreamsPerTokenLimited(t *testing.T) {
	e := newEnv(t, Options{})
	var open []*rawStream
	for range DefaultMaxStreams {
		s := e.openStream(e.tok["viewer"])
		if s.status != 200 {
			t.Fatalf("stream %d: status %d", len(open)+1, s.status)
		}
		open = append(open, s)
	}
	over := e.openStream(e.tok["viewer"])
	if over.status != http.StatusTooManyRequests {
		t.Fatalf("stream %d of one token: status %d, want 429", DefaultMaxStreams+1, over.status)
	}
	r := resp{status: over.status, body: over.body}
	if b := r.errBody(t); b.Code != CodeStreamLimit || !strings.Contains(b.Message, "8 open event streams") {
		t.Fatalf("refusal %+v", b)
	}
	if s := e.openStream(e.tok["engineer"]); s.status != 200 {
		t.Fatalf("another token's stream: %d", s.status)
	}
}

// TestSec10b_RevokedTokenStreamEnds: revoking a token (DELETE
// /tokens/{id}) ends its open streams at once, with a "revoked" event, so
// they stop receiving; other tokens' streams go on.
func TestSec10b_RevokedTokenStreamEnds(t *testing.T) {
	e := newEnv(t, Options{})
	var tk struct {
		ID    string `json:"id"`
		Token string `json:"token"`
	}
	e.want(e.do("admin", "POST", "/api/v1/tokens", map[string]any{"name": "watcher", "role": "viewer"}), 201, "").json(t, &tk)
	s := e.openStream(tk.Token)
	other := e.sse("viewer", "")
	e.want(e.do("admin", "DELETE", "/api/v1/tokens/"+tk.ID, nil), 200, "")
	e.d.Bus.Publish(events.Event{Kind: events.JobProgress, Line: simLine, ID: "after-revoke"})
	got := s.untilClosed(t)
	for _, l := range got {
		if strings.Contains(l, "after-revoke") {
			t.Fatalf("the revoked token's stream received %q", l)
		}
	}
	if !containsLine(got, "event: revoked") {
		t.Fatalf("no revoked event: %q", got)
	}
	select {
	case ev := <-other.events:
		if ev.data["id"] != "after-revoke" {
			t.Fatalf("other stream: %+v", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("another token's stream stopped receiving")
	}
}

func containsLine(lines []string, want string) bool {
	for _, l := range lines {
		if l == want {
			return true
		}
	}
	return false
}

// TestSec10b_StreamRecheckEndsTokenRevokedElsewhere: a token revoked
// without this server's App (another process on the same store: the CLI's
// aml token revoke) ends its streams at the next periodic re-verification
// (interval injected short).
func TestSec10b_StreamRecheckEndsTokenRevokedElsewhere(t *testing.T) {
	e := newEnv(t, Options{StreamRecheck: 20 * time.Millisecond, MaxStreams: 2})
	tokens := auth.NewTokens(e.d.Store.SQL())
	info, secret, err := tokens.Create(context.Background(), "test", auth.NewToken{Name: "elsewhere", Role: auth.RoleViewer})
	if err != nil {
		t.Fatal(err)
	}
	s := e.openStream(secret)
	e.openStream(secret)
	// The configured limit.
	if over := e.openStream(secret); over.status != http.StatusTooManyRequests {
		t.Fatalf("third stream with MaxStreams 2: %d", over.status)
	}
	if _, err := tokens.Revoke(context.Background(), "someone", info.ID); err != nil {
		t.Fatal(err)
	}
	if got := s.untilClosed(t); !containsLine(got, "event: revoked") {
		t.Fatalf("no revoked event: %q", got)
	}
	// The token's places are free again, and it is refused for good.
	if again := e.openStream(secret); again.status != http.StatusUnauthorized {
		t.Fatalf("revoked token opens a stream: %d", again.status)
	}
}

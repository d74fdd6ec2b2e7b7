package api

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/aml-project/aml/internal/auth"
	"github.com/aml-project/aml/internal/core"
)

// CodeStreamLimit is a caller with the most event streams open at once
// that a token may hold (HTTP 429).
const CodeStreamLimit = core.CodeStreamLimit

// streams is the registry of open event streams by caller (token id, or
// the principal's name for the tokenless dev admin): it bounds how many
// one caller holds and ends a token's streams when the token is revoked.
type streams struct {
	mu    sync.Mutex
	byKey map[string]map[*openStream]struct{}
}

// openStream is one registered stream; done is closed (once) to end it.
type openStream struct {
	key     string
	done    chan struct{}
	once    sync.Once
	why     string // the event sent before closing ("revoked", …)
	tokenID string
}

func (o *openStream) end(why string) {
	o.once.Do(func() {
		o.why = why
		close(o.done)
	})
}

func newStreams() *streams { return &streams{byKey: map[string]map[*openStream]struct{}{}} }

// streamKey is the caller a stream counts against.
func streamKey(p auth.Principal) string {
	if p.TokenID != "" {
		return p.TokenID
	}
	return "name:" + p.Name
}

// open registers a stream of p, or refuses it with 429 AML_STREAM_LIMIT
// when p already holds limit (limit ≤ 0: no limit).
func (s *streams) open(p auth.Principal, limit int) (*openStream, error) {
	key := streamKey(p)
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.byKey[key]
	if limit > 0 && len(set) >= limit {
		who := p.Name
		if p.TokenID != "" {
			who = fmt.Sprintf("%s (token %s)", p.Name, p.TokenID)
		}
		return nil, &core.Error{Code: CodeStreamLimit, Field: "events",
			Message: fmt.Sprintf("%s already has %d open event streams, the limit per token (aml serve --max-streams); close one first", who, limit)}
	}
	if set == nil {
		set = map[*openStream]struct{}{}
		s.byKey[key] = set
	}
	o := &openStream{key: key, done: make(chan struct{}), tokenID: p.TokenID}
	set[o] = struct{}{}
	return o, nil
}

// close unregisters o.
func (s *streams) close(o *openStream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if set := s.byKey[o.key]; set != nil {
		delete(set, o)
		if len(set) == 0 {
			delete(s.byKey, o.key)
		}
	}
}

// endToken ends every stream of token id with event why; it returns how
// many it ended.
func (s *streams) endToken(id, why string) int {
	if id == "" {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for o := range s.byKey[id] {
		o.end(why)
		n++
	}
	return n
}

// mcpStreams bounds MCP's streams like the event streams: a GET on /mcp
// (the streamable-HTTP transport's server-to-client stream) counts against
// the caller's --max-streams, and ends when its token is revoked through
// this server or stops verifying at a recheck.
func (s *Server) mcpStreams(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			h.ServeHTTP(w, r)
			return
		}
		p, _ := auth.FromContext(r.Context())
		o, err := s.streams.open(p, s.o.MaxStreams)
		if err != nil {
			writeError(w, err)
			return
		}
		defer s.streams.close(o)
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		tok, recheck, stop := s.recheck(r)
		go func() {
			defer stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-s.closing:
					cancel()
					return
				case <-o.done:
					cancel()
					return
				case <-recheck:
					if _, err := s.o.Verifier.VerifyToken(ctx, tok); err != nil {
						cancel()
						return
					}
				}
			}
		}()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// recheck is the ticker at which an open stream re-verifies its request's
// token (nil channel for the tokenless dev admin, who has none) and its
// stop.
func (s *Server) recheck(r *http.Request) (tok string, c <-chan time.Time, stop func()) {
	tok, _ = auth.Token(r)
	if tok == "" || s.o.Verifier == nil {
		return tok, nil, func() {}
	}
	t := time.NewTicker(s.o.StreamRecheck)
	return tok, t.C, t.Stop
}

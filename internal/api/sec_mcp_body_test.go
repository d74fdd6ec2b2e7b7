package api

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aml-project/aml/internal/app"
	"github.com/aml-project/aml/internal/core"
	amlmcp "github.com/aml-project/aml/internal/mcp"
)

// TestSec15_MCPBodyLimited: a POST to /mcp was read by the MCP library
// under its own 4 MiB cap, not the server's body limit (--max-body-mib)
// that every JSON route honours, so a deployment that lowered the limit
// still took 4 MiB bodies on /mcp. The server's limit now applies before
// the MCP handler reads: a body one byte over it is 413
// AML_QUOTA_EXCEEDED (field body), whether its length is declared or it
// is sent chunked; a body within it is served.
func TestSec15_MCPBodyLimited(t *testing.T) {
	const limit = 1024
	e := newEnv(t, Options{})
	a := app.New(e.d, app.Options{Version: Version})
	s := NewServer(e.d, Options{App: a, MCP: amlmcp.HTTPHandler(a), MaxBodyBytes: limit, RatePerSec: -1})
	srv := httptest.NewServer(s)
	t.Cleanup(func() { s.CloseStreams(); srv.Close() })

	// body is a tools/list call padded with spaces to n bytes.
	body := func(n int) []byte {
		b := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
		return append(b, bytes.Repeat([]byte(" "), n-len(b))...)
	}
	cases := []struct {
		name    string
		n       int
		chunked bool
		status  int
	}{
		{"within the limit", limit, false, http.StatusOK},
		{"one byte over", limit + 1, false, http.StatusRequestEntityTooLarge},
		{"one byte over, chunked", limit + 1, true, http.StatusRequestEntityTooLarge},
		{"far over, chunked", 64 * limit, true, http.StatusRequestEntityTooLarge},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var rd io.Reader = bytes.NewReader(body(c.n))
			if c.chunked {
				rd = io.MultiReader(rd) // no length: sent chunked
			}
			req, err := http.NewRequest("POST", srv.URL+"/mcp", rd)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			req.Header.Set("Authorization", "Bearer "+e.tok["agent"])
			res, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer res.Body.Close()
			b, _ := io.ReadAll(res.Body)
			r := resp{status: res.StatusCode, body: b, header: res.Header}
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %.300s", r.status, c.status, b)
			}
			if c.status == http.StatusOK {
				if !strings.Contains(string(b), `"tools"`) {
					t.Fatalf("no tool list: %.300s", b)
				}
				return
			}
			if eb := r.errBody(t); eb.Code != core.CodeQuotaExceeded || eb.Field != "body" {
				t.Fatalf("refusal %+v, want AML_QUOTA_EXCEEDED on body", eb)
			}
		})
	}
}

package api

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
)

// slowBody starts a request over its own connection that sends the
// headers and the first part of a body of Content-Length n, then stalls.
// It returns the connection (the test sends the rest or reads the answer).
func (e *env) slowBody(method, path, token, ctype, first string, n int) net.Conn {
	e.t.Helper()
	return slowBodyTo(e.t, e.srv.URL, method, path, token, ctype, first, n)
}

func slowBodyTo(t *testing.T, base, method, path, token, ctype, first string, n int) net.Conn {
	t.Helper()
	u, _ := url.Parse(base)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n%s", method, path, u.Host, token, ctype, n, first); err != nil {
		t.Fatal(err)
	}
	return c
}

// answer reads the HTTP response on c (within 10 s: a server that never
// answers fails the test rather than hanging it).
func answer(t *testing.T, c net.Conn) resp {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to a stalled body: %v", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{status: res.StatusCode, body: b, header: res.Header}
}

// TestSec7_SlowBodyTimesOut: a client that stops sending its JSON body
// (slowloris) is answered 408 AML_BODY_TIMEOUT after the body timeout
// instead of holding its connection and handler forever; CSV uploads have
// their own (longer by default) limit.
func TestSec7_SlowBodyTimesOut(t *testing.T) {
	e := newEnv(t, Options{BodyTimeout: 50 * time.Millisecond, CSVTimeout: 50 * time.Millisecond})
	body := `{"name":"slow","role":"viewer"}`
	r := answer(t, e.slowBody("POST", "/api/v1/tokens", e.tok["admin"], "application/json", body[:5], len(body)))
	if r.status != http.StatusRequestTimeout || r.errBody(t).Code != core.CodeBodyTimeout {
		t.Fatalf("stalled JSON body: %d %s", r.status, r.body)
	}
	csv := "time_ms,c1\n1000,1\n"
	r = answer(t, e.slowBody("POST", "/api/v1/ingest/csv?line=L-slow&product=P&recipe=R&run=run-slow", e.tok["engineer"], "text/csv", csv, 1<<20))
	if r.status != http.StatusRequestTimeout || r.errBody(t).Code != core.CodeBodyTimeout {
		t.Fatalf("stalled CSV body: %d %s", r.status, r.body)
	}
	// A body sent in time is read as always, and a long call after it is
	// not cut by the deadline (it is cleared once the body is read): the
	// event stream, which has no body, is never subject to it.
	e.want(e.do("admin", "POST", "/api/v1/tokens", json.RawMessage(body)), 201, "")
}

// TestSec7_DeadlineLiftedAfterBody: once the body is read, the handler
// may run longer than the body timeout without its request being cut
// (the connection's read deadline would otherwise cancel its context).
func TestSec7_DeadlineLiftedAfterBody(t *testing.T) {
	outcome := make(chan string, 1)
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body) // the outcome says whether the read ended
		select {
		case <-r.Context().Done():
			outcome <- "canceled"
		case <-time.After(200 * time.Millisecond): // ten body timeouts
			outcome <- "ran"
		}
	})
	e := newEnv(t, Options{BodyTimeout: 20 * time.Millisecond, UI: ui})
	res, err := e.srv.Client().Post(e.srv.URL+"/ui/x", "application/x-www-form-urlencoded", strings.NewReader("a=b"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if got := <-outcome; got != "ran" {
		t.Fatalf("the handler after its body: %s", got)
	}
}

// TestSec7_SlowBodiesDoNotTakeHeavySlots: the heavy slot is taken only
// after the body is read and decoded (app's run, after the transport's
// decode): with one slot, viewers stalling heavy predict calls mid-body
// do not block another heavy call, and their calls, once their bodies
// arrive, run too. (MCP calls take the same slots: internal/mcp
// TestHeavySlots.)
func TestSec7_SlowBodiesDoNotTakeHeavySlots(t *testing.T) {
	e := newEnv(t, Options{HeavyConcurrent: 1, BodyTimeout: time.Hour})
	body := fmt.Sprintf(`{"run":%q,"from":0}`, e.runs[0])
	// The same server, told when a handler starts reading a body.
	reading := make(chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = &signalBody{ReadCloser: r.Body, first: reading}
		e.s.ServeHTTP(w, r)
	}))
	defer srv.Close()
	var stalled []net.Conn
	for range 3 {
		stalled = append(stalled, slowBodyTo(t, srv.URL, "POST", "/api/v1/models/mdl_nope/predict", e.tok["viewer"], "application/json", body[:4], len(body)))
	}
	// All three are in their handlers, reading (decoding) their bodies.
	for range 3 {
		<-reading
	}
	done := make(chan resp, 1)
	go func() {
		req, _ := http.NewRequest("POST", srv.URL+"/api/v1/models/mdl_nope/predict", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+e.tok["engineer"])
		res, err := srv.Client().Do(req)
		if err != nil {
			done <- resp{status: -1, body: []byte(err.Error())}
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		done <- resp{status: res.StatusCode, body: b}
	}()
	select {
	case r := <-done:
		// Not found: the call got its slot and ran the use case.
		if r.status != http.StatusNotFound {
			t.Fatalf("heavy call: %d %s", r.status, r.body)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a heavy call is blocked by stalled request bodies")
	}
	for _, c := range stalled {
		if _, err := io.WriteString(c, body[4:]); err != nil {
			t.Fatal(err)
		}
		if r := answer(t, c); r.status != http.StatusNotFound {
			t.Fatalf("stalled call once complete: %d %s", r.status, r.body)
		}
	}
}

// signalBody tells first when its first Read starts.
type signalBody struct {
	io.ReadCloser
	first chan<- struct{}
	once  bool
}

func (b *signalBody) Read(p []byte) (int, error) {
	if !b.once {
		b.once = true
		b.first <- struct{}{}
	}
	return b.ReadCloser.Read(p)
}

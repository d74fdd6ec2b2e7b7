package audit_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/aml-project/aml/internal/audit"
	"math"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqlite"
)

func openStore(t *testing.T, dir string) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func newLog(t *testing.T) (*audit.Log, *sqlite.Store) {
	t.Helper()
	s := openStore(t, t.TempDir())
	l := audit.New(s.SQL())
	clock := time.UnixMilli(1_767_600_000_000)
	l.SetClock(func() time.Time { clock = clock.Add(1500 * time.Microsecond); return clock })
	return l, s
}

// fill appends n entries (subjects alternate s-0, s-1) and returns them.
func fill(t *testing.T, l *audit.Log, n int) []audit.Entry {
	t.Helper()
	var out []audit.Entry
	for i := range n {
		e, err := l.Append(context.Background(), "alice", "trial", fmt.Sprintf("s-%d", i%2), "L1", map[string]any{"i": i, "x": 0.5 * float64(i)})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
	}
	return out
}

func dropTriggers(t *testing.T, s *sqlite.Store) {
	t.Helper()
	for _, tr := range []string{"audit_log_no_update", "audit_log_no_delete", "audit_log_extend_chain"} {
		if _, err := s.DB().Exec(`DROP TRIGGER ` + tr); err != nil {
			t.Fatal(err)
		}
	}
}

func mustExec(t *testing.T, db *sql.DB, q string, args ...any) {
	t.Helper()
	if _, err := db.Exec(q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

// wantTampered asserts Verify (or VerifyHead) failed with the stable code,
// HTTP 409, first bad seq and problem text fragments.
func wantTampered(t *testing.T, res audit.VerifyResult, err error, seq int64, frags ...string) {
	t.Helper()
	if core.CodeOf(err) != audit.CodeAuditTampered {
		t.Fatalf("want %s, got %v (result %+v)", audit.CodeAuditTampered, err, res)
	}
	var ae *core.Error
	if errors.As(err, &ae); ae.Kind() != core.KindConflict {
		t.Fatalf("kind %s, want conflict (HTTP 409)", ae.Kind())
	}
	if res.OK || res.FirstBad != seq {
		t.Fatalf("first bad %d ok %v, want %d: %s", res.FirstBad, res.OK, seq, res.Problem)
	}
	if !strings.Contains(err.Error(), fmt.Sprintf("seq %d", seq)) {
		t.Fatalf("error does not name seq %d: %v", seq, err)
	}
	for _, f := range frags {
		if !strings.Contains(res.Problem, f) {
			t.Fatalf("problem %q lacks %q", res.Problem, f)
		}
	}
}

func TestAppendListVerify(t *testing.T) {
	l, _ := newLog(t)
	ctx := context.Background()

	res, err := l.Verify(ctx)
	if err != nil || !res.OK || res.Entries != 0 || res.Head != audit.GenesisHash {
		t.Fatalf("empty log: %+v %v", res, err)
	}
	if seq, h, err := l.Head(ctx); err != nil || seq != 0 || h != audit.GenesisHash {
		t.Fatalf("empty head %d %s %v", seq, h, err)
	}

	es := fill(t, l, 5)
	if es[0].Seq != 1 || es[0].PrevHash != audit.GenesisHash {
		t.Fatalf("first entry %+v", es[0])
	}
	for i, e := range es {
		if e.Seq != int64(i+1) || (i > 0 && e.PrevHash != es[i-1].Hash) || len(e.Hash) != 64 {
			t.Fatalf("entry %d %+v", i, e)
		}
		if h, err := audit.ComputeHash(e); err != nil || h != e.Hash {
			t.Fatalf("audit.ComputeHash(%d) = %s %v, want %s", e.Seq, h, err, e.Hash)
		}
		if e.At.Location() != time.UTC || e.At.Nanosecond()%int(time.Millisecond) != 0 {
			t.Fatalf("at %v not UTC milliseconds", e.At)
		}
	}
	if string(es[3].Payload) != `{"i":3,"x":1.5}` {
		t.Fatalf("payload %s", es[3].Payload)
	}

	res, err = l.Verify(ctx)
	if err != nil || !res.OK || res.Entries != 5 || res.HeadSeq != 5 || res.Head != es[4].Hash || res.FirstBad != 0 {
		t.Fatalf("verify %+v %v", res, err)
	}
	if seq, h, err := l.Head(ctx); err != nil || seq != 5 || h != es[4].Hash {
		t.Fatalf("head %d %s %v", seq, h, err)
	}
	if res, err := l.VerifyHead(ctx, 3, es[2].Hash); err != nil || !res.OK {
		t.Fatalf("verify head 3: %+v %v", res, err)
	}
	if res, err := l.VerifyHead(ctx, 0, audit.GenesisHash); err != nil || !res.OK {
		t.Fatalf("verify genesis head: %+v %v", res, err)
	}

	// List: all, paged, by subject; entries round-trip exactly.
	all, err := l.List(ctx, 0, 0, "")
	if err != nil || len(all) != 5 {
		t.Fatalf("list %d %v", len(all), err)
	}
	for i := range all {
		a, b := all[i], es[i]
		if a.Seq != b.Seq || !a.At.Equal(b.At) || a.Actor != b.Actor || a.Action != b.Action || a.Subject != b.Subject ||
			a.LineID != b.LineID || string(a.Payload) != string(b.Payload) || a.PrevHash != b.PrevHash || a.Hash != b.Hash {
			t.Fatalf("listed %+v, appended %+v", a, b)
		}
	}
	page, _ := l.List(ctx, 2, 2, "")
	if len(page) != 2 || page[0].Seq != 3 || page[1].Seq != 4 {
		t.Fatalf("page %+v", page)
	}
	sub, _ := l.List(ctx, 0, 10, "s-1")
	if len(sub) != 2 || sub[0].Seq != 2 || sub[1].Seq != 4 {
		t.Fatalf("subject filter %+v", sub)
	}
	none, err := l.List(ctx, 5, 10, "")
	if err != nil || none == nil || len(none) != 0 {
		t.Fatalf("past the end: %#v %v", none, err)
	}
}

func TestAppendRefusesBadInput(t *testing.T) {
	l, _ := newLog(t)
	ctx := context.Background()
	for _, c := range []struct {
		actor, action, subject string
		payload                any
		code, field            string
	}{
		{"", "trial", "t1", nil, core.CodeInvalidArgument, "actor"},
		{"alice", " ", "t1", nil, core.CodeInvalidArgument, "action"},
		{"alice", "trial", "", nil, core.CodeInvalidArgument, "subject"},
		{"alice", "trial", "t1", map[string]any{"v": math.NaN()}, core.CodeNonFinite, "v"},
		{"alice", "trial", "t1", json.RawMessage(`{"a":`), core.CodeInvalidArgument, "payload"},
		{"alice", "trial", "t1", func() {}, core.CodeInvalidArgument, "payload"},
	} {
		_, err := l.Append(ctx, c.actor, c.action, c.subject, "", c.payload)
		var ae *core.Error
		if !errors.As(err, &ae) || ae.Code != c.code || ae.Field != c.field {
			t.Errorf("%+v: got %v", c, err)
		}
	}
	if seq, _, _ := l.Head(ctx); seq != 0 {
		t.Fatalf("a refused append left entry %d", seq)
	}
	// nil and empty raw payloads are stored as {}.
	e, err := l.Append(ctx, "alice", "freeze", "scene-1", "", nil)
	if err != nil || string(e.Payload) != "{}" {
		t.Fatalf("nil payload: %s %v", e.Payload, err)
	}
}

// The hash is over canonical JSON, so the payload's key order, white space
// and number spelling do not matter; this pins the exact hashed document
// for verifiers written outside AML.
func TestCanonicalHashStable(t *testing.T) {
	at := time.UnixMilli(1_767_600_000_123)
	base := audit.Entry{Seq: 7, At: at, Actor: "alice", Action: "certificate.issue", Subject: "cert-1", LineID: "L1", PrevHash: strings.Repeat("ab", 32)}
	var hashes []string
	for _, p := range []string{
		`{"b":{"y":2,"x":1},"a":[1,2.50,"é<>"],"c":null}`,
		`{ "c" : null, "a" : [ 1, 2.5, "\u00e9\u003c>" ], "b" : { "x" : 1.0e0, "y" : 2 } }`,
	} {
		e := base
		e.Payload = json.RawMessage(p)
		h, err := audit.ComputeHash(e)
		if err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h)
	}
	// The same payload as a Go map (random iteration order) and a struct.
	type inner struct {
		Y int `json:"y"`
		X int `json:"x"`
	}
	for range 20 {
		p, err := core.CanonicalJSON(map[string]any{"c": nil, "b": map[string]any{"y": 2, "x": 1}, "a": []any{1, 2.5, "é<>"}})
		if err != nil {
			t.Fatal(err)
		}
		e := base
		e.Payload = p
		h, _ := audit.ComputeHash(e)
		hashes = append(hashes, h)
	}
	p, _ := core.CanonicalJSON(struct {
		B inner `json:"b"`
		A []any `json:"a"`
		C *int  `json:"c"`
	}{inner{2, 1}, []any{1, 2.5, "é<>"}, nil})
	e := base
	e.Payload = p
	h, _ := audit.ComputeHash(e)
	hashes = append(hashes, h)

	doc := `{"action":"certificate.issue","actor":"alice","at":1767600000123,"lineId":"L1",` +
		`"payload":{"a":[1,2.5,"é<>"],"b":{"x":1,"y":2},"c":null},"prevHash":"` + strings.Repeat("ab", 32) + `","seq":7,"subject":"cert-1"}`
	sum := sha256.Sum256([]byte(doc))
	want := hex.EncodeToString(sum[:])
	for i, h := range hashes {
		if h != want {
			t.Fatalf("hash %d = %s, want %s (sha256 of %s)", i, h, want, doc)
		}
	}

	// Appended through the log: stored canonical, same hash from either spelling.
	l1, _ := newLog(t)
	l2, _ := newLog(t)
	a, err := l1.Append(context.Background(), "u", "write", "s", "", json.RawMessage(`{"z":1,"a":{"d":[true],"c":"x"}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := l2.Append(context.Background(), "u", "write", "s", "", map[string]any{"a": map[string]any{"c": "x", "d": []bool{true}}, "z": 1})
	if err != nil {
		t.Fatal(err)
	}
	if string(a.Payload) != `{"a":{"c":"x","d":[true]},"z":1}` || string(a.Payload) != string(b.Payload) || a.Hash != b.Hash {
		t.Fatalf("payload %s / %s, hash %s / %s", a.Payload, b.Payload, a.Hash, b.Hash)
	}
}

func TestTriggersRefuseUpdateDeleteAndForks(t *testing.T) {
	l, s := newLog(t)
	es := fill(t, l, 3)
	db := s.DB()
	for _, q := range []string{
		`UPDATE audit_log SET actor = 'mallory' WHERE seq = 2`,
		`UPDATE audit_log SET payload = '{}'`,
		`DELETE FROM audit_log WHERE seq = 3`,
		`DELETE FROM audit_log`,
	} {
		if _, err := db.Exec(q); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: %v", q, err)
		}
	}
	// Inserts that do not extend the head: a fork off seq 1, a skipped seq,
	// and REPLACE over an existing row.
	for _, c := range []struct {
		seq  int64
		prev string
	}{{2, es[0].Hash}, {5, es[2].Hash}, {4, es[1].Hash}, {4, audit.GenesisHash}} {
		_, err := db.Exec(`INSERT INTO audit_log(seq, at, actor, action, subject, payload, prev_hash, hash) VALUES (?,1,'m','x','s','{}',?,?)`,
			c.seq, c.prev, strings.Repeat("f", 64))
		if err == nil || !strings.Contains(err.Error(), "extend the chain") {
			t.Errorf("fork insert seq %d: %v", c.seq, err)
		}
	}
	if _, err := db.Exec(`INSERT OR REPLACE INTO audit_log(seq, at, actor, action, subject, payload, prev_hash, hash) VALUES (2,1,'m','x','s','{}',?,?)`,
		es[0].Hash, strings.Repeat("f", 64)); err == nil {
		t.Error("INSERT OR REPLACE over seq 2 accepted")
	}
	if res, err := l.Verify(context.Background()); err != nil || res.Entries != 3 {
		t.Fatalf("after refused edits: %+v %v", res, err)
	}
}

func TestVerifyDetectsEdits(t *testing.T) {
	for _, c := range []struct {
		name, q string
		frag    string
	}{
		{"payload", `UPDATE audit_log SET payload = '{"i":2,"x":99}' WHERE seq = 3`, "content does not match its hash"},
		{"actor", `UPDATE audit_log SET actor = 'mallory' WHERE seq = 3`, "content does not match its hash"},
		{"at", `UPDATE audit_log SET at = at + 1 WHERE seq = 3`, "content does not match its hash"},
		{"subject", `UPDATE audit_log SET subject = 'other' WHERE seq = 3`, "content does not match its hash"},
		{"line", `UPDATE audit_log SET line_id = 'L2' WHERE seq = 3`, "content does not match its hash"},
		{"hash", `UPDATE audit_log SET hash = '` + strings.Repeat("1", 64) + `' WHERE seq = 3`, "content does not match its hash"},
		{"at as text", `UPDATE audit_log SET at = 'yesterday' WHERE seq = 3`, "at is string"},
		{"payload not JSON", `UPDATE audit_log SET payload = '{"i":' WHERE seq = 3`, "not valid JSON"},
		{"payload as number", `UPDATE audit_log SET payload = 42 WHERE seq = 3`, "content does not match its hash"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, s := newLog(t)
			fill(t, l, 5)
			dropTriggers(t, s)
			mustExec(t, s.DB(), c.q)
			res, err := l.Verify(context.Background())
			wantTampered(t, res, err, 3, "entry 3", c.frag)
			if res.Entries != 5 {
				t.Fatalf("entries %d", res.Entries)
			}
		})
	}
}

// An edit whose hash is recomputed (as a careful forger would) keeps the
// entry self-consistent but breaks the next entry's link.
func TestVerifyDetectsRehashedEdit(t *testing.T) {
	l, s := newLog(t)
	es := fill(t, l, 5)
	dropTriggers(t, s)
	forged := es[2]
	forged.Actor = "mallory"
	h, _ := audit.ComputeHash(forged)
	mustExec(t, s.DB(), `UPDATE audit_log SET actor = ?, hash = ? WHERE seq = 3`, forged.Actor, h)
	res, err := l.Verify(context.Background())
	wantTampered(t, res, err, 4, "entry 4's prevHash", "not the hash of entry 3")

	// Rewriting the whole suffix from there on is self-consistent: only a
	// head recorded before the rewrite reveals it.
	prev := h
	for _, e := range es[3:] {
		e.PrevHash = prev
		nh, _ := audit.ComputeHash(e)
		mustExec(t, s.DB(), `UPDATE audit_log SET prev_hash = ?, hash = ? WHERE seq = ?`, prev, nh, e.Seq)
		prev = nh
	}
	if res, err := l.Verify(context.Background()); err != nil || !res.OK {
		t.Fatalf("a rewritten suffix is undetectable without a head: %+v %v", res, err)
	}
	res, err = l.VerifyHead(context.Background(), 5, es[4].Hash)
	wantTampered(t, res, err, 5, "recorded head", "rewritten")
	res, err = l.VerifyHead(context.Background(), 3, es[2].Hash)
	wantTampered(t, res, err, 3, "recorded head")
	if res, err := l.VerifyHead(context.Background(), 2, es[1].Hash); err != nil || !res.OK {
		t.Fatalf("head 2 untouched: %+v %v", res, err)
	}
}

func TestVerifyDetectsDeletions(t *testing.T) {
	t.Run("middle", func(t *testing.T) {
		l, s := newLog(t)
		fill(t, l, 5)
		dropTriggers(t, s)
		mustExec(t, s.DB(), `DELETE FROM audit_log WHERE seq = 3`)
		res, err := l.Verify(context.Background())
		wantTampered(t, res, err, 3, "entry 3 is missing", "entry 4's prevHash", "does not link to entry 2")
		if res.Entries != 4 {
			t.Fatalf("entries %d", res.Entries)
		}
	})
	t.Run("middle, neighbours relinked", func(t *testing.T) {
		// Even with entry 4 re-linked and re-hashed the gap remains.
		l, s := newLog(t)
		es := fill(t, l, 5)
		dropTriggers(t, s)
		mustExec(t, s.DB(), `DELETE FROM audit_log WHERE seq IN (2, 3)`)
		e := es[3]
		e.PrevHash = es[0].Hash
		h, _ := audit.ComputeHash(e)
		mustExec(t, s.DB(), `UPDATE audit_log SET prev_hash = ?, hash = ? WHERE seq = 4`, e.PrevHash, h)
		res, err := l.Verify(context.Background())
		wantTampered(t, res, err, 2, "entries 2..3 are missing")
	})
	t.Run("first", func(t *testing.T) {
		l, s := newLog(t)
		fill(t, l, 3)
		dropTriggers(t, s)
		mustExec(t, s.DB(), `DELETE FROM audit_log WHERE seq = 1`)
		res, err := l.Verify(context.Background())
		wantTampered(t, res, err, 1, "entry 1 is missing")
	})
	t.Run("last", func(t *testing.T) {
		// A truncated tail is a valid shorter chain: Verify cannot see it,
		// VerifyHead with the head recorded before can.
		l, s := newLog(t)
		es := fill(t, l, 5)
		seq, head, err := l.Head(context.Background())
		if err != nil || seq != 5 || head != es[4].Hash {
			t.Fatal(seq, head, err)
		}
		dropTriggers(t, s)
		mustExec(t, s.DB(), `DELETE FROM audit_log WHERE seq >= 4`)
		if res, err := l.Verify(context.Background()); err != nil || !res.OK || res.Entries != 3 {
			t.Fatalf("truncation is not detectable from the log alone: %+v %v", res, err)
		}
		res, err := l.VerifyHead(context.Background(), seq, head)
		wantTampered(t, res, err, 4, "ends at entry 3", "entries 4..5 were removed")

		// Truncate and append anew (seq 4, 5 reused): the recorded head's
		// seq exists again but with another hash.
		fill(t, l, 2)
		if res, err := l.Verify(context.Background()); err != nil || res.Entries != 5 {
			t.Fatalf("%+v %v", res, err)
		}
		res, err = l.VerifyHead(context.Background(), seq, head)
		wantTampered(t, res, err, 5, "recorded head")
	})
}

func TestVerifyHeadArguments(t *testing.T) {
	l, _ := newLog(t)
	for _, c := range []struct {
		seq  int64
		hash string
	}{{-1, audit.GenesisHash}, {1, "abc"}, {0, strings.Repeat("1", 64)}} {
		if _, err := l.VerifyHead(context.Background(), c.seq, c.hash); core.CodeOf(err) != core.CodeInvalidArgument {
			t.Errorf("VerifyHead(%d, %q): %v", c.seq, c.hash, err)
		}
	}
	res, err := l.VerifyHead(context.Background(), 1, strings.Repeat("a", 64))
	wantTampered(t, res, err, 1, "ends at entry 0")
}

func TestAppendTx(t *testing.T) {
	l, s := newLog(t)
	ctx := context.Background()
	fill(t, l, 1)
	mustExec(t, s.DB(), `CREATE TABLE twin_thing(id TEXT PRIMARY KEY)`)

	// Rolled back: neither the change nor its audit entry exists.
	tx, err := s.SQL().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO twin_thing VALUES ('a')`); err != nil {
		t.Fatal(err)
	}
	e, err := l.AppendTx(ctx, tx, "bob", "write", "a", "L1", map[string]string{"op": "insert"})
	if err != nil || e.Seq != 2 {
		t.Fatalf("%+v %v", e, err)
	}
	tx.Rollback()
	if seq, _, _ := l.Head(ctx); seq != 1 {
		t.Fatalf("rolled-back entry visible: head %d", seq)
	}

	// Committed: both, and the chain continues from it.
	tx, _ = s.SQL().Begin(ctx)
	if _, err := tx.ExecContext(ctx, `INSERT INTO twin_thing VALUES ('a')`); err != nil {
		t.Fatal(err)
	}
	e, err = l.AppendTx(ctx, tx, "bob", "write", "a", "L1", map[string]string{"op": "insert"})
	if err != nil || e.Seq != 2 {
		t.Fatalf("%+v %v", e, err)
	}
	if _, err := l.AppendTx(ctx, tx, "", "write", "a", "", nil); core.CodeOf(err) != core.CodeInvalidArgument {
		t.Fatalf("empty actor in tx: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	fill(t, l, 1)
	res, err := l.Verify(ctx)
	if err != nil || res.Entries != 3 {
		t.Fatalf("%+v %v", res, err)
	}
	got, _ := l.List(ctx, 1, 1, "")
	if len(got) != 1 || got[0].Hash != e.Hash || got[0].Actor != "bob" {
		t.Fatalf("%+v", got)
	}
}

// Two Logs over two stores (two writer pools, as two processes have) on the
// same file, appending from many goroutines, form one valid chain.
func TestConcurrentAppendsOneChain(t *testing.T) {
	dir := t.TempDir()
	s1, s2 := openStore(t, dir), openStore(t, dir)
	logs := []*audit.Log{audit.New(s1.SQL()), audit.New(s2.SQL())}
	const workers, each = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, 2*workers*each)
	for li, l := range logs {
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range each {
					if _, err := l.Append(context.Background(), fmt.Sprintf("proc-%d", li), "write", fmt.Sprintf("w-%d", w), "", map[string]int{"i": i}); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	const n = 2 * workers * each
	for _, l := range logs {
		res, err := l.Verify(context.Background())
		if err != nil || !res.OK || res.Entries != n || res.HeadSeq != n {
			t.Fatalf("verify %+v %v", res, err)
		}
	}
	all, err := logs[0].List(context.Background(), 0, n, "")
	if err != nil || len(all) != n {
		t.Fatalf("%d %v", len(all), err)
	}
	byActor := map[string]int{}
	for i, e := range all {
		if e.Seq != int64(i+1) || (i > 0 && e.PrevHash != all[i-1].Hash) {
			t.Fatalf("entry %d: %+v", i, e)
		}
		byActor[e.Actor]++
	}
	if byActor["proc-0"] != workers*each || byActor["proc-1"] != workers*each {
		t.Fatalf("per process %v", byActor)
	}
}

// Query filters by actor, action (exact or a prefix with "*"), time range
// and lines, and pages newest first with BeforeSeq.
func TestQueryFiltersAndNewestFirst(t *testing.T) {
	l, _ := newLog(t)
	ctx := context.Background()
	var all []audit.Entry
	for i, e := range []struct{ actor, action, line string }{
		{"alice", "cert.issue", "L1"}, {"bob", "cert.approve", "L1"}, {"alice", "trial.put", "L2"},
		{"carol", "token.create", ""}, {"bob", "cert.revoke", "L2"}, {"alice", "cert.issue", "L1"},
	} {
		x, err := l.Append(ctx, e.actor, e.action, fmt.Sprintf("s-%d", i), e.line, map[string]any{"i": i})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, x)
	}
	seqs := func(es []audit.Entry) []int64 {
		out := []int64{}
		for _, e := range es {
			out = append(out, e.Seq)
		}
		return out
	}
	from, to := all[1].At.UnixMilli(), all[4].At.UnixMilli()
	for _, tc := range []struct {
		name string
		q    audit.Query
		want []int64
	}{
		{"all newest first", audit.Query{Newest: true}, []int64{6, 5, 4, 3, 2, 1}},
		{"a page before 5", audit.Query{Newest: true, BeforeSeq: 5, Limit: 2}, []int64{4, 3}},
		{"actor", audit.Query{Actor: "alice"}, []int64{1, 3, 6}},
		{"action exact", audit.Query{Action: "cert.issue"}, []int64{1, 6}},
		{"action prefix", audit.Query{Action: "cert.*", Newest: true}, []int64{6, 5, 2, 1}},
		{"time range", audit.Query{FromMs: &from, ToMs: &to}, []int64{2, 3, 4, 5}},
		{"lines", audit.Query{Lines: []string{"L2"}}, []int64{3, 5}},
		{"no lines", audit.Query{Lines: []string{}}, []int64{}},
		{"together", audit.Query{Actor: "bob", Action: "cert.*", Lines: []string{"L1", "L2"}, Newest: true}, []int64{5, 2}},
	} {
		es, err := l.Query(ctx, tc.q)
		if err != nil {
			t.Fatal(err)
		}
		if got := seqs(es); !slices.Equal(got, tc.want) {
			t.Errorf("%s: seqs %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestAppendIfIsAtomic: AppendIf's check sees the subject's trail inside
// the write transaction its entry is appended in. A second AppendIf of
// the subject, started while the first is inside its check, sees the
// first one's entry when its own check runs (it waited for the write
// lock) and is refused; a check's error appends nothing.
func TestAppendIfIsAtomic(t *testing.T) {
	l, _ := newLog(t)
	ctx := context.Background()
	claim := func(trail []audit.Entry) error {
		for _, e := range trail {
			if e.Action == "claim" {
				return core.Errorf(core.CodeConflict, "claimed at %d", e.Seq)
			}
		}
		return nil
	}
	var second []audit.Entry
	secondErr := make(chan error, 1)
	first, err := l.AppendIf(ctx, "alice", "claim", "t-1", "L1", nil, func(trail []audit.Entry) error {
		go func() {
			_, err := l.AppendIf(ctx, "bob", "claim", "t-1", "L1", nil, func(trail []audit.Entry) error {
				second = trail
				return claim(trail)
			})
			secondErr <- err
		}()
		for range 1000 {
			runtime.Gosched() // let the second call run as far as it can
		}
		return claim(trail)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-secondErr; core.CodeOf(err) != core.CodeConflict {
		t.Fatalf("second claim: %v", err)
	}
	if len(second) != 1 || second[0].Seq != first.Seq {
		t.Fatalf("the second check saw %+v, not the first claim", second)
	}
	if es, err := l.List(ctx, 0, 0, "t-1"); err != nil || len(es) != 1 {
		t.Fatalf("trail %v %+v", err, es)
	}
}

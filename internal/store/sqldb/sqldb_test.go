package sqldb

import (
	"strings"
	"testing"
)

// Statements are written once, with SQLite's placeholders, and rebound for
// PostgreSQL. A placeholder Rebind misses, or one it invents inside a string
// literal or a comment, binds the wrong argument on PostgreSQL only — so
// Rebind must agree with SQLite's own reading of the statement.
func TestRebind(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"empty", "", ""},
		{"no placeholders", "SELECT 1 FROM t", "SELECT 1 FROM t"},
		{"bare in order", "INSERT INTO t(a,b,c) VALUES (?,?,?)", "INSERT INTO t(a,b,c) VALUES ($1,$2,$3)"},
		{"numbered", "SELECT * FROM t WHERE (?1='' OR a=?1) LIMIT ?2", "SELECT * FROM t WHERE ($1='' OR a=$1) LIMIT $2"},
		{"numbered out of order", "?2 ?1 ?10", "$2 $1 $10"},
		// SQLite numbers a bare "?" one above the largest number assigned
		// so far, not by counting bare ones.
		{"bare after numbered", "?2, ?", "$2, $3"},
		{"bare numbered bare", "?, ?5, ?", "$1, $5, $6"},
		{"bare after lower numbered", "?, ?, ?1, ?", "$1, $2, $1, $3"},
		{"placeholder at the end", "a=?", "a=$1"},
		{"placeholder alone", "?", "$1"},
		{"adjacent", "??", "$1$2"},
		{"single-quoted", "SELECT '?' , ?", "SELECT '?' , $1"},
		{"double-quoted identifier", `SELECT "a?b" FROM t WHERE x=?`, `SELECT "a?b" FROM t WHERE x=$1`},
		{"doubled single quote", "SELECT 'it''s ?', ?", "SELECT 'it''s ?', $1"},
		{"doubled double quote", `SELECT "a""?" , ?`, `SELECT "a""?" , $1`},
		{"quote pair that is empty", "SELECT '', ?", "SELECT '', $1"},
		{"quote of the other kind inside", `SELECT '"?', "'?", ?`, `SELECT '"?', "'?", $1`},
		{"numbered in quotes", "SELECT '?1', ?1", "SELECT '?1', $1"},
		{"line comment", "SELECT ? -- where a=?\nAND b=?", "SELECT $1 -- where a=?\nAND b=$2"},
		{"line comment to the end", "SELECT ? -- ?", "SELECT $1 -- ?"},
		{"block comment", "SELECT /* ? */ ?", "SELECT /* ? */ $1"},
		{"block comment over lines", "SELECT ? /* a\n? ' */ , ?", "SELECT $1 /* a\n? ' */ , $2"},
		{"unterminated block comment", "SELECT ? /* ?", "SELECT $1 /* ?"},
		{"quote inside comment", "-- it's ?\nSELECT ?", "-- it's ?\nSELECT $1"},
		{"single minus is not a comment", "SELECT 1-? , ?", "SELECT 1-$1 , $2"},
		{"single slash is not a comment", "SELECT 4/?*?", "SELECT 4/$1*$2"},
		{"unterminated quote", "SELECT ?, 'abc ?", "SELECT $1, 'abc ?"},
		{"unterminated after doubled", "SELECT 'a''", "SELECT 'a''"},
		{"lone quote", "'", "'"},
		{"multi-byte text kept", "SELECT 'é?' , ? -- ü?", "SELECT 'é?' , $1 -- ü?"},
		{"replace() as in the tamper tests", `UPDATE t SET j = replace(j, '"a":?', '"a":1') WHERE id=?`, `UPDATE t SET j = replace(j, '"a":?', '"a":1') WHERE id=$1`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Rebind(c.in); got != c.want {
				t.Fatalf("Rebind(%q)\n got %q\nwant %q", c.in, got, c.want)
			}
		})
	}
}

// TestDBRebindDialect: a DB rewrites only for a numbered dialect, and its
// cached rewrite is Rebind's.
func TestDBRebindDialect(t *testing.T) {
	q := "SELECT ? FROM t WHERE a='?' AND b=?2"
	lite := New(nil, nil, &Dialect{Name: "test-lite"})
	if got := lite.Rebind(q); got != q {
		t.Fatalf("sqlite-style dialect rewrote %q to %q", q, got)
	}
	pg := New(nil, nil, &Dialect{Name: "test-pg", Numbered: true})
	for range 2 { // the second call is served from the cache
		if got, want := pg.Rebind(q), "SELECT $1 FROM t WHERE a='?' AND b=$2"; got != want {
			t.Fatalf("numbered dialect: got %q, want %q", got, want)
		}
	}
}

// outside calls fn(i) for each byte of q that is statement text — not
// inside a quoted string or identifier, not inside a comment — as SQLite
// reads it. It is written as a state machine, independently of Rebind's
// scanner, so the fuzz target compares two readings of the statement.
func outside(q string, fn func(i int)) {
	const (
		text = iota
		single
		double
		line
		block
	)
	st := text
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch st {
		case text:
			switch {
			case c == '\'':
				st = single
			case c == '"':
				st = double
			case c == '-' && i+1 < len(q) && q[i+1] == '-':
				st, i = line, i+1
			case c == '/' && i+1 < len(q) && q[i+1] == '*':
				st, i = block, i+1
			default:
				fn(i)
			}
		case single, double:
			// A doubled quote is one quote character of the text: it
			// closes and reopens, which leaves the state where it was.
			if (st == single && c == '\'') || (st == double && c == '"') {
				st = text
			}
		case line:
			if c == '\n' {
				st = text
				fn(i)
			}
		case block:
			if c == '*' && i+1 < len(q) && q[i+1] == '/' {
				st, i = text, i+1
			}
		}
	}
}

// placeholders counts the "?" of q outside quotes and comments.
func placeholders(q string) int {
	n := 0
	outside(q, func(i int) {
		if q[i] == '?' {
			n++
		}
	})
	return n
}

// strip removes each placeholder token — mark ('?' or '$') and the digits
// after it — that is statement text.
func strip(q string, mark byte) string {
	drop := make([]bool, len(q))
	outside(q, func(i int) {
		if q[i] != mark {
			return
		}
		drop[i] = true
		for j := i + 1; j < len(q) && q[j] >= '0' && q[j] <= '9'; j++ {
			drop[j] = true
		}
	})
	var b strings.Builder
	for i := range len(q) {
		if !drop[i] {
			b.WriteByte(q[i])
		}
	}
	return b.String()
}

// FuzzRebind: Rebind never panics; every "?" outside quotes and comments
// becomes exactly one "$" marker and no other "?" or "$" is added or lost;
// everything but the placeholders is unchanged; and rebinding twice is
// rebinding once (nothing is left to rewrite).
func FuzzRebind(f *testing.F) {
	for _, s := range []string{
		"", "?", "??", "?1 ?", "SELECT '?' , ?", `"a""?" ?`, "'it''s' ?", "-- ?\n?", "/* ? */ ?", "'", "'?", "--", "/*", "?99999999999999999999 ?",
		"UPDATE t SET a=replace(a, '\"x\":?', '?') WHERE id=?2 AND b=?",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		out := Rebind(q)
		want := placeholders(q)
		if got := strings.Count(out, "$") - strings.Count(q, "$"); got != want {
			t.Fatalf("Rebind(%q) = %q: %d $ markers added, want %d (the ? outside quotes and comments)", q, out, got, want)
		}
		if got := strings.Count(q, "?") - strings.Count(out, "?"); got != want {
			t.Fatalf("Rebind(%q) = %q: %d ? rewritten, want %d", q, out, got, want)
		}
		if placeholders(out) != 0 {
			t.Fatalf("Rebind(%q) = %q left a placeholder outside quotes", q, out)
		}
		if !strings.Contains(q, "$") {
			if a, b := strip(q, '?'), strip(out, '$'); a != b {
				t.Fatalf("Rebind(%q) = %q changed more than its placeholders:\n%q\n%q", q, out, a, b)
			}
		}
		if again := Rebind(out); again != out {
			t.Fatalf("Rebind not idempotent on %q: %q then %q", q, out, again)
		}
	})
}

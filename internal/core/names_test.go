package core

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCheckIDs(t *testing.T) {
	for _, c := range []struct {
		s          string
		id, nodeOK bool
	}{
		{"line-injection-01", true, true},
		{"Temperatur Zone 1 (°C)", true, true},
		{"flow m3/h", false, true},
		{"", false, false},
		{"..", false, true},
		{".", false, true},
		{"../etc", false, true},
		{`a\b`, false, true},
		{" lead", false, false},
		{"trail ", false, false},
		{"a\x00b", false, false},
		{"a\nb", false, false},
		{"a\u0085b", false, false},
		{"erin\u200b", false, false},
		{"\ufeffbom", false, false},
		{"rtl\u202eabc", false, false},
		{"vs\ufe0f", false, false},
		{"hangul\u3164filler", false, false},
		{string([]byte{0xff, 'a'}), false, false},
		{strings.Repeat("x", MaxIDBytes), true, true},
		{strings.Repeat("x", MaxIDBytes+1), false, true},
		{strings.Repeat("x", MaxNodeIDBytes+1), false, false},
	} {
		if got := CheckID("run", c.s) == nil; got != c.id {
			t.Errorf("CheckID(%q) ok=%v, want %v", c.s, got, c.id)
		}
		if got := CheckNodeID("node", c.s) == nil; got != c.nodeOK {
			t.Errorf("CheckNodeID(%q) ok=%v, want %v", c.s, got, c.nodeOK)
		}
	}
	err := CheckID("run", "a\x00b")
	if e, ok := err.(*Error); !ok || e.Field != "run" || e.Code != CodeInvalidArgument {
		t.Fatalf("error %#v", err)
	}
}

func TestCheckState(t *testing.T) {
	for in, want := range map[string]string{"": StateOK, "OK": StateOK, "ok": StateOK, "bad": "bad", "Bad_NodeId.x-1": "Bad_NodeId.x-1"} {
		if got, err := CheckState("state", in); err != nil || got != want {
			t.Errorf("CheckState(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"<b>", "a b", "bäd", strings.Repeat("x", MaxStateBytes+1), "x\x00"} {
		if _, err := CheckState("state", in); err == nil {
			t.Errorf("CheckState(%q) accepted", in)
		}
	}
}

func TestCheckTs(t *testing.T) {
	for ts, ok := range map[int64]bool{0: true, MinTsMs: true, MaxTsMs: true, MinTsMs - 1: false, MaxTsMs + 1: false, -1 << 63: false, 1<<63 - 1: false} {
		if got := CheckTs("ts", ts) == nil; got != ok {
			t.Errorf("CheckTs(%d) ok=%v", ts, got)
		}
	}
}

// An accepted name never holds an invisible rune, whatever the input.
func FuzzCheckNodeID(f *testing.F) {
	for _, s := range []string{"a", "erin\u200b", "a\x00", "flow m3/h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if CheckNodeID("node", s) != nil {
			return
		}
		if !utf8.ValidString(s) || len(s) > MaxNodeIDBytes {
			t.Fatalf("accepted %q", s)
		}
		for _, r := range s {
			if Invisible(r) {
				t.Fatalf("accepted %q with U+%04X", s, r)
			}
		}
	})
}

package contract

import (
	"encoding/json"
	"math"
	"testing"
)

func posInf() float64 { return math.Inf(1) }

// FuzzParseScene: ParseScene never panics; a scene it accepts hashes, and
// re-encoding and re-parsing it keeps the hash and validity.
func FuzzParseScene(f *testing.F) {
	b, _ := json.Marshal(DefaultInjectionScene())
	f.Add(b)
	s := DefaultInjectionScene()
	h, _ := s.Hash()
	_ = s.Freeze("bob", h, t0)
	b, _ = json.Marshal(s)
	f.Add(b)
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"controls":[{"id":"a","role":"control","min":1e308,"max":-1e308,"maxStep":1e-320}]}`))
	f.Add([]byte(`{"constraints":[{"id":"x","kind":"custom","expression":"a<b"}],"writePolicy":{"maxDeltaPerAction":{"a":-0}}}`))
	f.Add([]byte(`{"schemaVersion":1,"status":"frozen","frozenAt":"0001-01-01T00:00:00Z"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseScene(data)
		if err != nil {
			if ProblemsOf(err) == nil {
				t.Fatalf("error without problems: %v", err)
			}
			return
		}
		h1, err := s.Hash()
		if err != nil {
			t.Fatalf("valid scene does not hash: %v", err)
		}
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("valid scene does not marshal: %v", err)
		}
		s2, err := ParseScene(b)
		if err != nil {
			t.Fatalf("re-parse of a valid scene: %v\n%s", err, b)
		}
		if h2, _ := s2.Hash(); h2 != h1 {
			t.Fatalf("hash changed by a round trip")
		}
		_ = s.CheckMutable()
		_, _ = s.NextVersion()
	})
}

// FuzzParseSceneFile: a scene file (YAML or JSON) never panics the reader;
// an accepted file re-marshals to a file that is accepted with the same
// scene hash.
func FuzzParseSceneFile(f *testing.F) {
	b, _ := MarshalSceneFile(&SceneFile{Scene: DefaultInjectionScene(), Objective: DefaultInjectionObjective()}, []string{"x"})
	f.Add(b)
	j, _ := json.Marshal(DefaultInjectionScene())
	f.Add(j)
	f.Add([]byte("scene: &a {}\nobjective: *a\n"))
	f.Add([]byte("scene: {controls: [{id: 1e999}]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSceneFile(data)
		if err != nil {
			if ProblemsOf(err) == nil {
				t.Fatalf("error without problems: %v", err)
			}
			return
		}
		out, err := MarshalSceneFile(s, nil)
		if err != nil {
			t.Fatalf("an accepted file does not marshal: %v", err)
		}
		s2, err := ParseSceneFile(out)
		if err != nil {
			t.Fatalf("re-read: %v\n%s", err, out)
		}
		h1, _ := s.Scene.Hash()
		h2, _ := s2.Scene.Hash()
		if h1 != h2 {
			t.Fatalf("hash changed %s → %s", h1, h2)
		}
	})
}

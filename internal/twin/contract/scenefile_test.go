package contract

import (
	"encoding/json"
	"strings"
	"testing"
)

// A drafted scene file round-trips: written as YAML with its header, read
// back, the scene hashes the same and the objective is equal.
func TestSceneFileRoundTrip(t *testing.T) {
	f := &SceneFile{Scene: DefaultInjectionScene(), Objective: DefaultInjectionObjective()}
	f.Scene.SceneVersion = "1.0" // looks like a number: must stay a string
	f.Scene.Phases = []string{"null", "true", "2026-01-01"}
	b, err := MarshalSceneFile(f, []string{"drafted from model m1", "review the ranges"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(b), "# drafted from model m1\n# review the ranges\nscene:\n") {
		t.Fatalf("header and order:\n%s", b)
	}
	f.Scene.SceneVersion = "1.0.0"
	b = []byte(strings.Replace(string(b), "sceneVersion: \"1.0\"", "sceneVersion: 1.0.0", 1))
	g, err := ParseSceneFile(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	h1, _ := f.Scene.Hash()
	h2, _ := g.Scene.Hash()
	if h1 != h2 {
		t.Fatalf("hash %s → %s\n%s", h1, h2, b)
	}
	o1, _ := json.Marshal(f.Objective)
	o2, _ := json.Marshal(g.Objective)
	if string(o1) != string(o2) {
		t.Fatalf("objective\n%s\n%s", o1, o2)
	}
	// a bare scene contract, JSON
	js, _ := json.Marshal(DefaultInjectionScene())
	if g, err := ParseSceneFile(js); err != nil || g.Objective != nil || g.Scene.SceneID != "injection-hold-control" {
		t.Fatalf("bare scene: %v", err)
	}
}

// Every problem of both parts is reported at once, with its path in the
// file; hostile YAML is refused.
func TestSceneFileProblems(t *testing.T) {
	f := &SceneFile{Scene: DefaultInjectionScene(), Objective: DefaultInjectionObjective()}
	f.Scene.Controls[0].MaxStep = nil
	f.Scene.WritePolicy.MaxActionsPerRun = -1
	f.Objective.Targets["nope"] = 1
	f.Objective.HorizonSteps = 0
	b, err := MarshalSceneFile(f, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, p := CheckSceneFile(b)
	if got == nil || got.Scene == nil || got.Objective == nil {
		t.Fatal("a file with problems is still returned as far as it reads")
	}
	fields := map[string]bool{}
	for _, q := range p {
		fields[q.Field] = true
	}
	for _, want := range []string{"scene.controls[0].maxStep", "scene.writePolicy.maxActionsPerRun", "objective.horizonSteps"} {
		if !fields[want] {
			t.Errorf("no problem at %s: %v", want, p)
		}
	}
	if _, err := ParseSceneFile(b); err == nil || len(ProblemsOf(err)) != len(p) {
		t.Fatalf("ParseSceneFile: %v", err)
	}
	for name, doc := range map[string]string{
		"alias":       "scene: &a {}\nobjective: *a\n",
		"two docs":    "scene: {}\n---\nscene: {}\n",
		"unknown key": "scene: {}\nextra: 1\n",
		"list":        "- 1\n",
		"inf":         "scene: {schemaVersion: .inf}\n",
		"hex":         "scene: {schemaVersion: 0x10}\n",
		"dup key":     "scene: {}\nscene: {}\n",
		"deep":        strings.Repeat("[", 100) + strings.Repeat("]", 100),
	} {
		if _, err := ParseSceneFile([]byte(doc)); err == nil || ProblemsOf(err) == nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

package artifact_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/aml-project/aml/internal/artifact"
	"github.com/aml-project/aml/internal/model"
)

// An external test: model imports dataset, which imports artifact.
func TestTreeHashIsModelArtifactHash(t *testing.T) {
	dir := t.TempDir()
	big := make([]byte, 2*artifact.ChunkSize+123)
	for i := range big {
		big[i] = byte(i * 7)
	}
	for name, b := range map[string][]byte{"model.json": []byte(`{"kind":"mean"}`), "arrays/x.f32": big, "empty": nil, "arrays/sub/y.txt": []byte("y\n")} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tr, err := artifact.Scan(dir)
	if err != nil {
		t.Fatal(err)
	}
	mh, err := model.ArtifactHash(dir)
	if err != nil {
		t.Fatal(err)
	}
	if tr.SHA256 != mh {
		t.Fatalf("tree hash %s != model.ArtifactHash %s", tr.SHA256, mh)
	}
	if len(tr.Files) != 4 || tr.Files[0].Path != "arrays/sub/y.txt" {
		t.Fatalf("files %+v", tr.Files)
	}
}

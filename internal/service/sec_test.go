package service

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/aml-project/aml/internal/jobs"
)

// TestSec12_DataDirAbsolute: a relative --data is made absolute when the
// process opens it, so job directories handed to trainers are absolute.
func TestSec12_DataDirAbsolute(t *testing.T) {
	parent := t.TempDir()
	t.Chdir(parent)
	p := New(Config{DataDir: "rel-data", Trainers: jobs.NewTrainers()})
	defer func() { _ = p.Close() }()
	if got, want := p.Opened().DataDir, filepath.Join(parent, "rel-data"); got != want {
		t.Fatalf("DataDir %q, want %q", got, want)
	}
}

// TestSec12_PrivateDir: the data dir of a PostgreSQL deployment (key, job
// folders, artifacts) is made owner-only too.
func TestSec12_PrivateDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := privateDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := privateDir(dir); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(dir); st.Mode().Perm() != 0o700 {
		t.Fatalf("mode %o", st.Mode().Perm())
	}
}

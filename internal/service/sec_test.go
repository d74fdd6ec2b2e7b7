package service

import (
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

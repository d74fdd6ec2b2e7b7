//go:build unix

package app

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/auth"
)

// TestSec8_JobLogsNoFollow: the job's log is read without following links
// — neither a logs folder nor a log part the trainer replaced by a link is
// served — and a FIFO in its place does not block the read.
func TestSec8_JobLogsNoFollow(t *testing.T) {
	a, _, dir, ds := jobApp(t)
	ctx := context.Background()
	local := Principal{Name: "ops", Role: auth.RoleAdmin, Local: true}
	j, err := a.JobSubmit(ctx, local, JobSubmitRequest{DatasetID: ds, Trainer: "exec:/bin/true"})
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	secret := filepath.Join(outside, "trainer.log")
	if err := os.WriteFile(secret, []byte("SECRET-KEY-MATERIAL\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	jd := filepath.Join(dir, "jobs", j.ID)
	if err := os.MkdirAll(jd, 0o700); err != nil {
		t.Fatal(err)
	}
	read := func() JobLogsResponse {
		t.Helper()
		type res struct {
			r   JobLogsResponse
			err error
		}
		ch := make(chan res, 1)
		go func() { r, err := a.JobLogs(ctx, viewer, JobLogsRequest{ID: j.ID}); ch <- res{r, err} }()
		select {
		case r := <-ch:
			if r.err != nil {
				t.Fatal(r.err)
			}
			if strings.Contains(r.r.Text, "SECRET") {
				t.Fatalf("the log served a file through a link: %q", r.r.Text)
			}
			return r.r
		case <-time.After(10 * time.Second):
			t.Fatal("reading the log blocked")
		}
		return JobLogsResponse{}
	}
	// logs/ itself a link to another folder.
	if err := os.Symlink(outside, filepath.Join(jd, "logs")); err != nil {
		t.Fatal(err)
	}
	read()
	// A real logs/ whose parts are a link and a FIFO.
	if err := os.Remove(filepath.Join(jd, "logs")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(jd, "logs"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(jd, "logs", "trainer.log"), []byte("hello\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(jd, "logs", "trainer.log.2")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(jd, "logs", "trainer.log.1"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := read(); r.Text != "hello\n" {
		t.Fatalf("log %q", r.Text)
	}
}

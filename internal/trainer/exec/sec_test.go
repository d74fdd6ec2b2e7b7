//go:build unix

package extrun

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSec8_LogFilesNotFollowed: a trainer that replaces the head of its
// rotated log with a symbolic link to a file outside its job directory, or
// with a FIFO nobody reads, neither makes the runner write to that file nor
// blocks it: the runner opens log files without following links and
// without blocking, regular files only.
func TestSec8_LogFilesNotFollowed(t *testing.T) {
	for _, kind := range []string{"symlink", "fifo"} {
		t.Run(kind, func(t *testing.T) {
			victim := filepath.Join(jobDir(t), "aml.db")
			if err := os.WriteFile(victim, []byte("KEEP"), 0o600); err != nil {
				t.Fatal(err)
			}
			plant := `ln -s "$VICTIM" logs/trainer.log.5`
			if kind == "fifo" {
				plant = `mkfifo logs/trainer.log.5`
			}
			// Enough 40-byte lines for 6 files of 64 bytes, then the head
			// (trainer.log.5) is replaced, then more rotations.
			script := `
i=0; while [ $i -lt 12 ]; do echo "line $i xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"; i=$((i+1)); done
n=0; while [ ! -e logs/trainer.log.5 ] && [ $n -lt 500 ]; do sleep 0.01; n=$((n+1)); done
rm -f logs/trainer.log.5 && ` + plant + `
i=0; while [ $i -lt 12 ]; do echo "more $i xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"; i=$((i+1)); done
echo '##AML {"type":"done"}'
`
			done := make(chan struct{})
			var res Result
			var err error
			go func() {
				defer close(done)
				res, err = Run(context.Background(), Spec{JobDir: jobDir(t), Command: []string{"/bin/sh", "-c", script}, LogMaxBytes: 64,
					Env: map[string]string{"VICTIM": victim}}, nil)
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("the runner blocked on the trainer's log")
			}
			if err != nil || !res.Done {
				t.Fatalf("%v %+v", err, res)
			}
			if b, _ := os.ReadFile(victim); string(b) != "KEEP" {
				t.Fatalf("the runner wrote through the link: %q", b)
			}
			if !strings.Contains(res.LastError, "log") {
				t.Errorf("the log failure is not reported: %q", res.LastError)
			}
		})
	}
}

// TestSec8_PidFileOutsideJobDir: the pid recovery kills lies outside the
// job directory the trainer may write to.
func TestSec8_PidFileOutsideJobDir(t *testing.T) {
	dir := jobDir(t)
	if rel, err := filepath.Rel(dir, PidFile(dir)); err != nil || !strings.HasPrefix(rel, "..") {
		t.Fatalf("pid file %s is inside the job directory %s", PidFile(dir), dir)
	}
}

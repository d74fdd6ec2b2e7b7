//go:build unix

package safefile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestSec1_ReadFileLimits: a user-named file is read only if it is a
// regular file within the limit; a FIFO or a device is refused without
// blocking, and ReadFileNoFollow refuses a final link.
func TestSec1_ReadFileLimits(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	small := filepath.Join(dir, "small")
	if err := os.WriteFile(small, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(small, link); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, p := range []string{fifo, "/dev/zero", "/dev/null", dir} {
			if _, err := ReadFile(p, 1<<20); !errors.Is(err, ErrNotRegular) && p != dir {
				t.Errorf("%s: %v, want ErrNotRegular", p, err)
			} else if err == nil {
				t.Errorf("%s: read", p)
			}
		}
		if _, err := ReadFile(small, 4); !errors.Is(err, ErrTooLarge) {
			t.Errorf("over the limit: %v", err)
		}
		if b, err := ReadFile(link, 5); err != nil || string(b) != "hello" {
			t.Errorf("link: %q %v", b, err)
		}
		if _, err := ReadFileNoFollow(link, 5); err == nil {
			t.Error("ReadFileNoFollow followed a link")
		}
		f, err := OpenFile(fifo, os.O_WRONLY, 0)
		if err == nil {
			_ = f.Close()
			t.Error("opened a FIFO for writing")
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("blocked")
	}
}

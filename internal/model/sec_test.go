//go:build unix

package model

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestSec8_ModelJSONRegularOnly: the trainer writes the artifact
// directory; a FIFO in place of model.json does not block the server
// evaluating it, and a link to another file is not followed.
func TestSec8_ModelJSONRegularOnly(t *testing.T) {
	fifoDir, linkDir := t.TempDir(), t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(fifoDir, FileName), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(t.TempDir(), "secret.json")
	if err := os.WriteFile(secret, []byte(`{"format":"aml.mean/1"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(linkDir, FileName)); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{fifoDir, linkDir} {
		done := make(chan error, 1)
		go func() { _, err := ReadFormat(dir); done <- err }()
		select {
		case err := <-done:
			if !IsModelInvalid(err) {
				t.Errorf("%s: %v, want a model-invalid refusal", dir, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: reading model.json blocked", dir)
		}
	}
}

package trainers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/trainer"
)

// TestSec1_PhysicsFileReads: the physics file hybrid_residual@1 reads
// (direct callers of the runner only; requests name stored models) is a
// regular file within the size limit: /dev/zero, a FIFO nobody writes and
// an oversized file are refused at once, and a file that is not a physics
// model is named in the error, its content never quoted.
func TestSec1_PhysicsFileReads(t *testing.T) {
	b := hybSynBundle(t, 4, 2)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.aml")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.aml")
	if err := os.WriteFile(big, make([]byte, 2<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(dir, "secret.aml")
	if err := os.WriteFile(secret, []byte("root:x:0:0:/root:/bin/sh\nSECRET_TOKEN_4711=hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ path, want string }{
		{"/dev/zero", "not a regular file"},
		{fifo, "not a regular file"},
		{big, "too large"},
		{secret, "not a valid physics model"},
	} {
		tc := &trainer.TrainContext{ArtifactsDir: t.TempDir(), Dataset: b, Params: json.RawMessage(`{"physics":"` + c.path + `"}`), Seed: 1}
		done := make(chan error, 1)
		go func() { done <- (HybridResidual{}).Train(context.Background(), tc) }()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: got %v, want an error containing %q", c.path, err, c.want)
			}
			if err != nil && strings.Contains(err.Error(), "SECRET_TOKEN") {
				t.Errorf("%s: the error quotes the file: %v", c.path, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: the trainer blocked reading the file", c.path)
		}
	}
}

// TestSec1_PhysicsByID: a stored physics model is read through
// TrainContext.Physics and its hash checked against the pinned one.
func TestSec1_PhysicsByID(t *testing.T) {
	b := hybSynBundle(t, 4, 2)
	src, err := os.ReadFile(hybridPhysics(t, "cascaded_tanks.aml"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(src)
	h := hex.EncodeToString(sum[:])
	id := core.PhysicsIDPrefix + h[:24]
	store := func(_ context.Context, got string) (core.PhysicsModel, error) {
		if got != id {
			return core.PhysicsModel{}, core.Errorf(core.CodeNotFound, "physics model %q not found", got)
		}
		return core.PhysicsModel{ID: id, SHA256: h, FileName: "cascaded_tanks.aml", Source: string(src)}, nil
	}
	run := func(params string) error {
		tc := &trainer.TrainContext{ArtifactsDir: t.TempDir(), Dataset: b, Params: json.RawMessage(params), Seed: 1, Physics: store, Progress: func(float64, string) {}}
		return (HybridResidual{}).Train(context.Background(), tc)
	}
	if err := run(`{"physics":"` + id + `","physicsSha256":"` + h + `","ensemble":0,"starts":1,"maxIter":3}`); err != nil {
		t.Fatalf("stored model: %v", err)
	}
	if err := run(`{"physics":"` + id + `","physicsSha256":"` + strings.Repeat("0", 64) + `","ensemble":0}`); err == nil || !strings.Contains(err.Error(), "hash") {
		t.Fatalf("wrong pinned hash: %v", err)
	}
	if err := run(`{"physics":"phys-000000000000000000000000"}`); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("unknown id: %v", err)
	}
}

// TestSec1_LinearAcceptPinnedHash: job.submit pins physicsSha256 beside a
// physics id, which the linear trainers accept and ignore like physics.
func TestSec1_LinearAcceptPinnedHash(t *testing.T) {
	raw := json.RawMessage(`{"physics":"phys-000000000000000000000000","physicsSha256":"` + strings.Repeat("0", 64) + `"}`)
	var a arxParams
	if err := linDecodeParams(raw, &a); err != nil {
		t.Fatalf("one_step: %v", err)
	}
	var s ssParams
	if err := linDecodeParams(raw, &s); err != nil {
		t.Fatalf("linear_state_space: %v", err)
	}
}

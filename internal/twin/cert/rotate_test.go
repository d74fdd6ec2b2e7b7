package cert

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestRotateKey: a failed registration leaves cert-key.json as it was; a
// successful one installs the new key (0600) and keeps the old one in
// keys/, which still loads.
func TestRotateKey(t *testing.T) {
	dir := t.TempDir()
	k0, err := LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	boom := errors.New("database refused")
	if _, _, err := RotateKey(dir, now, func(old, next *KeyPair) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("failed registration: %v", err)
	}
	if k, err := LoadKey(dir); err != nil || k.ID != k0.ID {
		t.Fatalf("key after a failed rotation: %v %v", k, err)
	}
	var seen [2]string
	old, next, err := RotateKey(dir, now, func(old, next *KeyPair) error { seen = [2]string{old.ID, next.ID}; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if old.ID != k0.ID || next.ID == k0.ID || seen != [2]string{old.ID, next.ID} {
		t.Fatalf("old %s next %s seen %v", old.ID, next.ID, seen)
	}
	cur, err := LoadKey(dir)
	if err != nil || cur.ID != next.ID {
		t.Fatalf("installed key %v %v", cur, err)
	}
	for _, id := range []string{old.ID, next.ID} {
		p := ArchivedKeyPath(dir, id)
		k, err := loadKey(p)
		if err != nil || k.ID != id {
			t.Fatalf("kept key %s: %v %v", p, k, err)
		}
		if st, _ := os.Stat(p); runtime.GOOS != "windows" && st.Mode().Perm() != 0o600 {
			t.Fatalf("%s mode %04o", p, st.Mode().Perm())
		}
	}
	if st, _ := os.Stat(filepath.Join(dir, KeyFileName)); runtime.GOOS != "windows" && st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %04o", st.Mode().Perm())
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".cert-key-*.tmp"))
	left2, _ := filepath.Glob(filepath.Join(dir, KeysDirName, ".cert-key-*.tmp"))
	if len(left)+len(left2) != 0 {
		t.Fatalf("temporary files left: %v %v", left, left2)
	}
}

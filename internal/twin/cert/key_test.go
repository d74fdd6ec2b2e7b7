package cert

import (
	"bytes"
	"crypto/ed25519"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

func TestKeyCreatedOnceAndReloaded(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	k1, err := LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, KeyFileName)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "windows" {
		if st.Mode().Perm() != 0o600 {
			t.Fatalf("key file mode %04o, want 0600", st.Mode().Perm())
		}
		if dst, _ := os.Stat(dir); dst.Mode().Perm() != 0o700 {
			t.Fatalf("key dir mode %04o, want 0700", dst.Mode().Perm())
		}
	}
	before, _ := os.ReadFile(path)
	k2, err := LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Fatal("reload rewrote the key file")
	}
	if k1.ID != k2.ID || !k1.Public.Equal(k2.Public) || !k1.private.Equal(k2.private) {
		t.Fatal("reloaded key differs")
	}
	if len(k1.ID) != 16 || k1.ID != KeyID(k1.Public) {
		t.Fatalf("key id %q", k1.ID)
	}
	if bytes.Contains(after, []byte(k1.private)) {
		t.Fatal("raw private key bytes in file")
	}
	// No temporary files are left behind.
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("dir holds %d entries", len(ents))
	}
}

func TestKeyConcurrentCreateAgrees(t *testing.T) {
	dir := t.TempDir()
	const n = 16
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			k, err := LoadOrCreateKey(dir)
			errs[i] = err
			if err == nil {
				ids[i] = k.ID
			}
		}(i)
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("goroutine %d got key %s, goroutine 0 %s", i, ids[i], ids[0])
		}
	}
}

func TestKeyFileProblemsAreNotRepaired(t *testing.T) {
	dir := t.TempDir()
	k, err := LoadOrCreateKey(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, KeyFileName)
	good, _ := os.ReadFile(path)

	if runtime.GOOS != "windows" {
		if err := os.Chmod(path, 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadOrCreateKey(dir); err == nil {
			t.Fatal("loaded a world-readable key")
		}
		if err := os.Chmod(path, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for name, data := range map[string][]byte{
		"garbage":   []byte("not json"),
		"wrong pub": bytes.Replace(good, []byte(`"keyId": "`+k.ID), []byte(`"keyId": "0000000000000000`), 1),
		"empty":     {},
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadOrCreateKey(dir); err == nil {
			t.Fatalf("%s: loaded", name)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, data) {
			t.Fatalf("%s: key file was replaced", name)
		}
	}
}

func TestPublicPEM(t *testing.T) {
	k, err := GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	p := k.PublicPEM()
	if !bytes.HasPrefix(p, []byte("-----BEGIN PUBLIC KEY-----")) {
		t.Fatalf("%s", p)
	}
	pub, err := ParsePublicPEM(p)
	if err != nil {
		t.Fatal(err)
	}
	if !pub.Equal(k.Public) || KeyID(pub) != k.ID {
		t.Fatal("PEM round trip")
	}
	if _, err := ParsePublicPEM([]byte("nope")); err == nil {
		t.Fatal("parsed garbage")
	}
	var _ ed25519.PublicKey = pub
}

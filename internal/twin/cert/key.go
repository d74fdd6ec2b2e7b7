package cert

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
)

// KeyFileName is the name of the signing key file inside the key
// directory.
const KeyFileName = "cert-key.json"

// keyFileVersion is the version of the key file format.
const keyFileVersion = 1

// maxKeyFile bounds the key file read.
const maxKeyFile = 64 << 10

// KeyPair is the certificate signing key. The private half never leaves
// the package: it is not exported, not marshalled and only written to the
// key file.
type KeyPair struct {
	// ID is the first 16 hex characters of sha256(Public).
	ID      string
	Public  ed25519.PublicKey
	private ed25519.PrivateKey
}

// keyFile is the JSON form of <dir>/cert-key.json.
type keyFile struct {
	Version    int       `json:"version"`
	Algorithm  string    `json:"algorithm"` // "ed25519"
	KeyID      string    `json:"keyId"`
	PublicKey  string    `json:"publicKey"` // base64 of the 32 raw bytes
	PrivateKey string    `json:"privateKeySeed"`
	CreatedAt  time.Time `json:"createdAt"`
}

// KeyID returns the id of a public key: the first 16 hex characters of its
// sha256.
func KeyID(pub ed25519.PublicKey) string { return contract.CertKeyID(pub) }

// GenerateKey makes a new key pair from crypto/rand (not stored).
func GenerateKey() (*KeyPair, error) {
	return generateKey(rand.Reader)
}

func generateKey(r io.Reader) (*KeyPair, error) {
	pub, priv, err := ed25519.GenerateKey(r)
	if err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "generate certificate key")
	}
	return &KeyPair{ID: KeyID(pub), Public: pub, private: priv}, nil
}

// LoadOrCreateKey loads the signing key from <dir>/cert-key.json, creating
// dir (0700) and the key at first start. Creation is exclusive and atomic:
// the key is written to a private temporary file (0600), synced, then
// hard-linked to its name, which fails if the file exists — so two
// processes starting together end up with the same key, and a reader
// never sees a half-written file. (On a file system without hard links
// the file is created with O_EXCL instead.)
//
// An existing key is never replaced: a corrupt or inconsistent file, or
// (outside Windows) one readable or writable by group or others, is an
// error and the operator must fix it. Replacing the key would invalidate
// every certificate it signed.
func LoadOrCreateKey(dir string) (*KeyPair, error) {
	path := filepath.Join(dir, KeyFileName)
	k, err := loadKey(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return k, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "create key directory %s", dir)
	}
	k, err = GenerateKey()
	if err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(keyFile{
		Version:    keyFileVersion,
		Algorithm:  "ed25519",
		KeyID:      k.ID,
		PublicKey:  base64.StdEncoding.EncodeToString(k.Public),
		PrivateKey: base64.StdEncoding.EncodeToString(k.private.Seed()),
		CreatedAt:  time.Now().UTC().Truncate(time.Second),
	}, "", "  ")
	if err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "encode certificate key")
	}
	data = append(data, '\n')
	created, err := createExclusive(dir, path, data)
	if err != nil {
		return nil, err
	}
	if !created { // another process won the race: use its key
		return loadKey(path)
	}
	return k, nil
}

// createExclusive writes data to path unless path exists. It reports
// whether it created the file.
func createExclusive(dir, path string, data []byte) (_ bool, err error) {
	tmp, err := os.CreateTemp(dir, ".cert-key-*.tmp") // O_EXCL, mode 0600
	if err != nil {
		return false, core.Wrap(core.CodeInternal, err, "create temporary key file")
	}
	tmpName := tmp.Name()
	defer func() {
		// The temporary file is a second copy of the private key: one that
		// stays behind is an error (unless an earlier one is returned).
		if rerr := os.Remove(tmpName); rerr != nil && err == nil {
			err = core.Wrap(core.CodeInternal, rerr, "remove temporary key file %s", tmpName)
		}
	}()
	err = writePrivate(tmp, data)
	if err != nil {
		return false, core.Wrap(core.CodeInternal, err, "write temporary key file")
	}
	err = os.Link(tmpName, path)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrExist):
		return false, nil
	default:
		// No hard links here: fall back to an exclusive create.
		f, oerr := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(oerr, fs.ErrExist) {
			return false, nil
		}
		if oerr != nil {
			return false, core.Wrap(core.CodeInternal, oerr, "create key file %s", path)
		}
		_, werr := f.Write(data)
		if werr == nil {
			werr = f.Sync()
		}
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			_ = os.Remove(path)
			return false, core.Wrap(core.CodeInternal, werr, "write key file %s", path)
		}
	}
	syncDir(dir)
	return true, nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// LoadKey loads the signing key from <dir>/cert-key.json without ever
// creating one (an error wrapping fs.ErrNotExist when there is none): for
// a process that only verifies.
func LoadKey(dir string) (*KeyPair, error) { return loadKey(filepath.Join(dir, KeyFileName)) }

// loadKey reads and checks a key file. A missing file is an error
// wrapping fs.ErrNotExist.
func loadKey(path string) (*KeyPair, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, core.Wrap(core.CodeInternal, err, "open certificate key")
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "stat certificate key")
	}
	if !st.Mode().IsRegular() {
		return nil, core.Errorf(core.CodeInternal, "certificate key %s is not a regular file", path)
	}
	if runtime.GOOS != "windows" && st.Mode().Perm()&0o077 != 0 {
		return nil, core.Errorf(core.CodeInternal, "certificate key %s has mode %04o; it must be readable by its owner only (chmod 600 %s)", path, st.Mode().Perm(), path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxKeyFile+1))
	if err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "read certificate key")
	}
	if len(data) > maxKeyFile {
		return nil, core.Errorf(core.CodeInternal, "certificate key %s is larger than %d bytes", path, maxKeyFile)
	}
	bad := func(format string, args ...any) error {
		return core.Errorf(core.CodeInternal, "certificate key %s is unusable (never replaced automatically: restore it from a backup): "+format, append([]any{path}, args...)...)
	}
	var kf keyFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&kf); err != nil {
		return nil, bad("%v", err)
	}
	if kf.Version != keyFileVersion || kf.Algorithm != "ed25519" {
		return nil, bad("version %d algorithm %q, want version %d ed25519", kf.Version, kf.Algorithm, keyFileVersion)
	}
	seed, err := base64.StdEncoding.DecodeString(kf.PrivateKey)
	if err != nil || len(seed) != ed25519.SeedSize {
		return nil, bad("privateKeySeed is not %d base64 bytes", ed25519.SeedSize)
	}
	priv := ed25519.NewKeyFromSeed(seed)
	pub := priv.Public().(ed25519.PublicKey)
	if kf.PublicKey != base64.StdEncoding.EncodeToString(pub) {
		return nil, bad("publicKey does not belong to the private key")
	}
	if kf.KeyID != KeyID(pub) {
		return nil, bad("keyId %q is not the id %q of the public key", kf.KeyID, KeyID(pub))
	}
	return &KeyPair{ID: kf.KeyID, Public: pub, private: priv}, nil
}

// PublicPEM returns the public key as a PEM "PUBLIC KEY" block (PKIX,
// RFC 8410), for verifiers outside AML.
func (k *KeyPair) PublicPEM() []byte {
	der, err := x509.MarshalPKIXPublicKey(k.Public)
	if err != nil { // cannot happen for a valid ed25519 key
		return nil
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// ParsePublicPEM parses a PEM "PUBLIC KEY" block holding an Ed25519 key.
func ParsePublicPEM(data []byte) (ed25519.PublicKey, error) {
	b, _ := pem.Decode(data)
	if b == nil || b.Type != "PUBLIC KEY" {
		return nil, core.Errorf(core.CodeInvalidArgument, "no PEM PUBLIC KEY block")
	}
	k, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return nil, core.Wrap(core.CodeInvalidArgument, err, "parse public key")
	}
	pub, ok := k.(ed25519.PublicKey)
	if !ok {
		return nil, core.Errorf(core.CodeInvalidArgument, "public key is %T, not Ed25519", k)
	}
	return pub, nil
}

// sign signs the 32 raw bytes of a hex sha256.
func (k *KeyPair) sign(hexHash string) (string, error) {
	if k == nil || len(k.private) != ed25519.PrivateKeySize {
		return "", core.Errorf(core.CodeInvalidArgument, "no private signing key")
	}
	digest, err := hex.DecodeString(hexHash)
	if err != nil || len(digest) != sha256.Size {
		return "", core.Errorf(core.CodeInternal, "certificate hash %q is not a sha256", hexHash)
	}
	return base64.StdEncoding.EncodeToString(ed25519.Sign(k.private, digest)), nil
}

// SigningKey is the key's id and public half ("" and nil for a nil key):
// with IssueCertificate, what the record store asks of the key it issues
// and registers with (twinstore.CertSigner).
func (k *KeyPair) SigningKey() (id string, pub ed25519.PublicKey) {
	if k == nil {
		return "", nil
	}
	return k.ID, k.Public
}

// SignDigest signs the 32 raw bytes of a hex sha256 with this key
// (base64 Ed25519): the signature of the record store's signed statements
// (approvals, executions) and audit checkpoints.
func (k *KeyPair) SignDigest(hexHash string) (string, error) { return k.sign(hexHash) }

// IssueCertificate is Issue with this key.
func (k *KeyPair) IssueCertificate(in IssueInput, now time.Time, ttl time.Duration) (*contract.RecommendationCertificate, error) {
	return Issue(in, k, now, ttl)
}

// KeysDirName is the folder of the data directory that keeps the key
// files of rotation: keys/cert-key.<keyid>.json, the retired keys and the
// staged new one.
const KeysDirName = "keys"

// ArchivedKeyPath is where RotateKey keeps the key file of id:
// <dir>/keys/cert-key.<id>.json.
func ArchivedKeyPath(dir, id string) string {
	return filepath.Join(dir, KeysDirName, "cert-key."+id+".json")
}

func (k *KeyPair) fileData(now time.Time) ([]byte, error) {
	data, err := json.MarshalIndent(keyFile{
		Version:    keyFileVersion,
		Algorithm:  "ed25519",
		KeyID:      k.ID,
		PublicKey:  base64.StdEncoding.EncodeToString(k.Public),
		PrivateKey: base64.StdEncoding.EncodeToString(k.private.Seed()),
		CreatedAt:  now.UTC().Truncate(time.Second),
	}, "", "  ")
	if err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "encode certificate key")
	}
	return append(data, '\n'), nil
}

// RotateKey replaces the data directory's signing key by a new one. It
// loads the current key (old), generates next, keeps both in
// <dir>/keys (ArchivedKeyPath, 0600; old is never deleted), calls
// register(old, next) — the succession in the database — and only when
// that succeeds installs next as <dir>/cert-key.json: a temporary file
// (0600, synced) renamed over it, so a reader sees the old key or the new,
// never a partial file. If register fails the data directory still signs
// with old. now is the new key file's creation time.
func RotateKey(dir string, now time.Time, register func(old, next *KeyPair) error) (old, next *KeyPair, err error) {
	if old, err = LoadKey(dir); err != nil {
		return nil, nil, err
	}
	if next, err = GenerateKey(); err != nil {
		return nil, nil, err
	}
	kd := filepath.Join(dir, KeysDirName)
	if err := os.MkdirAll(kd, 0o700); err != nil {
		return nil, nil, core.Wrap(core.CodeInternal, err, "create key directory %s", kd)
	}
	// The old key's file is kept (a retired key still proves the
	// succession it signed, and restores the directory if need be).
	oldData, err := os.ReadFile(filepath.Join(dir, KeyFileName))
	if err != nil {
		return nil, nil, core.Wrap(core.CodeInternal, err, "read certificate key")
	}
	if _, err := createExclusive(kd, ArchivedKeyPath(dir, old.ID), oldData); err != nil {
		return nil, nil, err
	}
	newData, err := next.fileData(now)
	if err != nil {
		return nil, nil, err
	}
	if created, err := createExclusive(kd, ArchivedKeyPath(dir, next.ID), newData); err != nil || !created {
		if err == nil {
			err = core.Errorf(core.CodeInternal, "key file %s exists already", ArchivedKeyPath(dir, next.ID))
		}
		return nil, nil, err
	}
	if err := register(old, next); err != nil {
		return nil, nil, err
	}
	if err := replaceFile(dir, filepath.Join(dir, KeyFileName), newData); err != nil {
		return nil, nil, core.Wrap(core.CodeInternal, err, "the new key %s is registered but %s was not replaced: copy %s to %s", next.ID,
			filepath.Join(dir, KeyFileName), ArchivedKeyPath(dir, next.ID), filepath.Join(dir, KeyFileName))
	}
	return old, next, nil
}

// replaceFile writes data to path atomically: a temporary file in dir
// (0600), synced, renamed over path.
func replaceFile(dir, path string, data []byte) (err error) {
	tmp, err := os.CreateTemp(dir, ".cert-key-*.tmp")
	if err != nil {
		return err
	}
	tmpName := tmp.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmpName)
		}
	}()
	err = writePrivate(tmp, data)
	if err != nil {
		return err
	}
	if err = os.Rename(tmpName, path); err != nil {
		return err
	}
	syncDir(dir)
	return nil
}

// writePrivate writes data to the temporary file f (mode 0600), syncs and
// closes it.
func writePrivate(f *os.File, data []byte) error {
	var err error
	if cerr := f.Chmod(0o600); cerr != nil && runtime.GOOS != "windows" {
		err = cerr
	}
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

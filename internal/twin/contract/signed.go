package contract

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"

	"github.com/aml-project/aml/internal/core"
)

// signedDoc is what verifySigned reads of a signed governance document
// (a recommendation certificate, an envelope, a step test): how it names
// itself in errors, its own validation, the key id, hash and signature it
// carries, and the hash of its signed body.
type signedDoc struct {
	// noun names the document in the key and hash errors ("envelope");
	// sigNoun prefixes "signature does not verify" ("envelope ", or ""
	// for a certificate).
	noun, sigNoun          string
	validate               func() error
	keyID, hash, signature string
	bodyHash               func() (string, error)
}

// verifySigned checks that d is well formed, that its hash is the hash of
// its signed body, that its key id names pub and that the signature is
// pub's Ed25519 signature of the 32 hash bytes; every failure is
// AML_CERT_INVALID with the field at fault.
func verifySigned(pub ed25519.PublicKey, d signedDoc) error {
	if len(pub) != ed25519.PublicKeySize {
		return certErr(core.CodeCertInvalid, "keyId", "verification key is not an Ed25519 public key")
	}
	if err := d.validate(); err != nil {
		if ie := core.Invalid(core.CodeCertInvalid, ProblemsOf(err)); ie != nil {
			return ie
		}
		return certErr(core.CodeCertInvalid, "", "%v", err)
	}
	if id := CertKeyID(pub); d.keyID != id {
		return certErr(core.CodeCertInvalid, "keyId", "%s names key %s, verifying with key %s", d.noun, d.keyID, id)
	}
	h, err := d.bodyHash()
	if err != nil {
		return certErr(core.CodeCertInvalid, "certificateHash", "cannot hash the signed body: %v", err)
	}
	if h != d.hash {
		return certErr(core.CodeCertInvalid, "certificateHash", "the signed body hashes to %s, the %s says %s: a signed field was changed", h, d.noun, d.hash)
	}
	digest, _ := hex.DecodeString(h)
	sig, err := base64.StdEncoding.DecodeString(d.signature)
	if err != nil || len(sig) != ed25519.SignatureSize || len(digest) != sha256.Size || !ed25519.Verify(pub, digest, sig) {
		return certErr(core.CodeCertInvalid, "signature", "%ssignature does not verify with key %s", d.sigNoun, d.keyID)
	}
	return nil
}

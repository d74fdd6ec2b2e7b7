// Package cert issues, signs, verifies and moves recommendation
// certificates (contract.RecommendationCertificate) through their
// lifecycle:
//
//	ISSUED ──Approve──▶ APPROVED ──MarkExecuted──▶ EXECUTED
//	  │  ╲                 │  ╲
//	  │   Revoke           │   Revoke ──▶ REVOKED
//	  │                    │
//	  └──expiry────────────┴──expiry──▶ EXPIRED
//
// EXECUTED, EXPIRED and REVOKED are final. A certificate is issued only
// for a virtual trial on a frozen scene that passed (every constraint of
// the scene evaluated and passed, candidate in distribution) and improves
// on the baseline; it expires after a TTL (at most MaxTTL). The issuer
// signs the certificate hash with an Ed25519 key kept in
// <dir>/cert-key.json. The lifecycle record in the certificate is not
// covered by that signature; the record store signs approvals, execution
// claims and audit checkpoints with the same key (SignDigest; see
// twinstore.ApproveCertificateAs), and the write guard trusts those. Only an APPROVED, unexpired certificate authorises a write
// (CanWrite, Authorize). The verification and lifecycle rules are methods
// of the certificate itself (contract.RecommendationCertificate.Verify,
// Approve, …), which this package's functions of the same names apply, so
// that the record store can apply them without importing the issuer. See
// docs/twin-contracts.md.
//
// RotateKey replaces <dir>/cert-key.json by a new key, keeping both in
// <dir>/keys; the record store stores the succession both keys sign
// (twinstore.RotateSigningKey) and verifies by key id through it
// (twinstore.Keyring).
package cert

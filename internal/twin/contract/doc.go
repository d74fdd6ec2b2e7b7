// Package contract holds the digital-twin contracts as Go types with
// validation and canonical hashes: the scene contract (variables by role,
// constraints, write policy; draft → frozen), the node binding snapshot,
// the physics model manifest, the twin snapshot, the objective profile, the
// virtual trial and the recommendation certificate.
//
// JSON field names are those of the upstream TypeScript contracts
// (aml/twin/contracts.ts) plus the fields AML adds (constraint variable and
// limits, scene status, certificate expiry, signature and approval
// records). Every Validate reports every problem at once as an
// AML_CONTRACT_INVALID error (HTTP 422) whose Problems name the JSON path
// of each finding ("controls[0].maxStep", "writePolicy.maxDeltaPerAction.hold_time").
//
// Hashes are core.CanonicalHash (keys sorted by byte order, non-finite
// numbers rejected) of the JSON form of a contract without the fields the
// type documents as excluded; time stamps are normalised to UTC first, so
// the hash does not depend on the time zone a value was loaded in.
//
// The issuing, signing and state machine of certificates live in package
// twin/cert. See docs/twin-contracts.md.
package contract

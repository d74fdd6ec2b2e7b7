// Package twinstore keeps the digital twin's records — scene contracts,
// snapshots, virtual trials, objective profiles, recommendation
// certificates, channel profiles and the write history, shadow evidence,
// twin gate evaluations and recalibration requests — in the database of
// either back-end.
//
// The same Go code and the same SQL run on SQLite and PostgreSQL through
// internal/store/sqldb: every change is a write transaction that is
// serialised against every other writer (SQLite's single writer; on
// PostgreSQL an advisory transaction lock), and its audit entry
// (internal/audit) is appended in that same transaction, so a record exists
// exactly when its audit entry does. The tables are created by each
// back-end's migration 0005 (scenes) and 0006 (twin_*) and later ones;
// 0015 adds twin_leases, the leases of running work (lease.go: a step
// test's executor renews its test's lease; they change and are no audit
// evidence).
//
// Records are hashed when written and checked when read: a row edited
// behind the store's back is reported (AML_SNAPSHOT_TAMPERED,
// AML_TRIAL_TAMPERED, AML_CERT_TAMPERED …), never used.
//
// The records themselves (CertRecord, TrialRecord, …) are types of package
// twin/contract, and the package imports nothing of the twin but contract:
// the certificate rules are methods of contract.RecommendationCertificate
// and the signing key comes in as a CertSigner (a *cert.KeyPair), so the
// domain packages depend on contract, never the store on them.
//
// sqlite.Store and postgres.Store embed a *Store, so the methods are called
// on the back-end's store directly.
package twinstore

import (
	"strings"
	"sync/atomic"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqldb"
)

// Store is the twin record store over one database handle. It is safe for
// concurrent use.
type Store struct {
	db *sqldb.DB
	// signer is the signing key this handle last registered or used
	// (a signerBox): it signs the periodic audit checkpoints.
	signer atomic.Value
}

// New returns the twin record store in the database behind db.
func New(db *sqldb.DB) *Store { return &Store{db: db} }

// SQL is the database handle.
func (s *Store) SQL() *sqldb.DB { return s.db }

func requireID(field, id string) error {
	if strings.TrimSpace(id) == "" {
		return core.FieldErrorf(core.CodeInvalidArgument, field, "%s is required", field)
	}
	return nil
}

func notFound(kind, id string) error {
	return core.FieldErrorf(core.CodeNotFound, kind, "%s %q not found", kind, id)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

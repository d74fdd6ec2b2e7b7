package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqldb"
)

// Audit actions of tokens.
const (
	AuditTokenCreate = "token.create"
	AuditTokenRevoke = "token.revoke"
)

// TokenPrefix starts every token, so a leaked one is recognisable (secret
// scanners, logs).
const TokenPrefix = "aml_"

// TokenInfo is a stored token without its secret.
type TokenInfo struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Role      Role       `json:"role"`
	Lines     []string   `json:"lines"`
	CreatedBy string     `json:"createdBy"`
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
	RevokedBy string     `json:"revokedBy,omitempty"`
}

// Active reports whether the token is neither revoked nor expired at now.
func (t TokenInfo) Active(now time.Time) bool {
	return t.RevokedAt == nil && (t.ExpiresAt == nil || now.Before(*t.ExpiresAt))
}

// NewToken is what Create asks for.
type NewToken struct {
	Name  string
	Role  Role
	Lines []string
	// TTL > 0 makes the token expire; 0 means it never does.
	TTL time.Duration
}

// Tokens is the token store in a store's database (SQLite or PostgreSQL,
// through internal/store/sqldb). It implements Verifier.
type Tokens struct {
	db  *sqldb.DB
	log *audit.Log
	now func() time.Time
}

var _ Verifier = (*Tokens)(nil)

// NewTokens returns the token store in the database behind db (a store's
// SQL()).
func NewTokens(db *sqldb.DB) *Tokens {
	return &Tokens{db: db, log: audit.New(db), now: time.Now}
}

// SetClock replaces the clock (tests).
func (t *Tokens) SetClock(now func() time.Time) { t.now = now }

// HashToken is the stored form of a token: sha256 hex.
func HashToken(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

func validateNew(n NewToken) (NewToken, error) {
	n.Name = strings.TrimSpace(n.Name)
	if n.Name == "" {
		return n, core.FieldErrorf(core.CodeInvalidArgument, "name", "a token needs a name (the person or agent it is for)")
	}
	if err := core.CheckName("name", n.Name); err != nil {
		return n, err
	}
	if len(n.Name) > 200 {
		return n, core.FieldErrorf(core.CodeInvalidArgument, "name", "name longer than 200 characters")
	}
	if !n.Role.Valid() {
		return n, core.FieldErrorf(core.CodeInvalidArgument, "role", "unknown role %q (viewer, engineer, approver, admin, agent)", n.Role)
	}
	if n.TTL < 0 {
		return n, core.FieldErrorf(core.CodeInvalidArgument, "ttl", "ttl must not be negative")
	}
	var lines []string
	seen := map[string]bool{}
	for _, l := range n.Lines {
		l = strings.TrimSpace(l)
		if l == "" || seen[l] {
			continue
		}
		seen[l] = true
		lines = append(lines, l)
	}
	n.Lines = lines
	return n, nil
}

// Create stores a new token for n and returns it with its secret, which
// is never stored and cannot be shown again. The row and its audit entry
// ("token.create", actor) commit together.
func (t *Tokens) Create(ctx context.Context, actor string, n NewToken) (TokenInfo, string, error) {
	n, err := validateNew(n)
	if err != nil {
		return TokenInfo{}, "", err
	}
	if actor == "" {
		return TokenInfo{}, "", core.FieldErrorf(core.CodeInvalidArgument, "actor", "actor is required")
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return TokenInfo{}, "", core.Wrap(core.CodeInternal, err, "token randomness")
	}
	var idb [6]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return TokenInfo{}, "", core.Wrap(core.CodeInternal, err, "token randomness")
	}
	secret := TokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	now := t.now().UTC().Truncate(time.Millisecond)
	info := TokenInfo{ID: "tok_" + hex.EncodeToString(idb[:]), Name: n.Name, Role: n.Role, Lines: n.Lines,
		CreatedBy: actor, CreatedAt: now}
	if info.Lines == nil {
		info.Lines = []string{}
	}
	var exp any
	if n.TTL > 0 {
		e := now.Add(n.TTL)
		info.ExpiresAt = &e
		exp = e.UnixMilli()
	}
	lines, _ := json.Marshal(info.Lines)
	tx, err := t.db.Begin(ctx)
	if err != nil {
		return TokenInfo{}, "", core.Wrap(core.CodeStoreUnavailable, err, "begin")
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT INTO api_tokens(token_id, name, role, lines, hash, created_by, created_at, expires_at)
		VALUES (?,?,?,?,?,?,?,?)`, info.ID, info.Name, string(info.Role), string(lines), HashToken(secret), actor, now.UnixMilli(), exp); err != nil {
		return TokenInfo{}, "", core.Wrap(core.CodeStoreUnavailable, err, "insert token")
	}
	payload := map[string]any{"name": info.Name, "role": info.Role, "lines": info.Lines}
	if info.ExpiresAt != nil {
		payload["expiresAt"] = info.ExpiresAt.UnixMilli()
	}
	if _, err := t.log.AppendTx(ctx, tx, actor, AuditTokenCreate, info.ID, "", payload); err != nil {
		return TokenInfo{}, "", err
	}
	if err := tx.Commit(); err != nil {
		return TokenInfo{}, "", core.Wrap(core.CodeStoreUnavailable, err, "commit token")
	}
	return info, secret, nil
}

const tokenCols = `token_id, name, role, lines, created_by, created_at, expires_at, revoked_at, revoked_by`

func scanToken(sc interface{ Scan(...any) error }) (TokenInfo, error) {
	var (
		ti                 TokenInfo
		role, lines        string
		created            int64
		expires, revokedAt sql.NullInt64
	)
	if err := sc.Scan(&ti.ID, &ti.Name, &role, &lines, &ti.CreatedBy, &created, &expires, &revokedAt, &ti.RevokedBy); err != nil {
		return ti, err
	}
	ti.Role = Role(role)
	if err := json.Unmarshal([]byte(lines), &ti.Lines); err != nil {
		return ti, core.Wrap(core.CodeInternal, err, "token %s: lines", ti.ID)
	}
	if ti.Lines == nil {
		ti.Lines = []string{}
	}
	ti.CreatedAt = time.UnixMilli(created).UTC()
	if expires.Valid {
		e := time.UnixMilli(expires.Int64).UTC()
		ti.ExpiresAt = &e
	}
	if revokedAt.Valid {
		r := time.UnixMilli(revokedAt.Int64).UTC()
		ti.RevokedAt = &r
	}
	return ti, nil
}

// List returns every token (active, expired and revoked), oldest first.
func (t *Tokens) List(ctx context.Context) ([]TokenInfo, error) {
	rows, err := t.db.QueryContext(ctx, `SELECT `+tokenCols+` FROM api_tokens ORDER BY created_at, rowid`)
	if err != nil {
		return nil, core.Wrap(core.CodeStoreUnavailable, err, "list tokens")
	}
	defer rows.Close()
	out := []TokenInfo{}
	for rows.Next() {
		ti, err := scanToken(rows)
		if err != nil {
			return nil, core.Wrap(core.CodeInternal, err, "read token")
		}
		out = append(out, ti)
	}
	if err := rows.Err(); err != nil {
		return nil, core.Wrap(core.CodeStoreUnavailable, err, "list tokens")
	}
	return out, nil
}

// Get returns one token by id (AML_NOT_FOUND, field "id").
func (t *Tokens) Get(ctx context.Context, id string) (TokenInfo, error) {
	ti, err := scanToken(t.db.QueryRowContext(ctx, `SELECT `+tokenCols+` FROM api_tokens WHERE token_id=?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return ti, core.FieldErrorf(core.CodeNotFound, "id", "token %q not found", id)
	}
	if err != nil {
		return ti, core.Wrap(core.CodeStoreUnavailable, err, "read token %s", id)
	}
	return ti, nil
}

// Revoke revokes token id at once; its row and audit entry
// ("token.revoke") commit together. Revoking a revoked token is
// AML_CONFLICT, an unknown one AML_NOT_FOUND.
func (t *Tokens) Revoke(ctx context.Context, actor, id string) (TokenInfo, error) {
	if actor == "" {
		return TokenInfo{}, core.FieldErrorf(core.CodeInvalidArgument, "actor", "actor is required")
	}
	tx, err := t.db.Begin(ctx)
	if err != nil {
		return TokenInfo{}, core.Wrap(core.CodeStoreUnavailable, err, "begin")
	}
	defer tx.Rollback()
	ti, err := scanToken(tx.QueryRowContext(ctx, `SELECT `+tokenCols+` FROM api_tokens WHERE token_id=?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return ti, core.FieldErrorf(core.CodeNotFound, "id", "token %q not found", id)
	}
	if err != nil {
		return ti, core.Wrap(core.CodeStoreUnavailable, err, "read token %s", id)
	}
	if ti.RevokedAt != nil {
		return ti, core.FieldErrorf(core.CodeConflict, "id", "token %s was already revoked at %s by %s", id, ti.RevokedAt.Format(time.RFC3339), ti.RevokedBy)
	}
	now := t.now().UTC().Truncate(time.Millisecond)
	if _, err := tx.ExecContext(ctx, `UPDATE api_tokens SET revoked_at=?, revoked_by=? WHERE token_id=? AND revoked_at IS NULL`, now.UnixMilli(), actor, id); err != nil {
		return ti, core.Wrap(core.CodeStoreUnavailable, err, "revoke token %s", id)
	}
	if _, err := t.log.AppendTx(ctx, tx, actor, AuditTokenRevoke, id, "", map[string]any{"name": ti.Name, "role": ti.Role}); err != nil {
		return ti, err
	}
	if err := tx.Commit(); err != nil {
		return ti, core.Wrap(core.CodeStoreUnavailable, err, "commit revoke")
	}
	ti.RevokedAt, ti.RevokedBy = &now, actor
	return ti, nil
}

// VerifyToken resolves tok to its principal: AML_UNAUTHENTICATED (401) when
// unknown, revoked or expired — one message for all three, so a caller
// cannot probe which tokens once existed.
func (t *Tokens) VerifyToken(ctx context.Context, tok string) (Principal, error) {
	if !strings.HasPrefix(tok, TokenPrefix) || len(tok) > 200 {
		return Principal{}, Unauthenticated("invalid token")
	}
	ti, err := scanToken(t.db.QueryRowContext(ctx, `SELECT `+tokenCols+` FROM api_tokens WHERE hash=?`, HashToken(tok)))
	if errors.Is(err, sql.ErrNoRows) {
		return Principal{}, Unauthenticated("invalid token")
	}
	if err != nil {
		return Principal{}, core.Wrap(core.CodeStoreUnavailable, err, "verify token")
	}
	if !ti.Active(t.now()) {
		return Principal{}, Unauthenticated("invalid token")
	}
	var lines []string
	if len(ti.Lines) > 0 {
		lines = ti.Lines
	}
	return Principal{Name: ti.Name, Role: ti.Role, Lines: lines, TokenID: ti.ID}, nil
}

package audit

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/store/sqldb"
)

// CodeAuditTampered is the stable error code of a failed verification: an
// entry was changed, removed or reordered, or the log no longer contains a
// head recorded earlier. HTTP 409.
const CodeAuditTampered = core.CodeAuditTampered

// GenesisHash is the prevHash of the first entry: 64 zeros.
const GenesisHash = "0000000000000000000000000000000000000000000000000000000000000000"

// List limits.
const (
	DefaultListLimit = 100
	MaxListLimit     = 10_000
)

// Entry is one audit record.
type Entry struct {
	Seq      int64           `json:"seq"`
	At       time.Time       `json:"at"` // millisecond precision, UTC
	Actor    string          `json:"actor"`
	Action   string          `json:"action"`
	Subject  string          `json:"subject"`
	LineID   string          `json:"lineId"`
	Payload  json.RawMessage `json:"payload"` // canonical JSON
	PrevHash string          `json:"prevHash"`
	Hash     string          `json:"hash"`
}

// VerifyResult is the outcome of Verify: how many entries were read, the
// head (hash of the last entry, GenesisHash for an empty log) and, when OK
// is false, the first bad seq and what is wrong with it.
type VerifyResult struct {
	Entries  int64  `json:"entries"`
	HeadSeq  int64  `json:"headSeq"`
	Head     string `json:"head"`
	OK       bool   `json:"ok"`
	FirstBad int64  `json:"firstBad,omitempty"`
	Problem  string `json:"problem,omitempty"`
	// Checkpoints is how many signed checkpoints were verified (a log
	// with keys, WithKeys); SignedSeq the newest one's seq: the entries up
	// to it are as the deployment signed them.
	Checkpoints int64 `json:"checkpoints"`
	SignedSeq   int64 `json:"signedSeq,omitempty"`
}

// Log is the audit log in one database; appends run in the handle's write
// transactions (serialised on both back-ends, see internal/store/sqldb). It is safe for concurrent use.
type Log struct {
	db     *sqldb.DB
	now    func() time.Time
	signer Signer // signs a checkpoint every CheckpointEvery entries (nil: none)
	keys   Keys   // verify checks the signed checkpoints (nil: not)
	// signed are the actions always checkpointed at their own entry
	// (RequireSigned).
	signed map[string]bool
}

// New returns the log in the database behind db (a store's SQL()).
func New(db *sqldb.DB) *Log {
	return &Log{db: db, now: time.Now}
}

// Append appends one entry in its own write transaction and returns it.
// payload is any value encoding/json can marshal, or raw JSON; nil is
// stored as {}. Non-finite numbers are refused (AML_NON_FINITE).
func (l *Log) Append(ctx context.Context, actor, action, subject, lineID string, payload any) (Entry, error) {
	// Validate before taking the write lock.
	p, err := prepare(actor, action, subject, payload)
	if err != nil {
		return Entry{}, err
	}
	tx, err := l.db.Begin(ctx)
	if err != nil {
		return Entry{}, sqldb.Err(err, "audit: begin")
	}
	e, err := l.appendTx(ctx, tx, actor, action, subject, lineID, p)
	if err != nil {
		tx.Rollback()
		return Entry{}, err
	}
	if err := tx.Commit(); err != nil {
		return Entry{}, sqldb.Err(err, "audit: commit")
	}
	return e, nil
}

// AppendIf appends one entry in its own write transaction when check,
// given subject's trail as it is inside that transaction (every entry of
// subject, in seq order), returns nil; otherwise it appends nothing and
// returns check's error. The write transaction is serialised across
// processes (sqldb.DB.Begin), so two AppendIf of one subject never both
// see the trail without the other's entry: an atomic claim.
func (l *Log) AppendIf(ctx context.Context, actor, action, subject, lineID string, payload any, check func(trail []Entry) error) (Entry, error) {
	if _, err := prepare(actor, action, subject, payload); err != nil {
		return Entry{}, err
	}
	tx, err := l.db.Begin(ctx)
	if err != nil {
		return Entry{}, sqldb.Err(err, "audit: begin")
	}
	defer tx.Rollback()
	e, err := l.AppendIfTx(ctx, tx, actor, action, subject, lineID, payload, check)
	if err != nil {
		return Entry{}, err
	}
	if err := tx.Commit(); err != nil {
		return Entry{}, sqldb.Err(err, "audit: commit")
	}
	return e, nil
}

// AppendIfTx is AppendIf inside the caller's write transaction tx (of
// the same handle, sqldb.DB.Begin), for a claim that changes more than
// the log in the same transaction: check sees subject's trail as it is
// in tx; nothing is appended when it fails.
func (l *Log) AppendIfTx(ctx context.Context, tx *sqldb.Tx, actor, action, subject, lineID string, payload any, check func(trail []Entry) error) (Entry, error) {
	p, err := prepare(actor, action, subject, payload)
	if err != nil {
		return Entry{}, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT seq, at, actor, action, subject, line_id, payload, prev_hash, hash FROM audit_log WHERE subject = ? ORDER BY seq`, subject)
	if err != nil {
		return Entry{}, sqldb.Err(err, "audit: read trail of %s", subject)
	}
	var trail []Entry
	for rows.Next() {
		var e Entry
		var at int64
		var pl string
		if err := rows.Scan(&e.Seq, &at, &e.Actor, &e.Action, &e.Subject, &e.LineID, &pl, &e.PrevHash, &e.Hash); err != nil {
			_ = rows.Close()
			return Entry{}, sqldb.Err(err, "audit: read trail of %s", subject)
		}
		e.At, e.Payload = time.UnixMilli(at).UTC(), json.RawMessage(pl)
		trail = append(trail, e)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return Entry{}, sqldb.Err(err, "audit: read trail of %s", subject)
	}
	if err := check(trail); err != nil {
		return Entry{}, err
	}
	return l.appendTx(ctx, tx, actor, action, subject, lineID, p)
}

// AppendTx appends one entry inside the caller's transaction, so the entry
// exists exactly when the caller's change does. tx must be a write
// transaction of the same handle (sqldb.DB.Begin, serialised across
// processes), so that no other process appends between the head read and the
// insert; a chain fork is impossible in any case (seq is the primary key
// and a trigger refuses inserts that do not extend the head).
func (l *Log) AppendTx(ctx context.Context, tx *sqldb.Tx, actor, action, subject, lineID string, payload any) (Entry, error) {
	p, err := prepare(actor, action, subject, payload)
	if err != nil {
		return Entry{}, err
	}
	return l.appendTx(ctx, tx, actor, action, subject, lineID, p)
}

func (l *Log) appendTx(ctx context.Context, tx *sqldb.Tx, actor, action, subject, lineID string, p json.RawMessage) (Entry, error) {
	e := Entry{Actor: actor, Action: action, Subject: subject, LineID: lineID, Payload: p, PrevHash: GenesisHash, Seq: 1}
	var last int64
	var prev string
	switch err := tx.QueryRowContext(ctx, `SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1`).Scan(&last, &prev); {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return Entry{}, sqldb.Err(err, "audit: read head")
	default:
		e.Seq, e.PrevHash = last+1, prev
	}
	at := l.now().UnixMilli()
	e.At = time.UnixMilli(at).UTC()
	var err error
	if e.Hash, err = hashOf(e.Seq, at, actor, action, subject, lineID, p, e.PrevHash); err != nil {
		return Entry{}, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO audit_log(seq, at, actor, action, subject, line_id, payload, prev_hash, hash) VALUES (?,?,?,?,?,?,?,?,?)`,
		e.Seq, at, actor, action, subject, lineID, string(p), e.PrevHash, e.Hash); err != nil {
		return Entry{}, sqldb.Err(err, "audit: append seq %d", e.Seq)
	}
	if l.signer != nil && e.Seq%CheckpointEvery == 0 {
		if err := l.signTx(ctx, tx, l.signer, &Checkpoint{Seq: e.Seq, Hash: e.Hash}); err != nil {
			return Entry{}, err
		}
	}
	return e, nil
}

// prepare validates the fields and returns the canonical payload.
func prepare(actor, action, subject string, payload any) (json.RawMessage, error) {
	for _, f := range []struct{ name, v string }{{"actor", actor}, {"action", action}, {"subject", subject}} {
		if strings.TrimSpace(f.v) == "" {
			return nil, core.FieldErrorf(core.CodeInvalidArgument, f.name, "audit entry needs a non-empty %s", f.name)
		}
	}
	switch p := payload.(type) {
	case nil:
		return json.RawMessage("{}"), nil
	case json.RawMessage:
		if len(p) == 0 {
			return json.RawMessage("{}"), nil
		}
	case []byte:
		if len(p) == 0 {
			return json.RawMessage("{}"), nil
		}
	}
	b, err := core.CanonicalJSON(payload)
	if err != nil {
		var ae *core.Error
		if errors.As(err, &ae) && ae.Field == "" {
			ae.Field = "payload"
		}
		return nil, err
	}
	return b, nil
}

// ComputeHash recomputes e's hash from its fields (Hash itself is ignored).
func ComputeHash(e Entry) (string, error) {
	return hashOf(e.Seq, e.At.UnixMilli(), e.Actor, e.Action, e.Subject, e.LineID, e.Payload, e.PrevHash)
}

func hashOf(seq, atMs int64, actor, action, subject, lineID string, payload []byte, prev string) (string, error) {
	doc, err := hashDoc(seq, atMs, actor, action, subject, lineID, payload, prev)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(doc)
	return hex.EncodeToString(sum[:]), nil
}

// hashDoc is the canonical JSON that an entry's hash is the sha256 of.
func hashDoc(seq, atMs int64, actor, action, subject, lineID string, payload []byte, prev string) ([]byte, error) {
	if !json.Valid(payload) {
		return nil, core.FieldErrorf(core.CodeInvalidArgument, "payload", "payload is not valid JSON")
	}
	return core.CanonicalJSON(map[string]any{
		"seq":      seq,
		"at":       atMs,
		"actor":    actor,
		"action":   action,
		"subject":  subject,
		"lineId":   lineID,
		"payload":  json.RawMessage(payload),
		"prevHash": prev,
	})
}

// List returns up to limit entries with seq > afterSeq in seq order, only
// those of subject when it is not empty. limit ≤ 0 means DefaultListLimit;
// it is capped at MaxListLimit. Page with afterSeq = last returned seq.
func (l *Log) List(ctx context.Context, afterSeq int64, limit int, subject string) ([]Entry, error) {
	return l.Query(ctx, Query{AfterSeq: afterSeq, Limit: limit, Subject: subject})
}

// Query selects entries; empty fields match anything.
type Query struct {
	AfterSeq  int64 // seq > AfterSeq
	BeforeSeq int64 // seq < BeforeSeq when > 0
	Subject   string
	Actor     string
	// Action matches exactly, or every action it starts with when it ends
	// in "*" ("cert.*").
	Action string
	FromMs *int64 // at ≥ FromMs
	ToMs   *int64 // at ≤ ToMs
	// Lines, when not nil, keeps the entries of these lines only (an
	// entry without a line is then left out: a line-scoped reader).
	Lines []string
	// Newest lists in descending seq order (page with BeforeSeq = the
	// last returned seq).
	Newest bool
	Limit  int // ≤ 0: DefaultListLimit; capped at MaxListLimit
}

// Query returns the entries q selects, in seq order (descending with
// q.Newest).
func (l *Log) Query(ctx context.Context, qu Query) ([]Entry, error) {
	limit := qu.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	limit = min(limit, MaxListLimit)
	q := `SELECT seq, at, actor, action, subject, line_id, payload, prev_hash, hash FROM audit_log WHERE seq > ?`
	args := []any{qu.AfterSeq}
	if qu.BeforeSeq > 0 {
		q += ` AND seq < ?`
		args = append(args, qu.BeforeSeq)
	}
	if qu.Subject != "" {
		q += ` AND subject = ?`
		args = append(args, qu.Subject)
	}
	if qu.Actor != "" {
		q += ` AND actor = ?`
		args = append(args, qu.Actor)
	}
	if p, ok := strings.CutSuffix(qu.Action, "*"); ok {
		if p != "" {
			q += ` AND substr(action, 1, ?) = ?`
			args = append(args, len(p), p)
		}
	} else if qu.Action != "" {
		q += ` AND action = ?`
		args = append(args, qu.Action)
	}
	if qu.FromMs != nil {
		q += ` AND at >= ?`
		args = append(args, *qu.FromMs)
	}
	if qu.ToMs != nil {
		q += ` AND at <= ?`
		args = append(args, *qu.ToMs)
	}
	if qu.Lines != nil {
		if len(qu.Lines) == 0 {
			return []Entry{}, nil
		}
		q += ` AND line_id IN (?` + strings.Repeat(`, ?`, len(qu.Lines)-1) + `)`
		for _, l := range qu.Lines {
			args = append(args, l)
		}
	}
	if qu.Newest {
		q += ` ORDER BY seq DESC LIMIT ?`
	} else {
		q += ` ORDER BY seq LIMIT ?`
	}
	args = append(args, limit)
	rows, err := l.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, sqldb.Err(err, "audit: list")
	}
	defer rows.Close()
	out := []Entry{}
	for rows.Next() {
		var e Entry
		var at int64
		var p string
		if err := rows.Scan(&e.Seq, &at, &e.Actor, &e.Action, &e.Subject, &e.LineID, &p, &e.PrevHash, &e.Hash); err != nil {
			return nil, sqldb.Err(err, "audit: list")
		}
		e.At, e.Payload = time.UnixMilli(at).UTC(), json.RawMessage(p)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, sqldb.Err(err, "audit: list")
	}
	return out, nil
}

// Head returns the last entry's seq and hash, (0, GenesisHash) for an empty
// log. Record it elsewhere to detect a later truncation with VerifyHead.
func (l *Log) Head(ctx context.Context) (int64, string, error) {
	var seq int64
	var h string
	err := l.db.QueryRowContext(ctx, `SELECT seq, hash FROM audit_log ORDER BY seq DESC LIMIT 1`).Scan(&seq, &h)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, GenesisHash, nil
	}
	if err != nil {
		return 0, "", sqldb.Err(err, "audit: read head")
	}
	return seq, h, nil
}

// Verify recomputes every entry's hash in seq order and checks the links
// and that seq runs 1, 2, … without gaps. On any problem it returns the
// result (OK false, FirstBad, Problem) together with an AML_AUDIT_TAMPERED
// error naming the first bad seq. A truncated tail is not detectable from
// the log alone: see VerifyHead.
func (l *Log) Verify(ctx context.Context) (VerifyResult, error) {
	return l.verify(ctx, -1, "")
}

// VerifyHead is Verify plus the check that the log still contains the head
// (seq, hash) recorded earlier by Head: it detects entries removed from the
// end and a rewritten suffix. seq 0 with GenesisHash is the empty log's
// head and always holds.
func (l *Log) VerifyHead(ctx context.Context, seq int64, hash string) (VerifyResult, error) {
	if seq < 0 || len(hash) != 64 {
		return VerifyResult{}, core.Errorf(core.CodeInvalidArgument, "expected head needs seq ≥ 0 and a 64-hex hash, got %d and %q", seq, hash)
	}
	if seq == 0 && hash != GenesisHash {
		return VerifyResult{}, core.Errorf(core.CodeInvalidArgument, "the head of seq 0 is %s", GenesisHash)
	}
	return l.verify(ctx, seq, strings.ToLower(hash))
}

func (l *Log) verify(ctx context.Context, wantSeq int64, wantHash string) (VerifyResult, error) {
	res := VerifyResult{Head: GenesisHash}
	fail := func(seq int64, format string, args ...any) {
		if res.FirstBad == 0 {
			res.FirstBad, res.Problem = seq, fmt.Sprintf(format, args...)
		}
	}
	// The signed checkpoints, read before the entries (so every entry
	// they name is among the entries read).
	cps := map[int64]Checkpoint{}
	if l.keys != nil {
		list, err := l.Checkpoints(ctx)
		if err != nil {
			return res, err
		}
		for _, c := range list {
			if err := c.Verify(l.keys); err != nil {
				fail(c.Seq, "%v (signed checkpoint)", err)
				continue
			}
			cps[c.Seq] = c
		}
	}
	firstCP := int64(-1)
	for s := range cps {
		if firstCP < 0 || s < firstCP {
			firstCP = s
		}
	}
	// One SELECT reads one snapshot (WAL), so concurrent appends do not
	// confuse the walk.
	rows, err := l.db.QueryContext(ctx, `SELECT seq, at, actor, action, subject, line_id, payload, prev_hash, hash FROM audit_log ORDER BY seq`)
	if err != nil {
		return res, sqldb.Err(err, "audit: verify")
	}
	defer rows.Close()
	var prevSeq int64
	prevHash := GenesisHash
	for rows.Next() {
		var seq int64
		var cols [8]any
		if err := rows.Scan(&seq, &cols[0], &cols[1], &cols[2], &cols[3], &cols[4], &cols[5], &cols[6], &cols[7]); err != nil {
			return res, sqldb.Err(err, "audit: verify")
		}
		res.Entries++
		bad, probs := seq, []string(nil)
		gap := seq != prevSeq+1
		if gap {
			// seq is an INTEGER PRIMARY KEY read in order, so it only jumps
			// forward: entries were deleted.
			bad = prevSeq + 1
			if seq-1 == bad {
				probs = append(probs, fmt.Sprintf("entry %d is missing (the next present is %d)", bad, seq))
			} else {
				probs = append(probs, fmt.Sprintf("entries %d..%d are missing (the next present is %d)", bad, seq-1, seq))
			}
		}
		at, actor, action, subject, lineID, payload, prev, hash, problem := decodeRow(cols)
		if problem != "" {
			probs = append(probs, fmt.Sprintf("entry %d: %s", seq, problem))
		} else {
			if prev != prevHash {
				if gap {
					probs = append(probs, fmt.Sprintf("entry %d's prevHash %.12s… does not link to entry %d before the gap (%.12s…)", seq, prev, prevSeq, prevHash))
				} else {
					probs = append(probs, fmt.Sprintf("entry %d's prevHash %.12s… is not the hash of entry %d (%.12s…): entry %d was rewritten or entry %d's link was changed", seq, prev, prevSeq, prevHash, prevSeq, seq))
				}
			}
			if h, err := hashOf(seq, at, actor, action, subject, lineID, payload, prev); err != nil {
				probs = append(probs, fmt.Sprintf("entry %d: %v", seq, err))
			} else if h != hash {
				probs = append(probs, fmt.Sprintf("entry %d's content does not match its hash (recomputed %.12s…, stored %.12s…): it was changed", seq, h, hash))
			}
		}
		if _, ok := cps[seq]; !ok && firstCP >= 0 && seq > firstCP && l.signed[action] {
			probs = append(probs, fmt.Sprintf("entry %d (%s) has no signed checkpoint, though every %s after the first checkpoint (entry %d) is signed at its entry: checkpoints were removed (signed checkpoint check)", seq, action, action, firstCP))
		}
		if c, ok := cps[seq]; ok {
			if hash != c.Hash {
				probs = append(probs, fmt.Sprintf("entry %d's hash %.12s… is not the hash %.12s… of the signed checkpoint at entry %d: the log was rewritten at or before entry %d (signed checkpoint check)", seq, hash, c.Hash, seq, seq))
			} else {
				res.Checkpoints++
				res.SignedSeq = seq
			}
		}
		if wantSeq > 0 && seq == wantSeq && hash != wantHash {
			probs = append(probs, fmt.Sprintf("entry %d's hash is %.12s… but the recorded head is %.12s…: the log was rewritten from entry %d or earlier", seq, hash, wantHash, seq))
		}
		if len(probs) > 0 {
			fail(bad, "%s", strings.Join(probs, "; "))
		}
		prevSeq, prevHash = seq, hash
		res.HeadSeq, res.Head = seq, hash
	}
	if err := rows.Err(); err != nil {
		return res, sqldb.Err(err, "audit: verify")
	}
	for _, c := range cps {
		if c.Seq > res.HeadSeq {
			fail(res.HeadSeq+1, "a signed checkpoint names entry %d but the log ends at entry %d: entries were removed (signed checkpoint check)", c.Seq, res.HeadSeq)
			break
		}
	}
	if wantSeq > res.HeadSeq {
		fail(res.HeadSeq+1, "the log ends at entry %d but the recorded head is entry %d (%.12s…): entries %d..%d were removed", res.HeadSeq, wantSeq, wantHash, res.HeadSeq+1, wantSeq)
	}
	if res.FirstBad != 0 {
		return res, core.Errorf(CodeAuditTampered, "audit log tampered at seq %d: %s (%d entries read)", res.FirstBad, res.Problem, res.Entries)
	}
	res.OK = true
	return res, nil
}

// decodeRow converts the scanned columns, reporting a column whose type or
// value no SQL-level edit through this package could have produced.
func decodeRow(c [8]any) (at int64, actor, action, subject, lineID string, payload []byte, prev, hash, problem string) {
	at, ok := c[0].(int64)
	if !ok {
		return 0, "", "", "", "", nil, "", "", fmt.Sprintf("at is %T, not an integer", c[0])
	}
	names := [...]string{"actor", "action", "subject", "lineId", "payload", "prevHash", "hash"}
	var s [7]string
	for i := range s {
		switch v := c[i+1].(type) {
		case string:
			s[i] = v
		case []byte:
			s[i] = string(v)
		default:
			return 0, "", "", "", "", nil, "", "", fmt.Sprintf("%s is %T, not text", names[i], c[i+1])
		}
	}
	if !json.Valid([]byte(s[4])) {
		return 0, "", "", "", "", nil, "", "", "payload is not valid JSON"
	}
	return at, s[0], s[1], s[2], s[3], []byte(s[4]), s[5], s[6], ""
}

// SetClock replaces the clock that stamps new entries (tests, replays).
func (l *Log) SetClock(now func() time.Time) { l.now = now }

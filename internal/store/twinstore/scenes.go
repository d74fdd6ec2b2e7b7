package twinstore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/store/sqldb"

	"github.com/aml-project/aml/internal/core"
	"github.com/aml-project/aml/internal/twin/contract"
)

// Audit actions of scene contracts.
const (
	AuditScenePut    = "scene.put"
	AuditSceneFreeze = "scene.freeze"
)

// SceneSubject is the audit subject of one scene version: "ID@VERSION".
func SceneSubject(id, version string) string { return id + "@" + version }

// sceneNow is the clock of FreezeScene (tests may replace it).
var sceneNow = time.Now

// PutScene validates c and stores it as a draft: a new row, or the
// replacement of an existing draft with the same id and version. A frozen
// scene (stored, or c itself) is immutable: AML_SCENE_FROZEN. The change and
// its audit entry ("scene.put", actor c.CreatedBy) commit together.
func (s *Store) PutScene(ctx context.Context, c *contract.SceneContract) error {
	if c == nil {
		return core.Errorf(core.CodeInvalidArgument, "scene contract is required")
	}
	if c.Status == "" {
		c.Status = contract.SceneDraft
	}
	if err := c.CheckMutable(); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	hash, err := c.Hash()
	if err != nil {
		return err
	}
	js, err := core.CanonicalJSON(c)
	if err != nil {
		return err
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return sqldb.Err(err, "begin")
	}
	defer tx.Rollback()
	old, err := sceneRow(tx.QueryRowContext(ctx, `SELECT `+sceneCols+` FROM scenes WHERE scene_id=? AND version=?`, c.SceneID, c.SceneVersion))
	replaced := false
	switch {
	case errors.Is(err, sql.ErrNoRows):
		_, err = tx.ExecContext(ctx, `INSERT INTO scenes(scene_id, version, line_id, status, hash, contract_json, frozen_by, frozen_at, created_at)
			VALUES (?,?,?,'draft',?,?,'',NULL,?)`, c.SceneID, c.SceneVersion, c.LineID, hash, string(js), c.CreatedAt.UnixMilli())
		if err != nil {
			return sqldb.Err(err, "insert scene %s", SceneSubject(c.SceneID, c.SceneVersion))
		}
	case err != nil:
		return err
	default:
		if err := old.CheckMutable(); err != nil {
			return err
		}
		replaced = true
		res, err := tx.ExecContext(ctx, `UPDATE scenes SET line_id=?, hash=?, contract_json=?, created_at=?
			WHERE scene_id=? AND version=? AND status='draft'`, c.LineID, hash, string(js), c.CreatedAt.UnixMilli(), c.SceneID, c.SceneVersion)
		if err != nil {
			return sqldb.Err(err, "replace scene %s", SceneSubject(c.SceneID, c.SceneVersion))
		}
		if n, _ := res.RowsAffected(); n != 1 {
			return core.Errorf(core.CodeConflict, "scene %s changed concurrently", SceneSubject(c.SceneID, c.SceneVersion))
		}
	}
	payload := map[string]any{"sceneId": c.SceneID, "sceneVersion": c.SceneVersion, "hash": hash, "replaced": replaced}
	if _, err := audit.New(s.db).AppendTx(ctx, tx, c.CreatedBy, AuditScenePut, SceneSubject(c.SceneID, c.SceneVersion), c.LineID, payload); err != nil {
		return err
	}
	return sqldb.Err(tx.Commit(), "commit scene %s", SceneSubject(c.SceneID, c.SceneVersion))
}

// FreezeScene freezes the draft id@version on behalf of by, provided its
// content hash is still expectHash (the hash the approver reviewed). The
// compare-and-set is one UPDATE … WHERE status='draft' AND hash=expectHash
// inside a write transaction that also appends the audit entry
// ("scene.freeze"). A stale hash fails with AML_CONFLICT, an already frozen
// scene with AML_SCENE_FROZEN; in both cases nothing changes.
func (s *Store) FreezeScene(ctx context.Context, id, version, by, expectHash string) (*contract.SceneContract, error) {
	if err := requireID("sceneId", id); err != nil {
		return nil, err
	}
	if err := requireID("sceneVersion", version); err != nil {
		return nil, err
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return nil, sqldb.Err(err, "begin")
	}
	defer tx.Rollback()
	c, err := sceneRow(tx.QueryRowContext(ctx, `SELECT `+sceneCols+` FROM scenes WHERE scene_id=? AND version=?`, id, version))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("scene", SceneSubject(id, version))
	}
	if err != nil {
		return nil, err
	}
	// Checks: not frozen, approver given, valid, hash == expectHash.
	if err := c.Freeze(by, expectHash, sceneNow()); err != nil {
		return nil, err
	}
	js, err := core.CanonicalJSON(c)
	if err != nil {
		return nil, err
	}
	res, err := tx.ExecContext(ctx, `UPDATE scenes SET status='frozen', frozen_by=?, frozen_at=?, contract_json=?
		WHERE scene_id=? AND version=? AND status='draft' AND hash=?`, c.FrozenBy, c.FrozenAt.UnixMilli(), string(js), id, version, expectHash)
	if err != nil {
		return nil, sqldb.Err(err, "freeze scene %s", SceneSubject(id, version))
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return nil, core.FieldErrorf(core.CodeConflict, "sceneHash", "scene %s is no longer a draft with hash %s", SceneSubject(id, version), expectHash)
	}
	payload := map[string]any{"sceneId": id, "sceneVersion": version, "hash": expectHash}
	if _, err := audit.New(s.db).AppendTx(ctx, tx, by, AuditSceneFreeze, SceneSubject(id, version), c.LineID, payload); err != nil {
		return nil, err
	}
	if err := tx.Commit(); err != nil {
		return nil, sqldb.Err(err, "commit freeze of scene %s", SceneSubject(id, version))
	}
	return c, nil
}

const sceneCols = `scene_id, version, status, hash, contract_json`

// sceneRow scans one row of sceneCols and decodes its contract, checking
// that the stored columns agree with it. sql.ErrNoRows passes through.
func sceneRow(sc interface{ Scan(...any) error }) (*contract.SceneContract, error) {
	var id, version, status, hash, js string
	if err := sc.Scan(&id, &version, &status, &hash, &js); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, err
		}
		return nil, sqldb.Err(err, "read scene")
	}
	c, err := contract.ParseScene([]byte(js))
	if err != nil {
		return nil, core.Wrap(core.CodeInternal, err, "stored scene %s does not decode", SceneSubject(id, version))
	}
	h, err := c.Hash()
	if err != nil {
		return nil, err
	}
	if h != hash || c.SceneID != id || c.SceneVersion != version || string(c.Status) != status {
		return nil, core.Errorf(core.CodeInternal, "stored scene %s disagrees with its columns (hash %s, recomputed %s)", SceneSubject(id, version), hash, h)
	}
	return c, nil
}

// GetScene returns scene id at version, or its latest version (greatest
// created_at, then last stored) when version is "".
func (s *Store) GetScene(ctx context.Context, id, version string) (*contract.SceneContract, error) {
	var row *sql.Row
	if version == "" {
		row = s.db.QueryRowContext(ctx, `SELECT `+sceneCols+` FROM scenes WHERE scene_id=? ORDER BY created_at DESC, rowid DESC LIMIT 1`, id)
	} else {
		row = s.db.QueryRowContext(ctx, `SELECT `+sceneCols+` FROM scenes WHERE scene_id=? AND version=?`, id, version)
	}
	c, err := sceneRow(row)
	if errors.Is(err, sql.ErrNoRows) {
		name := id
		if version != "" {
			name = SceneSubject(id, version)
		}
		return nil, notFound("scene", name)
	}
	return c, err
}

// ListScenes returns every stored scene version of line lineID ("" = all
// lines), ordered by scene id and created_at.
func (s *Store) ListScenes(ctx context.Context, lineID string) ([]*contract.SceneContract, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT `+sceneCols+` FROM scenes WHERE (?1='' OR line_id=?1) ORDER BY scene_id, created_at, rowid`, lineID)
	if err != nil {
		return nil, sqldb.Err(err, "list scenes")
	}
	defer rows.Close()
	out := []*contract.SceneContract{}
	for rows.Next() {
		c, err := sceneRow(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, sqldb.Err(rows.Err(), "list scenes")
}

package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/aml-project/aml/internal/core"
	"github.com/jackc/pgx/v5"
)

// The rules (validation, error codes, what Ensure* does to existing rows)
// are SQLite's, line for line; internal/store/storetest holds both to them.

func nowMs() int64 { return time.Now().UnixMilli() }

func requireID(field, id string) error {
	if strings.TrimSpace(id) == "" {
		return core.FieldErrorf(core.CodeInvalidArgument, field, "%s is required", field)
	}
	return nil
}

func (s *Store) EnsureLine(ctx context.Context, l core.Line) error { return ensureLine(ctx, s.pool, l) }

func ensureLine(ctx context.Context, db q, l core.Line) error {
	if err := requireID("line", l.ID); err != nil {
		return err
	}
	_, err := db.Exec(ctx, `INSERT INTO lines(id, name, created_at) VALUES ($1,$2,$3) ON CONFLICT(id) DO NOTHING`, l.ID, l.Name, nowMs())
	return dbErr(err, "ensure line %s", l.ID)
}

func (s *Store) EnsureProduct(ctx context.Context, p core.Product) error {
	return ensureProduct(ctx, s.pool, p)
}

func ensureProduct(ctx context.Context, db q, p core.Product) error {
	if err := errors.Join(requireID("product", p.ID), requireID("line", p.LineID)); err != nil {
		return err
	}
	if err := ensureLine(ctx, db, core.Line{ID: p.LineID}); err != nil {
		return err
	}
	_, err := db.Exec(ctx, `INSERT INTO products(id, line_id, name, created_at) VALUES ($1,$2,$3,$4) ON CONFLICT(id) DO NOTHING`, p.ID, p.LineID, p.Name, nowMs())
	return dbErr(err, "ensure product %s", p.ID)
}

func (s *Store) EnsureRecipe(ctx context.Context, r core.Recipe) error {
	return ensureRecipe(ctx, s.pool, r)
}

func ensureRecipe(ctx context.Context, db q, r core.Recipe) error {
	if err := errors.Join(requireID("recipe", r.ID), requireID("product", r.ProductID), requireID("line", r.LineID)); err != nil {
		return err
	}
	if err := ensureProduct(ctx, db, core.Product{ID: r.ProductID, LineID: r.LineID}); err != nil {
		return err
	}
	_, err := db.Exec(ctx, `INSERT INTO recipes(id, line_id, product_id, name, created_at) VALUES ($1,$2,$3,$4,$5) ON CONFLICT(id) DO NOTHING`, r.ID, r.LineID, r.ProductID, r.Name, nowMs())
	if err != nil {
		return dbErr(err, "ensure recipe %s", r.ID)
	}
	var line, product string
	if err := db.QueryRow(ctx, `SELECT line_id, product_id FROM recipes WHERE id=$1`, r.ID).Scan(&line, &product); err != nil {
		return dbErr(err, "read recipe %s", r.ID)
	}
	if line != r.LineID || product != r.ProductID {
		return core.FieldErrorf(core.CodeConflict, "recipe", "recipe %q belongs to line %q product %q, not line %q product %q", r.ID, line, product, r.LineID, r.ProductID)
	}
	return nil
}

func (s *Store) ListLines(ctx context.Context) ([]core.Line, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, name, created_at FROM lines ORDER BY id`)
	if err != nil {
		return nil, dbErr(err, "list lines")
	}
	defer rows.Close()
	var out []core.Line
	for rows.Next() {
		var l core.Line
		var at int64
		if err := rows.Scan(&l.ID, &l.Name, &at); err != nil {
			return nil, dbErr(err, "list lines")
		}
		l.CreatedAt = time.UnixMilli(at).UTC()
		out = append(out, l)
	}
	return out, dbErr(rows.Err(), "list lines")
}

func (s *Store) PutRecipeVersion(ctx context.Context, recipeID string, params map[string]any) (core.RecipeVersion, error) {
	if err := requireID("recipe", recipeID); err != nil {
		return core.RecipeVersion{}, err
	}
	if params == nil {
		params = map[string]any{}
	}
	canon, err := core.CanonicalJSON(params)
	if err != nil {
		return core.RecipeVersion{}, err
	}
	hash, _ := core.CanonicalHash(params)
	var v int
	now := nowMs()
	existing := false
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		// The recipe row lock serialises version numbering of one recipe
		// across processes (SQLite gets this from its single writer).
		var id string
		err := tx.QueryRow(ctx, `SELECT id FROM recipes WHERE id=$1 FOR UPDATE`, recipeID).Scan(&id)
		if noRows(err) {
			return notFound("recipe", recipeID)
		}
		if err != nil {
			return dbErr(err, "read recipe")
		}
		err = tx.QueryRow(ctx, `SELECT version FROM recipe_versions WHERE recipe_id=$1 AND content_hash=$2`, recipeID, hash).Scan(&v)
		if err == nil {
			existing = true
			return nil
		}
		if !noRows(err) {
			return dbErr(err, "read recipe versions")
		}
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version),0)+1 FROM recipe_versions WHERE recipe_id=$1`, recipeID).Scan(&v); err != nil {
			return dbErr(err, "next recipe version")
		}
		_, err = tx.Exec(ctx, `INSERT INTO recipe_versions(recipe_id, version, params, content_hash, created_at) VALUES ($1,$2,$3,$4,$5)`,
			recipeID, v, string(canon), hash, now)
		return dbErr(err, "insert recipe version")
	})
	if err != nil {
		return core.RecipeVersion{}, err
	}
	if existing {
		return s.GetRecipeVersion(ctx, recipeID, v)
	}
	var p map[string]any
	_ = json.Unmarshal(canon, &p)
	return core.RecipeVersion{RecipeID: recipeID, Version: v, Params: p, ContentHash: hash, CreatedAt: time.UnixMilli(now).UTC()}, nil
}

func (s *Store) GetRecipeVersion(ctx context.Context, recipeID string, version int) (core.RecipeVersion, error) {
	var rv core.RecipeVersion
	var params string
	var at int64
	err := s.pool.QueryRow(ctx, `SELECT recipe_id, version, params, content_hash, created_at FROM recipe_versions WHERE recipe_id=$1 AND version=$2`,
		recipeID, version).Scan(&rv.RecipeID, &rv.Version, &params, &rv.ContentHash, &at)
	if noRows(err) {
		return rv, core.FieldErrorf(core.CodeNotFound, "recipeVersion", "recipe %q has no version %d", recipeID, version)
	}
	if err != nil {
		return rv, dbErr(err, "read recipe version")
	}
	rv.CreatedAt = time.UnixMilli(at).UTC()
	if err := json.Unmarshal([]byte(params), &rv.Params); err != nil {
		return rv, core.Wrap(core.CodeInternal, err, "decode recipe params")
	}
	return rv, nil
}

func (s *Store) ListRecipeVersions(ctx context.Context, recipeID string) ([]core.RecipeVersion, error) {
	rows, err := s.pool.Query(ctx, `SELECT recipe_id, version, params, content_hash, created_at FROM recipe_versions WHERE recipe_id=$1 ORDER BY version`, recipeID)
	if err != nil {
		return nil, dbErr(err, "list recipe versions")
	}
	defer rows.Close()
	out := []core.RecipeVersion{}
	for rows.Next() {
		var rv core.RecipeVersion
		var params string
		var at int64
		if err := rows.Scan(&rv.RecipeID, &rv.Version, &params, &rv.ContentHash, &at); err != nil {
			return nil, dbErr(err, "list recipe versions")
		}
		rv.CreatedAt = time.UnixMilli(at).UTC()
		if err := json.Unmarshal([]byte(params), &rv.Params); err != nil {
			return nil, core.Wrap(core.CodeInternal, err, "decode recipe params")
		}
		out = append(out, rv)
	}
	return out, dbErr(rows.Err(), "list recipe versions")
}

func validateNode(n core.Node) error {
	if err := requireID("node", n.ID); err != nil {
		return err
	}
	if n.Kind != core.NodeDAQ && n.Kind != core.NodeDCW {
		return core.FieldErrorf(core.CodeInvalidArgument, "kind", "node %q: kind must be %q or %q, got %q", n.ID, core.NodeDAQ, core.NodeDCW, n.Kind)
	}
	if n.Min != nil && n.Max != nil && *n.Min > *n.Max {
		return core.FieldErrorf(core.CodeInvalidArgument, "min", "node %q: min %g > max %g", n.ID, *n.Min, *n.Max)
	}
	return nil
}

func (s *Store) UpsertNode(ctx context.Context, n core.Node) error {
	if err := validateNode(n); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO nodes(id, line_id, unit, min, max, kind, meaning, created_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)
		ON CONFLICT(id) DO UPDATE SET line_id=excluded.line_id, unit=excluded.unit, min=excluded.min, max=excluded.max, kind=excluded.kind, meaning=excluded.meaning`,
		n.ID, n.LineID, n.Unit, n.Min, n.Max, n.Kind, n.Meaning, nowMs())
	return dbErr(err, "upsert node %s", n.ID)
}

// ensureNode creates the node if absent; it returns the pk and whether it
// created the row. Two transactions creating the same node queue on the
// unique index; the loser's ON CONFLICT DO NOTHING then reads the winner's
// row.
func ensureNode(ctx context.Context, db q, n core.Node) (int64, bool, error) {
	if n.Kind == "" {
		n.Kind = core.NodeDAQ
	}
	if err := validateNode(n); err != nil {
		return 0, false, err
	}
	var pk int64
	err := db.QueryRow(ctx, `SELECT pk FROM nodes WHERE id=$1`, n.ID).Scan(&pk)
	if err == nil {
		return pk, false, nil
	}
	if !noRows(err) {
		return 0, false, dbErr(err, "read node %s", n.ID)
	}
	err = db.QueryRow(ctx, `INSERT INTO nodes(id, line_id, unit, min, max, kind, meaning, created_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)
		ON CONFLICT(id) DO NOTHING RETURNING pk`,
		n.ID, n.LineID, n.Unit, n.Min, n.Max, n.Kind, n.Meaning, nowMs()).Scan(&pk)
	if err == nil {
		return pk, true, nil
	}
	if !noRows(err) {
		return 0, false, dbErr(err, "create node %s", n.ID)
	}
	if err := db.QueryRow(ctx, `SELECT pk FROM nodes WHERE id=$1`, n.ID).Scan(&pk); err != nil {
		return 0, false, dbErr(err, "read node %s", n.ID)
	}
	return pk, false, nil
}

const nodeCols = `id, line_id, unit, min, max, kind, meaning, created_at`

func scanNode(sc interface{ Scan(...any) error }) (core.Node, error) {
	var n core.Node
	var at int64
	if err := sc.Scan(&n.ID, &n.LineID, &n.Unit, &n.Min, &n.Max, &n.Kind, &n.Meaning, &at); err != nil {
		return n, err
	}
	n.CreatedAt = time.UnixMilli(at).UTC()
	return n, nil
}

func (s *Store) GetNode(ctx context.Context, id string) (core.Node, error) {
	n, err := scanNode(s.pool.QueryRow(ctx, `SELECT `+nodeCols+` FROM nodes WHERE id=$1`, id))
	if noRows(err) {
		return n, notFound("node", id)
	}
	return n, dbErr(err, "read node %s", id)
}

func (s *Store) ListNodes(ctx context.Context, lineID string) ([]core.Node, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+nodeCols+` FROM nodes WHERE ($1='' OR line_id=$1) ORDER BY id`, lineID)
	if err != nil {
		return nil, dbErr(err, "list nodes")
	}
	defer rows.Close()
	var out []core.Node
	for rows.Next() {
		n, err := scanNode(rows)
		if err != nil {
			return nil, dbErr(err, "list nodes")
		}
		out = append(out, n)
	}
	return out, dbErr(rows.Err(), "list nodes")
}

func validateRun(r core.Run) error {
	if err := errors.Join(requireID("run", r.ID), requireID("line", r.LineID), requireID("product", r.ProductID), requireID("recipe", r.RecipeID)); err != nil {
		return err
	}
	switch r.Status {
	case core.RunActive, core.RunEnded, core.RunAborted:
	default:
		return core.FieldErrorf(core.CodeInvalidArgument, "status", "run %q: status must be active, ended or aborted, got %q", r.ID, r.Status)
	}
	if r.EndedMs != nil && *r.EndedMs < r.StartedMs {
		return core.FieldErrorf(core.CodeInvalidArgument, "endedAtMs", "run %q ends (%d) before it starts (%d)", r.ID, *r.EndedMs, r.StartedMs)
	}
	if r.Status == core.RunEnded && r.EndedMs == nil {
		return core.FieldErrorf(core.CodeInvalidArgument, "endedAtMs", "run %q is ended but has no end time", r.ID)
	}
	return nil
}

// createRun inserts the run; ON CONFLICT DO NOTHING (instead of catching
// the unique violation) keeps the surrounding transaction usable, which an
// ingest transaction that continues after "already exists" needs.
func createRun(ctx context.Context, db q, r core.Run) (bool, error) {
	if err := validateRun(r); err != nil {
		return false, err
	}
	if err := ensureRecipe(ctx, db, core.Recipe{ID: r.RecipeID, LineID: r.LineID, ProductID: r.ProductID}); err != nil {
		return false, err
	}
	tag, err := db.Exec(ctx, `INSERT INTO runs(id, line_id, product_id, recipe_id, recipe_version, started_ms, ended_ms, status, created_at)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9) ON CONFLICT(id) DO NOTHING`,
		r.ID, r.LineID, r.ProductID, r.RecipeID, r.RecipeVersion, r.StartedMs, r.EndedMs, r.Status, nowMs())
	if err != nil {
		return false, dbErr(err, "create run %s", r.ID)
	}
	return tag.RowsAffected() == 1, nil
}

func (s *Store) CreateRun(ctx context.Context, r core.Run) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		created, err := createRun(ctx, tx, r)
		if err != nil {
			return err
		}
		if !created {
			return core.FieldErrorf(core.CodeConflict, "run", "run %q already exists", r.ID)
		}
		return nil
	})
}

const runCols = `id, line_id, product_id, recipe_id, recipe_version, started_ms, ended_ms, status`

func scanRun(sc interface{ Scan(...any) error }) (core.Run, error) {
	var r core.Run
	err := sc.Scan(&r.ID, &r.LineID, &r.ProductID, &r.RecipeID, &r.RecipeVersion, &r.StartedMs, &r.EndedMs, &r.Status)
	return r, err
}

func (s *Store) GetRun(ctx context.Context, id string) (core.Run, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, `SELECT `+runCols+` FROM runs WHERE id=$1`, id))
	if noRows(err) {
		return r, notFound("run", id)
	}
	return r, dbErr(err, "read run %s", id)
}

func (s *Store) ListRuns(ctx context.Context, f core.RunFilter) ([]core.Run, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+runCols+` FROM runs
		WHERE ($1='' OR line_id=$1) AND ($2='' OR product_id=$2) AND ($3='' OR recipe_id=$3) AND ($4='' OR status=$4)
		ORDER BY started_ms, id`, f.Line, f.Product, f.Recipe, f.Status)
	if err != nil {
		return nil, dbErr(err, "list runs")
	}
	defer rows.Close()
	var out []core.Run
	for rows.Next() {
		r, err := scanRun(rows)
		if err != nil {
			return nil, dbErr(err, "list runs")
		}
		out = append(out, r)
	}
	return out, dbErr(rows.Err(), "list runs")
}

func (s *Store) EndRun(ctx context.Context, id string, endedMs int64) error {
	tag, err := s.pool.Exec(ctx, `UPDATE runs SET status='ended', ended_ms=$1 WHERE id=$2 AND status='active' AND started_ms<=$1`, endedMs, id)
	if err != nil {
		return dbErr(err, "end run %s", id)
	}
	if tag.RowsAffected() == 0 {
		r, err := s.GetRun(ctx, id)
		if err != nil {
			return err
		}
		if r.Status != core.RunActive {
			return core.FieldErrorf(core.CodeConflict, "run", "run %q is %s, not active", id, r.Status)
		}
		return core.FieldErrorf(core.CodeInvalidArgument, "endedAtMs", "run %q cannot end at %d before its start %d", id, endedMs, r.StartedMs)
	}
	return nil
}

func (s *Store) AddContextSegment(ctx context.Context, seg core.ContextSegment) (core.ContextSegment, error) {
	if err := errors.Join(requireID("runId", seg.RunID), requireID("recipeId", seg.RecipeID), requireID("confirmedBy", seg.ConfirmedBy)); err != nil {
		return seg, err
	}
	if seg.ToMs != nil && *seg.ToMs < seg.FromMs {
		return seg, core.FieldErrorf(core.CodeInvalidArgument, "toMs", "segment ends before it starts")
	}
	if seg.ConfirmedAt.IsZero() {
		seg.ConfirmedAt = time.Now().UTC()
	}
	if _, err := s.GetRun(ctx, seg.RunID); err != nil {
		return seg, err
	}
	rv, err := s.GetRecipeVersion(ctx, seg.RecipeID, seg.RecipeVersion)
	if err != nil {
		return seg, err
	}
	if seg.ContentHash == "" {
		seg.ContentHash = rv.ContentHash
	}
	err = s.pool.QueryRow(ctx, `INSERT INTO context_segments(run_id, recipe_id, recipe_version, content_hash, from_ms, to_ms, confirmed_by, confirmed_at)
		VALUES ($1,$2,$3,$4,$5,$6,$7,$8) RETURNING id`, seg.RunID, seg.RecipeID, seg.RecipeVersion, seg.ContentHash, seg.FromMs, seg.ToMs, seg.ConfirmedBy, seg.ConfirmedAt.UnixMilli()).Scan(&seg.ID)
	return seg, dbErr(err, "add context segment")
}

func (s *Store) ListContextSegments(ctx context.Context, runID string) ([]core.ContextSegment, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, run_id, recipe_id, recipe_version, content_hash, from_ms, to_ms, confirmed_by, confirmed_at
		FROM context_segments WHERE run_id=$1 ORDER BY id`, runID)
	if err != nil {
		return nil, dbErr(err, "list context segments")
	}
	defer rows.Close()
	var out []core.ContextSegment
	for rows.Next() {
		var c core.ContextSegment
		var at int64
		if err := rows.Scan(&c.ID, &c.RunID, &c.RecipeID, &c.RecipeVersion, &c.ContentHash, &c.FromMs, &c.ToMs, &c.ConfirmedBy, &at); err != nil {
			return nil, dbErr(err, "list context segments")
		}
		c.ConfirmedAt = time.UnixMilli(at).UTC()
		out = append(out, c)
	}
	return out, dbErr(rows.Err(), "list context segments")
}

package records

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
)

// EnsureLine implements core.Meta.
func (c *Core) EnsureLine(ctx context.Context, l core.Line) error { return ensureLine(ctx, c.w, l) }

func ensureLine(ctx context.Context, db Conn, l core.Line) error {
	if err := requireID("line", l.ID); err != nil {
		return err
	}
	_, err := db.Exec(ctx, `INSERT INTO lines(id, name, created_at) VALUES (?,?,?) ON CONFLICT(id) DO NOTHING`, l.ID, l.Name, nowMs())
	return dbErr(err, "ensure line %s", l.ID)
}

// EnsureProduct implements core.Meta.
func (c *Core) EnsureProduct(ctx context.Context, p core.Product) error {
	return ensureProduct(ctx, c.w, p)
}

// ensureProduct creates product p (and its line) unless it exists. A
// product id belongs to the first line that used it: the id registered
// for another line is refused (AML_CONFLICT), so a principal of one line
// cannot mix its runs and samples into another line's product history.
// The INSERT … ON CONFLICT DO NOTHING waits for a concurrent insert of
// the same id to commit or roll back (PostgreSQL, READ COMMITTED), and
// the SELECT after it sees the winner's row: of two lines claiming one
// new id at once, exactly one gets it.
func ensureProduct(ctx context.Context, db Conn, p core.Product) error {
	if err := errors.Join(requireID("product", p.ID), requireID("line", p.LineID)); err != nil {
		return err
	}
	if err := ensureLine(ctx, db, core.Line{ID: p.LineID}); err != nil {
		return err
	}
	if _, err := db.Exec(ctx, `INSERT INTO products(id, line_id, name, created_at) VALUES (?,?,?,?) ON CONFLICT(id) DO NOTHING`, p.ID, p.LineID, p.Name, nowMs()); err != nil {
		return dbErr(err, "ensure product %s", p.ID)
	}
	var line string
	if err := db.QueryRow(ctx, `SELECT line_id FROM products WHERE id=?`, p.ID).Scan(&line); err != nil {
		return dbErr(err, "read product %s", p.ID)
	}
	if line != p.LineID {
		// The caller may be scoped to p's line only: the refusal names
		// the caller's line, never the product's.
		return core.FieldErrorf(core.CodeConflict, "product", "product %q is registered for another line, not line %q; use another product id", p.ID, p.LineID)
	}
	return nil
}

// ClaimProduct is ensureProduct inside a back-end's ingest transaction:
// the sample contexts an ingest interns (internal/store/samples) use their
// product as runs do.
func ClaimProduct(ctx context.Context, db Conn, lineID, productID string) error {
	return ensureProduct(ctx, db, core.Product{ID: productID, LineID: lineID})
}

// ClaimRecipe records that line lineID uses recipe recipeID for product
// productID (a sample's context), in db's transaction: the first use
// registers the recipe and claims the product for the line; a recipe of
// another line or product is refused as EnsureRecipe refuses it.
func ClaimRecipe(ctx context.Context, db Conn, lineID, productID, recipeID string) error {
	return ensureRecipe(ctx, db, core.Recipe{ID: recipeID, LineID: lineID, ProductID: productID})
}

// EnsureRecipe implements core.Meta.
func (c *Core) EnsureRecipe(ctx context.Context, r core.Recipe) error {
	return ensureRecipe(ctx, c.w, r)
}

func ensureRecipe(ctx context.Context, db Conn, r core.Recipe) error {
	if err := errors.Join(requireID("recipe", r.ID), requireID("product", r.ProductID), requireID("line", r.LineID)); err != nil {
		return err
	}
	if err := ensureProduct(ctx, db, core.Product{ID: r.ProductID, LineID: r.LineID}); err != nil {
		return err
	}
	_, err := db.Exec(ctx, `INSERT INTO recipes(id, line_id, product_id, name, created_at) VALUES (?,?,?,?,?) ON CONFLICT(id) DO NOTHING`, r.ID, r.LineID, r.ProductID, r.Name, nowMs())
	if err != nil {
		return dbErr(err, "ensure recipe %s", r.ID)
	}
	var line, product string
	if err := db.QueryRow(ctx, `SELECT line_id, product_id FROM recipes WHERE id=?`, r.ID).Scan(&line, &product); err != nil {
		return dbErr(err, "read recipe %s", r.ID)
	}
	if line != r.LineID || product != r.ProductID {
		// The caller may be scoped to r's line only: the refusal names
		// the caller's line and product, never the recipe's.
		return core.FieldErrorf(core.CodeConflict, "recipe", "recipe %q is registered for another line or product, not line %q product %q", r.ID, r.LineID, r.ProductID)
	}
	return nil
}

// ListLines implements core.Meta.
func (c *Core) ListLines(ctx context.Context) ([]core.Line, error) {
	return queryList(ctx, c.db, "list lines", func(r scanner) (core.Line, error) {
		var l core.Line
		var at int64
		err := r.Scan(&l.ID, &l.Name, &at)
		l.CreatedAt = time.UnixMilli(at).UTC()
		return l, err
	}, `SELECT id, name, created_at FROM lines ORDER BY id`)
}

// PutRecipeVersion implements core.Meta. The recipe row is locked while the
// next version number is taken (on PostgreSQL: FOR UPDATE, so two
// processes cannot number the same version; SQLite's single writer does
// that by itself).
func (c *Core) PutRecipeVersion(ctx context.Context, recipeID string, params map[string]any) (core.RecipeVersion, error) {
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
	tx, err := c.db.BeginConcurrent(ctx)
	if err != nil {
		return core.RecipeVersion{}, dbErr(err, "begin")
	}
	defer tx.Rollback()
	var id string
	err = tx.QueryRowContext(ctx, `SELECT id FROM recipes WHERE id=?`+c.db.Dialect().RowLock, recipeID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return core.RecipeVersion{}, notFound("recipe", recipeID)
	}
	if err != nil {
		return core.RecipeVersion{}, dbErr(err, "read recipe")
	}
	var v int
	err = tx.QueryRowContext(ctx, `SELECT version FROM recipe_versions WHERE recipe_id=? AND content_hash=?`, recipeID, hash).Scan(&v)
	if err == nil {
		// The same content is already a version: that one is the answer.
		// Release the transaction first (on SQLite it holds the writer).
		_ = tx.Rollback() // read only so far; the read below is what matters
		return c.GetRecipeVersion(ctx, recipeID, v)
	} else if !errors.Is(err, sql.ErrNoRows) {
		return core.RecipeVersion{}, dbErr(err, "read recipe versions")
	}
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version),0)+1 FROM recipe_versions WHERE recipe_id=?`, recipeID).Scan(&v); err != nil {
		return core.RecipeVersion{}, dbErr(err, "next recipe version")
	}
	now := nowMs()
	if _, err := tx.ExecContext(ctx, `INSERT INTO recipe_versions(recipe_id, version, params, content_hash, created_at) VALUES (?,?,?,?,?)`,
		recipeID, v, string(canon), hash, now); err != nil {
		return core.RecipeVersion{}, dbErr(err, "insert recipe version")
	}
	if err := tx.Commit(); err != nil {
		return core.RecipeVersion{}, dbErr(err, "commit recipe version")
	}
	var p map[string]any
	_ = json.Unmarshal(canon, &p) // canon was made from a map by CanonicalJSON
	return core.RecipeVersion{RecipeID: recipeID, Version: v, Params: p, ContentHash: hash, CreatedAt: time.UnixMilli(now).UTC()}, nil
}

const recipeVersionCols = `recipe_id, version, params, content_hash, created_at`

func scanRecipeVersion(sc scanner) (core.RecipeVersion, error) {
	var rv core.RecipeVersion
	var params string
	var at int64
	if err := sc.Scan(&rv.RecipeID, &rv.Version, &params, &rv.ContentHash, &at); err != nil {
		return rv, err
	}
	rv.CreatedAt = time.UnixMilli(at).UTC()
	if err := json.Unmarshal([]byte(params), &rv.Params); err != nil {
		return rv, core.Wrap(core.CodeInternal, err, "decode recipe params")
	}
	return rv, nil
}

// GetRecipeVersion implements core.Meta.
func (c *Core) GetRecipeVersion(ctx context.Context, recipeID string, version int) (core.RecipeVersion, error) {
	rv, err := scanRecipeVersion(c.db.FastRow(ctx, `SELECT `+recipeVersionCols+` FROM recipe_versions WHERE recipe_id=? AND version=?`, recipeID, version))
	if errors.Is(err, sql.ErrNoRows) {
		return rv, core.FieldErrorf(core.CodeNotFound, "recipeVersion", "recipe %q has no version %d", recipeID, version)
	}
	return rv, dbErr(err, "read recipe version")
}

// ListRecipeVersions implements core.Meta.
func (c *Core) ListRecipeVersions(ctx context.Context, recipeID string) ([]core.RecipeVersion, error) {
	return queryList(ctx, c.db, "list recipe versions", scanRecipeVersion, `SELECT `+recipeVersionCols+` FROM recipe_versions WHERE recipe_id=? ORDER BY version`, recipeID)
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

// UpsertNode implements core.Meta. A node stays on the line that first
// declared it: an upsert naming another line updates nothing and is
// AML_CONFLICT (naming neither line), so a connector or a simulation of
// one line cannot take over another line's node by reusing its id.
func (c *Core) UpsertNode(ctx context.Context, n core.Node) error {
	if err := validateNode(n); err != nil {
		return err
	}
	rows, err := c.db.FastExec(ctx, `INSERT INTO nodes(id, line_id, unit, min, max, kind, meaning, created_at) VALUES (?,?,?,?,?,?,?,?)
		ON CONFLICT(id) DO UPDATE SET unit=excluded.unit, min=excluded.min, max=excluded.max, kind=excluded.kind, meaning=excluded.meaning
		WHERE nodes.line_id = excluded.line_id`,
		n.ID, n.LineID, n.Unit, n.Min, n.Max, n.Kind, n.Meaning, nowMs())
	if err != nil {
		return dbErr(err, "upsert node %s", n.ID)
	}
	if rows == 0 {
		return core.FieldErrorf(core.CodeConflict, "node", "node %q belongs to another line than %q", n.ID, n.LineID)
	}
	return nil
}

// ApplyNodes implements core.Meta.
func (c *Core) ApplyNodes(ctx context.Context, actor, line string, nodes []core.Node) error {
	for _, n := range nodes {
		if n.LineID != line {
			return core.FieldErrorf(core.CodeInvalidArgument, "nodes", "node %q is of line %q, not %q", n.ID, n.LineID, line)
		}
		if err := validateNode(n); err != nil {
			return err
		}
	}
	tx, err := c.db.Begin(ctx)
	if err != nil {
		return dbErr(err, "begin")
	}
	defer func() { _ = tx.Rollback() }()
	type change struct {
		ID     string     `json:"id"`
		Before *core.Node `json:"before,omitempty"`
		After  core.Node  `json:"after"`
	}
	changes := make([]change, 0, len(nodes))
	for _, n := range nodes {
		old, err := scanNode(tx.QueryRowContext(ctx, `SELECT `+nodeCols+` FROM nodes WHERE id=?`, n.ID))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			changes = append(changes, change{ID: n.ID, After: n})
		case err != nil:
			return dbErr(err, "read node %s", n.ID)
		case old.LineID != line:
			return core.FieldErrorf(core.CodeConflict, "nodes", "node %q belongs to line %q, not %q", n.ID, old.LineID, line)
		default:
			n.CreatedAt = old.CreatedAt
			changes = append(changes, change{ID: n.ID, Before: &old, After: n})
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO nodes(id, line_id, unit, min, max, kind, meaning, created_at) VALUES (?,?,?,?,?,?,?,?)
			ON CONFLICT(id) DO UPDATE SET unit=excluded.unit, min=excluded.min, max=excluded.max, kind=excluded.kind, meaning=excluded.meaning`,
			n.ID, n.LineID, n.Unit, n.Min, n.Max, n.Kind, n.Meaning, nowMs()); err != nil {
			return dbErr(err, "apply node %s", n.ID)
		}
	}
	if _, err := audit.New(c.db).AppendTx(ctx, tx, actor, "line.apply", line, line, map[string]any{"nodes": changes}); err != nil {
		return err
	}
	return dbErr(tx.Commit(), "commit line %s", line)
}

// EnsureNode creates node n in db if it is absent (kind daq unless given;
// an existing node keeps its fields) and returns its pk and whether it
// created the row: what an ingest transaction does for a sample of an
// unknown node. Two transactions creating the same node queue on the
// unique index; the loser's ON CONFLICT DO NOTHING then reads the winner's
// row.
func EnsureNode(ctx context.Context, db Conn, n core.Node) (int64, bool, error) {
	if n.Kind == "" {
		n.Kind = core.NodeDAQ
	}
	if err := validateNode(n); err != nil {
		return 0, false, err
	}
	var pk int64
	err := db.QueryRow(ctx, `SELECT pk FROM nodes WHERE id=?`, n.ID).Scan(&pk)
	if err == nil {
		return pk, false, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, false, dbErr(err, "read node %s", n.ID)
	}
	err = db.QueryRow(ctx, `INSERT INTO nodes(id, line_id, unit, min, max, kind, meaning, created_at) VALUES (?,?,?,?,?,?,?,?)
		ON CONFLICT(id) DO NOTHING RETURNING pk`,
		n.ID, n.LineID, n.Unit, n.Min, n.Max, n.Kind, n.Meaning, nowMs()).Scan(&pk)
	if err == nil {
		return pk, true, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return 0, false, dbErr(err, "create node %s", n.ID)
	}
	if err := db.QueryRow(ctx, `SELECT pk FROM nodes WHERE id=?`, n.ID).Scan(&pk); err != nil {
		return 0, false, dbErr(err, "read node %s", n.ID)
	}
	return pk, false, nil
}

const nodeCols = `id, line_id, unit, min, max, kind, meaning, created_at`

// NodeColumns are the columns ScanNode reads, in its order, for a
// back-end's own query of nodes (the PostgreSQL ingest's GetNodes).
const NodeColumns = nodeCols

// ScanNode scans one row of NodeColumns.
func ScanNode(sc interface{ Scan(...any) error }) (core.Node, error) { return scanNode(sc) }

func scanNode(sc scanner) (core.Node, error) {
	var n core.Node
	var mn, mx sql.NullFloat64
	var at int64
	if err := sc.Scan(&n.ID, &n.LineID, &n.Unit, &mn, &mx, &n.Kind, &n.Meaning, &at); err != nil {
		return n, err
	}
	if mn.Valid {
		n.Min = &mn.Float64
	}
	if mx.Valid {
		n.Max = &mx.Float64
	}
	n.CreatedAt = time.UnixMilli(at).UTC()
	return n, nil
}

// GetNode implements core.Meta.
func (c *Core) GetNode(ctx context.Context, id string) (core.Node, error) {
	n, err := scanNode(c.db.FastRow(ctx, `SELECT `+nodeCols+` FROM nodes WHERE id=?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return n, notFound("node", id)
	}
	return n, dbErr(err, "read node %s", id)
}

// ListNodes implements core.Meta.
func (c *Core) ListNodes(ctx context.Context, lineID string) ([]core.Node, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT `+nodeCols+` FROM nodes WHERE (?1='' OR line_id=?1) ORDER BY id`, lineID)
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

// createRun inserts the run (and its line, product and recipe) and reports
// whether it did; false when the id exists. ON CONFLICT DO NOTHING (instead
// of catching the unique violation) keeps the surrounding transaction
// usable on PostgreSQL, which an ingest transaction that continues after
// "already exists" needs.
func createRun(ctx context.Context, db Conn, r core.Run) (bool, error) {
	if err := validateRun(r); err != nil {
		return false, err
	}
	if err := ensureRecipe(ctx, db, core.Recipe{ID: r.RecipeID, LineID: r.LineID, ProductID: r.ProductID}); err != nil {
		return false, err
	}
	n, err := db.Exec(ctx, `INSERT INTO runs(id, line_id, product_id, recipe_id, recipe_version, started_ms, ended_ms, status, created_at)
		VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT(id) DO NOTHING`,
		r.ID, r.LineID, r.ProductID, r.RecipeID, r.RecipeVersion, r.StartedMs, r.EndedMs, r.Status, nowMs())
	if err != nil {
		return false, dbErr(err, "create run %s", r.ID)
	}
	return n == 1, nil
}

// CreateRun implements core.Meta.
func (c *Core) CreateRun(ctx context.Context, r core.Run) error {
	tx, err := c.db.BeginConcurrent(ctx)
	if err != nil {
		return dbErr(err, "begin")
	}
	defer tx.Rollback()
	created, err := createRun(ctx, Tx(tx), r)
	if err != nil {
		return err
	}
	if !created {
		return core.FieldErrorf(core.CodeConflict, "run", "run %q already exists", r.ID)
	}
	return dbErr(tx.Commit(), "commit run")
}

// EnsureRun creates run r in db (and its line, product and recipe) if it
// does not exist, and reports whether it did: what an ingest transaction
// does for a file's run (core.IngestTx.EnsureRun).
func EnsureRun(ctx context.Context, db Conn, r core.Run) (bool, error) {
	var n int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM runs WHERE id=?`, r.ID).Scan(&n); err != nil {
		return false, dbErr(err, "read run")
	}
	if n > 0 {
		return false, nil
	}
	return createRun(ctx, db, r)
}

const runCols = `id, line_id, product_id, recipe_id, recipe_version, started_ms, ended_ms, status`

func scanRun(sc scanner) (core.Run, error) {
	var r core.Run
	var ver, ended sql.NullInt64
	if err := sc.Scan(&r.ID, &r.LineID, &r.ProductID, &r.RecipeID, &ver, &r.StartedMs, &ended, &r.Status); err != nil {
		return r, err
	}
	if ver.Valid {
		v := int(ver.Int64)
		r.RecipeVersion = &v
	}
	if ended.Valid {
		r.EndedMs = &ended.Int64
	}
	return r, nil
}

// GetRun implements core.Meta.
func (c *Core) GetRun(ctx context.Context, id string) (core.Run, error) {
	r, err := scanRun(c.db.FastRow(ctx, `SELECT `+runCols+` FROM runs WHERE id=?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, notFound("run", id)
	}
	return r, dbErr(err, "read run %s", id)
}

// ListRuns implements core.Meta.
func (c *Core) ListRuns(ctx context.Context, f core.RunFilter) ([]core.Run, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT `+runCols+` FROM runs
		WHERE (?1='' OR line_id=?1) AND (?2='' OR product_id=?2) AND (?3='' OR recipe_id=?3) AND (?4='' OR status=?4)
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

// EndRun implements core.Meta.
func (c *Core) EndRun(ctx context.Context, id string, endedMs int64) error {
	n, err := c.db.FastExec(ctx, `UPDATE runs SET status='ended', ended_ms=?1 WHERE id=?2 AND status='active' AND started_ms<=?1`, endedMs, id)
	if err != nil {
		return dbErr(err, "end run %s", id)
	}
	if n == 0 {
		r, err := c.GetRun(ctx, id)
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

// AddContextSegment implements core.Meta.
func (c *Core) AddContextSegment(ctx context.Context, seg core.ContextSegment) (core.ContextSegment, error) {
	if err := errors.Join(requireID("runId", seg.RunID), requireID("recipeId", seg.RecipeID), requireID("confirmedBy", seg.ConfirmedBy)); err != nil {
		return seg, err
	}
	if seg.ToMs != nil && *seg.ToMs < seg.FromMs {
		return seg, core.FieldErrorf(core.CodeInvalidArgument, "toMs", "segment ends before it starts")
	}
	if seg.ConfirmedAt.IsZero() {
		seg.ConfirmedAt = time.Now().UTC()
	}
	if _, err := c.GetRun(ctx, seg.RunID); err != nil {
		return seg, err
	}
	rv, err := c.GetRecipeVersion(ctx, seg.RecipeID, seg.RecipeVersion)
	if err != nil {
		return seg, err
	}
	if seg.ContentHash == "" {
		seg.ContentHash = rv.ContentHash
	}
	err = c.db.FastWriterRow(ctx, `INSERT INTO context_segments(run_id, recipe_id, recipe_version, content_hash, from_ms, to_ms, confirmed_by, confirmed_at)
		VALUES (?,?,?,?,?,?,?,?) RETURNING id`, seg.RunID, seg.RecipeID, seg.RecipeVersion, seg.ContentHash, seg.FromMs, seg.ToMs, seg.ConfirmedBy, seg.ConfirmedAt.UnixMilli()).Scan(&seg.ID)
	return seg, dbErr(err, "add context segment")
}

// ListContextSegments implements core.Meta.
func (c *Core) ListContextSegments(ctx context.Context, runID string) ([]core.ContextSegment, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT id, run_id, recipe_id, recipe_version, content_hash, from_ms, to_ms, confirmed_by, confirmed_at
		FROM context_segments WHERE run_id=? ORDER BY id`, runID)
	if err != nil {
		return nil, dbErr(err, "list context segments")
	}
	defer rows.Close()
	var out []core.ContextSegment
	for rows.Next() {
		var s core.ContextSegment
		var to sql.NullInt64
		var at int64
		if err := rows.Scan(&s.ID, &s.RunID, &s.RecipeID, &s.RecipeVersion, &s.ContentHash, &s.FromMs, &to, &s.ConfirmedBy, &at); err != nil {
			return nil, dbErr(err, "list context segments")
		}
		if to.Valid {
			s.ToMs = &to.Int64
		}
		s.ConfirmedAt = time.UnixMilli(at).UTC()
		out = append(out, s)
	}
	return out, dbErr(rows.Err(), "list context segments")
}

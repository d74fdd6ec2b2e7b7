package records

import (
	"context"
	"database/sql"
	"errors"

	"github.com/aml-project/aml/internal/audit"
	"github.com/aml-project/aml/internal/core"
)

// RecordRunEvent records what the plant says of one run: which recipe
// version it ran (set on the run, which may have none yet), when it ended
// (an active run is ended), and a context segment confirmed by
// ev.ConfirmedBy — the evidence that makes a dataset's lineage verify. One
// transaction with one audit entry ("run.event", by actor). A run of
// another line, product or recipe, a recipe version that does not exist
// or one that differs from the run's is refused.
func (c *Core) RecordRunEvent(ctx context.Context, actor string, ev core.RunEvent) (core.Run, core.ContextSegment, error) {
	var seg core.ContextSegment
	tx, err := c.db.Begin(ctx)
	if err != nil {
		return core.Run{}, seg, dbErr(err, "begin")
	}
	defer func() { _ = tx.Rollback() }()
	r, err := scanRun(tx.QueryRowContext(ctx, `SELECT `+runCols+` FROM runs WHERE id=?`, ev.RunID))
	if errors.Is(err, sql.ErrNoRows) {
		return r, seg, notFound("run", ev.RunID)
	}
	if err != nil {
		return r, seg, dbErr(err, "read run %s", ev.RunID)
	}
	if r.LineID != ev.LineID || r.RecipeID != ev.RecipeID {
		return r, seg, core.FieldErrorf(core.CodeConflict, "run", "run %q is of line %q recipe %q, not line %q recipe %q", r.ID, r.LineID, r.RecipeID, ev.LineID, ev.RecipeID)
	}
	rv, err := scanRecipeVersion(tx.QueryRowContext(ctx, `SELECT `+recipeVersionCols+` FROM recipe_versions WHERE recipe_id=? AND version=?`, ev.RecipeID, ev.RecipeVersion))
	if errors.Is(err, sql.ErrNoRows) {
		return r, seg, core.FieldErrorf(core.CodeNotFound, "recipeVersion", "recipe %q has no version %d (register it with recipe.put)", ev.RecipeID, ev.RecipeVersion)
	}
	if err != nil {
		return r, seg, dbErr(err, "read recipe version")
	}
	if r.RecipeVersion != nil && *r.RecipeVersion != ev.RecipeVersion {
		return r, seg, core.FieldErrorf(core.CodeConflict, "recipeVersion", "run %q ran version %d of recipe %q, not %d", r.ID, *r.RecipeVersion, r.RecipeID, ev.RecipeVersion)
	}
	if ev.EndMs != nil && *ev.EndMs < ev.StartMs {
		return r, seg, core.FieldErrorf(core.CodeInvalidArgument, "end", "run %q: the event ends before it starts", r.ID)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE runs SET recipe_version=? WHERE id=?`, ev.RecipeVersion, r.ID); err != nil {
		return r, seg, dbErr(err, "set run %s recipe version", r.ID)
	}
	v := ev.RecipeVersion
	r.RecipeVersion = &v
	if ev.EndMs != nil && r.Status == core.RunActive {
		if _, err := tx.ExecContext(ctx, `UPDATE runs SET status='ended', ended_ms=? WHERE id=?`, *ev.EndMs, r.ID); err != nil {
			return r, seg, dbErr(err, "end run %s", r.ID)
		}
		r.Status, r.EndedMs = core.RunEnded, ev.EndMs
	}
	seg = core.ContextSegment{RunID: r.ID, RecipeID: r.RecipeID, RecipeVersion: ev.RecipeVersion, ContentHash: rv.ContentHash,
		FromMs: ev.StartMs, ToMs: ev.EndMs, ConfirmedBy: ev.ConfirmedBy, ConfirmedAt: ev.ConfirmedAt}
	if err := tx.QueryRowContext(ctx, `INSERT INTO context_segments(run_id, recipe_id, recipe_version, content_hash, from_ms, to_ms, confirmed_by, confirmed_at)
		VALUES (?,?,?,?,?,?,?,?) RETURNING id`, seg.RunID, seg.RecipeID, seg.RecipeVersion, seg.ContentHash, seg.FromMs, seg.ToMs, seg.ConfirmedBy, seg.ConfirmedAt.UnixMilli()).Scan(&seg.ID); err != nil {
		return r, seg, dbErr(err, "add context segment")
	}
	if _, err := audit.New(c.db).AppendTx(ctx, tx, actor, "run.event", r.ID, r.LineID, map[string]any{"segment": seg}); err != nil {
		return r, seg, err
	}
	return r, seg, dbErr(tx.Commit(), "commit run event %s", r.ID)
}

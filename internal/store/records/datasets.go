package records

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/aml-project/aml/internal/core"
)

const datasetCols = `id, line_id, product_id, recipe_id, purpose, path, sha256, spec_json, train_windows, val_windows, test_windows, runs, bytes, lineage_verified, note, created_by, created_at`

// InsertDataset implements core.Datasets.
func (c *Core) InsertDataset(ctx context.Context, d core.Dataset) error {
	if err := requireID("id", d.ID); err != nil {
		return err
	}
	if d.CreatedAt.IsZero() {
		d.CreatedAt = time.Now()
	}
	_, err := c.db.ExecContext(ctx, `INSERT INTO datasets(`+datasetCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		d.ID, d.LineID, d.ProductID, d.RecipeID, d.Purpose, d.Path, d.SHA256, d.SpecJSON, d.TrainWindows, d.ValWindows, d.TestWindows,
		d.Runs, d.Bytes, b2i(d.LineageVerified), d.Note, d.CreatedBy, d.CreatedAt.UnixMilli())
	if isUnique(err) {
		return core.FieldErrorf(core.CodeConflict, "id", "dataset %q already exists", d.ID)
	}
	return dbErr(err, "insert dataset %s", d.ID)
}

func scanDataset(sc scanner) (core.Dataset, error) {
	var d core.Dataset
	var lv int
	var at int64
	err := sc.Scan(&d.ID, &d.LineID, &d.ProductID, &d.RecipeID, &d.Purpose, &d.Path, &d.SHA256, &d.SpecJSON, &d.TrainWindows, &d.ValWindows, &d.TestWindows,
		&d.Runs, &d.Bytes, &lv, &d.Note, &d.CreatedBy, &at)
	d.LineageVerified = lv == 1
	d.CreatedAt = time.UnixMilli(at).UTC()
	return d, err
}

// GetDataset implements core.Datasets.
func (c *Core) GetDataset(ctx context.Context, id string) (core.Dataset, error) {
	d, err := scanDataset(c.db.FastRow(ctx, `SELECT `+datasetCols+` FROM datasets WHERE id=?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return d, notFound("dataset", id)
	}
	return d, dbErr(err, "read dataset %s", id)
}

// ListDatasets implements core.Datasets.
func (c *Core) ListDatasets(ctx context.Context, f core.DatasetFilter) ([]core.Dataset, error) {
	return queryList(ctx, c.db, "list datasets", scanDataset, `SELECT `+datasetCols+` FROM datasets
		WHERE (?1='' OR line_id=?1) AND (?2='' OR product_id=?2) AND (?3='' OR recipe_id=?3) ORDER BY created_at, id`, f.Line, f.Product, f.Recipe)
}

// AddDatasetRef implements core.Datasets.
func (c *Core) AddDatasetRef(ctx context.Context, r core.DatasetRef) error {
	_, err := c.db.ExecContext(ctx, `INSERT INTO dataset_refs(dataset_id, kind, ref_id) VALUES (?,?,?) ON CONFLICT DO NOTHING`, r.DatasetID, r.Kind, r.RefID)
	if isForeignKey(err) {
		return notFound("dataset", r.DatasetID)
	}
	return dbErr(err, "add dataset reference")
}

// RemoveDatasetRef implements core.Datasets.
func (c *Core) RemoveDatasetRef(ctx context.Context, r core.DatasetRef) error {
	_, err := c.db.ExecContext(ctx, `DELETE FROM dataset_refs WHERE dataset_id=? AND kind=? AND ref_id=?`, r.DatasetID, r.Kind, r.RefID)
	return dbErr(err, "remove dataset reference")
}

// ListDatasetRefs implements core.Datasets.
func (c *Core) ListDatasetRefs(ctx context.Context, id string) ([]core.DatasetRef, error) {
	rows, err := c.db.QueryContext(ctx, `SELECT dataset_id, kind, ref_id FROM dataset_refs WHERE dataset_id=? ORDER BY kind, ref_id`, id)
	if err != nil {
		return nil, dbErr(err, "list dataset references")
	}
	defer rows.Close()
	out := []core.DatasetRef{}
	for rows.Next() {
		var r core.DatasetRef
		if err := rows.Scan(&r.DatasetID, &r.Kind, &r.RefID); err != nil {
			return nil, dbErr(err, "list dataset references")
		}
		out = append(out, r)
	}
	return out, dbErr(rows.Err(), "list dataset references")
}

// DeleteDataset implements core.Datasets. It locks the dataset row first
// (on PostgreSQL): a concurrent AddDatasetRef, whose foreign-key check
// takes a share lock on the same row, then waits and fails instead of
// adding a reference to a dataset being deleted.
func (c *Core) DeleteDataset(ctx context.Context, id string) error {
	tx, err := c.db.BeginConcurrent(ctx)
	if err != nil {
		return dbErr(err, "begin")
	}
	defer tx.Rollback()
	var got string
	err = tx.QueryRowContext(ctx, `SELECT id FROM datasets WHERE id=?`+c.db.Dialect().RowLock, id).Scan(&got)
	if errors.Is(err, sql.ErrNoRows) {
		return notFound("dataset", id)
	}
	if err != nil {
		return dbErr(err, "lock dataset")
	}
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM dataset_refs WHERE dataset_id=?`, id).Scan(&n); err != nil {
		return dbErr(err, "count references")
	}
	if n > 0 {
		var kind, ref string
		if err := tx.QueryRowContext(ctx, `SELECT kind, ref_id FROM dataset_refs WHERE dataset_id=? ORDER BY kind, ref_id LIMIT 1`, id).Scan(&kind, &ref); err != nil {
			return dbErr(err, "read references")
		}
		return core.FieldErrorf(core.CodeInUse, "dataset", "dataset %q is referenced by %d item(s) (e.g. %s %s); delete those first", id, n, kind, ref)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM datasets WHERE id=?`, id); err != nil {
		return dbErr(err, "delete dataset")
	}
	return dbErr(tx.Commit(), "commit delete")
}

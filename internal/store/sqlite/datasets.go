package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/aml-project/aml/internal/core"
)

const datasetCols = `id, line_id, product_id, recipe_id, purpose, path, sha256, spec_json, train_windows, val_windows, test_windows, runs, bytes, lineage_verified, note, created_by, created_at`

func (s *Store) InsertDataset(ctx context.Context, d core.Dataset) error {
	if err := requireID("id", d.ID); err != nil {
		return err
	}
	if d.CreatedAt.IsZero() {
		d.CreatedAt = time.Now()
	}
	lv := 0
	if d.LineageVerified {
		lv = 1
	}
	_, err := s.w.ExecContext(ctx, `INSERT INTO datasets(`+datasetCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		d.ID, d.LineID, d.ProductID, d.RecipeID, d.Purpose, d.Path, d.SHA256, d.SpecJSON, d.TrainWindows, d.ValWindows, d.TestWindows,
		d.Runs, d.Bytes, lv, d.Note, d.CreatedBy, d.CreatedAt.UnixMilli())
	if isUnique(err) {
		return core.FieldErrorf(core.CodeConflict, "id", "dataset %q already exists", d.ID)
	}
	return dbErr(err, "insert dataset %s", d.ID)
}

func scanDataset(sc interface{ Scan(...any) error }) (core.Dataset, error) {
	var d core.Dataset
	var lv int
	var at int64
	err := sc.Scan(&d.ID, &d.LineID, &d.ProductID, &d.RecipeID, &d.Purpose, &d.Path, &d.SHA256, &d.SpecJSON, &d.TrainWindows, &d.ValWindows, &d.TestWindows,
		&d.Runs, &d.Bytes, &lv, &d.Note, &d.CreatedBy, &at)
	d.LineageVerified = lv == 1
	d.CreatedAt = time.UnixMilli(at).UTC()
	return d, err
}

func (s *Store) GetDataset(ctx context.Context, id string) (core.Dataset, error) {
	d, err := scanDataset(s.queryRow(ctx, s.r, `SELECT `+datasetCols+` FROM datasets WHERE id=?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return d, notFound("dataset", id)
	}
	return d, dbErr(err, "read dataset %s", id)
}

func (s *Store) ListDatasets(ctx context.Context, f core.DatasetFilter) ([]core.Dataset, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+datasetCols+` FROM datasets
		WHERE (?1='' OR line_id=?1) AND (?2='' OR product_id=?2) AND (?3='' OR recipe_id=?3) ORDER BY created_at, id`, f.Line, f.Product, f.Recipe)
	if err != nil {
		return nil, dbErr(err, "list datasets")
	}
	defer rows.Close()
	out := []core.Dataset{}
	for rows.Next() {
		d, err := scanDataset(rows)
		if err != nil {
			return nil, dbErr(err, "list datasets")
		}
		out = append(out, d)
	}
	return out, dbErr(rows.Err(), "list datasets")
}

func (s *Store) AddDatasetRef(ctx context.Context, r core.DatasetRef) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO dataset_refs(dataset_id, kind, ref_id) VALUES (?,?,?) ON CONFLICT DO NOTHING`, r.DatasetID, r.Kind, r.RefID)
	if isConstraint(err) {
		return notFound("dataset", r.DatasetID)
	}
	return dbErr(err, "add dataset reference")
}

func (s *Store) RemoveDatasetRef(ctx context.Context, r core.DatasetRef) error {
	_, err := s.w.ExecContext(ctx, `DELETE FROM dataset_refs WHERE dataset_id=? AND kind=? AND ref_id=?`, r.DatasetID, r.Kind, r.RefID)
	return dbErr(err, "remove dataset reference")
}

func (s *Store) ListDatasetRefs(ctx context.Context, id string) ([]core.DatasetRef, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT dataset_id, kind, ref_id FROM dataset_refs WHERE dataset_id=? ORDER BY kind, ref_id`, id)
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

func (s *Store) DeleteDataset(ctx context.Context, id string) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return dbErr(err, "begin")
	}
	defer tx.Rollback()
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
	res, err := tx.ExecContext(ctx, `DELETE FROM datasets WHERE id=?`, id)
	if err != nil {
		return dbErr(err, "delete dataset")
	}
	if k, _ := res.RowsAffected(); k == 0 {
		return notFound("dataset", id)
	}
	return dbErr(tx.Commit(), "commit delete")
}

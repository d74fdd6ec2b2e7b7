package records

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/aml-project/aml/internal/core"
)

var (
	_ core.PhysicsModels = (*Core)(nil)
	_ core.ExtTrainers   = (*Core)(nil)
)

// PutPhysics implements core.PhysicsModels.
func (c *Core) PutPhysics(ctx context.Context, m core.PhysicsModel) (core.PhysicsModel, error) {
	if err := errors.Join(requireID("id", m.ID), requireID("sha256", m.SHA256)); err != nil {
		return m, err
	}
	at := nowMs()
	_, err := c.w.Exec(ctx, `INSERT INTO physics_models(id, sha256, name, file_name, source, size, created_by, created_at) VALUES (?,?,?,?,?,?,?,?)
		ON CONFLICT(sha256) DO NOTHING`, m.ID, m.SHA256, m.Name, m.FileName, m.Source, int64(len(m.Source)), m.CreatedBy, at)
	if err != nil {
		return m, dbErr(err, "store physics model %s", m.ID)
	}
	got, err := c.GetPhysics(ctx, m.ID)
	if err != nil {
		return got, err
	}
	if got.SHA256 != m.SHA256 {
		return got, core.FieldErrorf(core.CodeConflict, "id", "physics model %s exists with another hash", m.ID)
	}
	return got, nil
}

const physicsCols = `id, sha256, name, file_name, size, created_by, created_at`

func scanPhysics(sc scanner, src *string) (core.PhysicsModel, error) {
	var m core.PhysicsModel
	var at int64
	dest := []any{&m.ID, &m.SHA256, &m.Name, &m.FileName, &m.Size, &m.CreatedBy, &at}
	if src != nil {
		dest = append(dest, src)
	}
	if err := sc.Scan(dest...); err != nil {
		return m, err
	}
	m.CreatedAt = time.UnixMilli(at).UTC()
	return m, nil
}

// GetPhysics implements core.PhysicsModels.
func (c *Core) GetPhysics(ctx context.Context, id string) (core.PhysicsModel, error) {
	var src string
	m, err := scanPhysics(c.db.QueryRowContext(ctx, `SELECT `+physicsCols+`, source FROM physics_models WHERE id=?`, id), &src)
	if errors.Is(err, sql.ErrNoRows) {
		return m, notFound("physics model", id)
	}
	m.Source = src
	return m, dbErr(err, "read physics model %s", id)
}

// ListPhysics implements core.PhysicsModels.
func (c *Core) ListPhysics(ctx context.Context) ([]core.PhysicsModel, error) {
	return queryList(ctx, c.db, "list physics models", func(r scanner) (core.PhysicsModel, error) { return scanPhysics(r, nil) },
		`SELECT `+physicsCols+` FROM physics_models ORDER BY created_at, id`)
}

// RegisterTrainer implements core.ExtTrainers.
func (c *Core) RegisterTrainer(ctx context.Context, t core.ExtTrainer) (core.ExtTrainer, error) {
	if err := errors.Join(requireID("name", t.Name), requireID("command", t.Command)); err != nil {
		return t, err
	}
	if t.Env == nil {
		t.Env = []string{}
	}
	env, err := json.Marshal(t.Env)
	if err != nil {
		return t, core.Wrap(core.CodeInternal, err, "trainer env")
	}
	_, err = c.w.Exec(ctx, `INSERT INTO ext_trainers(name, command, env_json, registered_by, registered_at) VALUES (?,?,?,?,?)
		ON CONFLICT(name) DO UPDATE SET command=excluded.command, env_json=excluded.env_json, registered_by=excluded.registered_by, registered_at=excluded.registered_at`,
		t.Name, t.Command, string(env), t.RegisteredBy, nowMs())
	if err != nil {
		return t, dbErr(err, "register trainer %s", t.Name)
	}
	return c.GetTrainer(ctx, t.Name)
}

const trainerCols = `name, command, env_json, registered_by, registered_at`

func scanTrainer(sc scanner) (core.ExtTrainer, error) {
	var t core.ExtTrainer
	var env string
	var at int64
	if err := sc.Scan(&t.Name, &t.Command, &env, &t.RegisteredBy, &at); err != nil {
		return t, err
	}
	if err := json.Unmarshal([]byte(env), &t.Env); err != nil {
		return t, err
	}
	if t.Env == nil {
		t.Env = []string{}
	}
	t.RegisteredAt = time.UnixMilli(at).UTC()
	return t, nil
}

// GetTrainer implements core.ExtTrainers.
func (c *Core) GetTrainer(ctx context.Context, name string) (core.ExtTrainer, error) {
	t, err := scanTrainer(c.db.QueryRowContext(ctx, `SELECT `+trainerCols+` FROM ext_trainers WHERE name=?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return t, notFound("trainer", name)
	}
	return t, dbErr(err, "read trainer %s", name)
}

// ListTrainers implements core.ExtTrainers.
func (c *Core) ListTrainers(ctx context.Context) ([]core.ExtTrainer, error) {
	return queryList(ctx, c.db, "list trainers", scanTrainer, `SELECT `+trainerCols+` FROM ext_trainers ORDER BY name`)
}

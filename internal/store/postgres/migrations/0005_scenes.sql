-- 0005: scene contracts of the digital twin (same table and columns as
-- SQLite's 0005). A frozen row never changes, enforced by a trigger too.
-- rowid stands in for SQLite's implicit rowid, which the Go code orders by
-- (ORDER BY created_at DESC, rowid DESC) and PostgreSQL does not have;
-- TestSchemaParity ignores PostgreSQL columns named rowid.
CREATE TABLE scenes (
    scene_id      text NOT NULL,
    version       text NOT NULL,
    line_id       text NOT NULL,
    status        text NOT NULL CHECK (status IN ('draft', 'frozen')),
    hash          text NOT NULL CHECK (length(hash) = 64),
    contract_json text NOT NULL,
    frozen_by     text NOT NULL DEFAULT '',
    frozen_at     bigint,
    created_at    bigint NOT NULL,
    rowid         bigint GENERATED ALWAYS AS IDENTITY,
    PRIMARY KEY (scene_id, version)
);
CREATE INDEX scenes_line ON scenes(line_id, scene_id);
CREATE INDEX scenes_latest ON scenes(scene_id, created_at);

CREATE FUNCTION scenes_frozen_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.status = 'frozen' THEN
        RAISE EXCEPTION 'scenes: a frozen scene cannot change' USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF TG_OP = 'DELETE' THEN
        RETURN OLD;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER scenes_frozen_no_change BEFORE UPDATE OR DELETE ON scenes
    FOR EACH ROW EXECUTE FUNCTION scenes_frozen_refuse();

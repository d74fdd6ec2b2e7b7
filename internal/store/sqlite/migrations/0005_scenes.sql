-- 0005: scene contracts of the digital twin (package internal/twin/contract).
-- One row per scene id and version. A draft may be replaced; a frozen row
-- never changes (the store refuses with AML_SCENE_FROZEN). hash is the
-- contract's content hash (SceneContract.Hash, lifecycle fields excluded);
-- freezing is a compare-and-set on it. contract_json is canonical JSON.
CREATE TABLE scenes (
    scene_id      TEXT NOT NULL,
    version       TEXT NOT NULL,
    line_id       TEXT NOT NULL,
    status        TEXT NOT NULL CHECK (status IN ('draft', 'frozen')),
    hash          TEXT NOT NULL CHECK (length(hash) = 64),
    contract_json TEXT NOT NULL,
    frozen_by     TEXT NOT NULL DEFAULT '',
    frozen_at     INTEGER,                       -- epoch milliseconds, NULL while draft
    created_at    INTEGER NOT NULL,              -- epoch milliseconds (contract createdAt)
    PRIMARY KEY (scene_id, version)
);
CREATE INDEX scenes_line ON scenes(line_id, scene_id);
CREATE INDEX scenes_latest ON scenes(scene_id, created_at);

-- A frozen scene is immutable at the SQL level too.
CREATE TRIGGER scenes_frozen_no_update BEFORE UPDATE ON scenes
WHEN OLD.status = 'frozen'
BEGIN
    SELECT RAISE(ABORT, 'scenes: a frozen scene cannot change');
END;
CREATE TRIGGER scenes_frozen_no_delete BEFORE DELETE ON scenes
WHEN OLD.status = 'frozen'
BEGIN
    SELECT RAISE(ABORT, 'scenes: a frozen scene cannot be deleted');
END;

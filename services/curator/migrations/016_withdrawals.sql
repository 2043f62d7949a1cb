-- Withdrawals: an object, or one version of it, taken out of the archive
-- at an operator's request. Its inventory rows stay as a tombstone (when,
-- why); its files no other version holds are deleted from the store and
-- announced (archive.object.deleted).
ALTER TABLE curator.inventory_objects ADD COLUMN withdrawn_at timestamptz;
ALTER TABLE curator.inventory_objects ADD COLUMN withdrawn_reason text NOT NULL DEFAULT '';
ALTER TABLE curator.inventory_versions ADD COLUMN withdrawn_at timestamptz;
ALTER TABLE curator.inventory_versions ADD COLUMN withdrawn_reason text NOT NULL DEFAULT '';
CREATE TABLE curator.withdrawals (
    id      bigserial PRIMARY KEY,
    ark     text        NOT NULL,
    version integer     NOT NULL, -- 0: every version
    reason  text        NOT NULL,
    by_whom text        NOT NULL,
    at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX inventory_files_key ON curator.inventory_files (key);

---- create above / drop below ----

DROP INDEX curator.inventory_files_key;
DROP TABLE curator.withdrawals;
ALTER TABLE curator.inventory_versions DROP COLUMN withdrawn_reason;
ALTER TABLE curator.inventory_versions DROP COLUMN withdrawn_at;
ALTER TABLE curator.inventory_objects DROP COLUMN withdrawn_reason;
ALTER TABLE curator.inventory_objects DROP COLUMN withdrawn_at;

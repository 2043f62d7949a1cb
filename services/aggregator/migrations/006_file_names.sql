-- contract: (#33) a build before this migration inserts outputs without a
-- name and fails here: roll back across it by restoring the database.
-- The name an archive file's CDX lines carry (its key's last part), which
-- a Wayback resolves to its location through the path index: two files
-- may not share one (#33).
ALTER TABLE aggregator.outputs ADD COLUMN name text;
UPDATE aggregator.outputs SET name = regexp_replace(file, '^.*/', '');
ALTER TABLE aggregator.outputs ALTER COLUMN name SET NOT NULL;
CREATE INDEX outputs_name ON aggregator.outputs (name, file);

---- create above / drop below ----

ALTER TABLE aggregator.outputs DROP COLUMN name;

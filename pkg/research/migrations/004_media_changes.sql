-- A work whose media changes (another object, or other bytes) is researched
-- again: its results and pairs are deleted, and a result computed by a
-- lease made before the change is refused as stale.
ALTER TABLE research.episodes ADD COLUMN media_changed_at timestamptz NOT NULL DEFAULT '-infinity';
ALTER TABLE research.clips ADD COLUMN media_changed_at timestamptz NOT NULL DEFAULT '-infinity';

---- create above / drop below ----

ALTER TABLE research.clips DROP COLUMN media_changed_at;
ALTER TABLE research.episodes DROP COLUMN media_changed_at;

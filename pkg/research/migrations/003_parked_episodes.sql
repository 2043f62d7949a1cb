-- An episode whose own audio cannot be researched (missing, undecodable,
-- beyond a bound) is parked with the reason: not selected for leasing until
-- its media changes or an operator releases it.
ALTER TABLE research.episodes ADD COLUMN parked_reason text, ADD COLUMN parked_at timestamptz;
DROP INDEX research.episodes_selection;
CREATE INDEX episodes_selection ON research.episodes (priority DESC, initial_curated_at DESC, id)
    WHERE active AND open_clips > 0 AND parked_reason IS NULL;

---- create above / drop below ----

DROP INDEX research.episodes_selection;
CREATE INDEX episodes_selection ON research.episodes (priority DESC, initial_curated_at DESC, id)
    WHERE active AND open_clips > 0;
ALTER TABLE research.episodes DROP COLUMN parked_reason, DROP COLUMN parked_at;

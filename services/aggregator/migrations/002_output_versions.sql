-- An output's version is the send time of the announcement that named it
-- (SYSTEM-MAP decision 3): an older announcement arriving late (a
-- redelivery after a re-index) no longer replaces a newer output.
ALTER TABLE aggregator.outputs ADD COLUMN version timestamptz NOT NULL DEFAULT '-infinity';

---- create above / drop below ----

ALTER TABLE aggregator.outputs DROP COLUMN version;

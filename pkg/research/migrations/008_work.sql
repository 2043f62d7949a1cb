-- The work kit (pkg/work) lists episodes as items: an episode's state is
-- a function of its own columns (inactive, parked, retrying, open, done:
-- no clip left open), stored as a generated column, and state_at is when
-- it entered it (kept by a trigger), so that a page is a range of an
-- index at any size. The failure text is searched by words.
CREATE FUNCTION research.episode_state(active boolean, parked_reason text, failures integer, open_clips integer) RETURNS text
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN CASE WHEN NOT active THEN 'inactive'
                WHEN parked_reason IS NOT NULL THEN 'parked'
                WHEN failures > 0 THEN 'retrying'
                WHEN open_clips > 0 THEN 'open'
                ELSE 'done' END;

ALTER TABLE research.episodes
    ADD COLUMN work_state text GENERATED ALWAYS AS (research.episode_state(active, parked_reason, failures, open_clips)) STORED,
    ADD COLUMN state_at timestamptz NOT NULL DEFAULT now();
UPDATE research.episodes SET state_at = coalesce(parked_at, first_failed_at, initial_curated_at);

CREATE FUNCTION research.episode_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF research.episode_state(NEW.active, NEW.parked_reason, NEW.failures, NEW.open_clips)
       IS DISTINCT FROM research.episode_state(OLD.active, OLD.parked_reason, OLD.failures, OLD.open_clips) THEN
        NEW.state_at := now();
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER episodes_moved BEFORE UPDATE ON research.episodes
    FOR EACH ROW EXECUTE FUNCTION research.episode_moved();

CREATE INDEX episodes_moved ON research.episodes (state_at, key);
CREATE INDEX episodes_state_moved ON research.episodes (work_state, state_at, key);
CREATE INDEX episodes_error_words ON research.episodes USING gin (to_tsvector('simple', coalesce(parked_reason, '') || ' ' || last_error));

---- create above / drop below ----

DROP INDEX research.episodes_error_words;
DROP INDEX research.episodes_state_moved;
DROP INDEX research.episodes_moved;
DROP TRIGGER episodes_moved ON research.episodes;
DROP FUNCTION research.episode_moved();
ALTER TABLE research.episodes DROP COLUMN state_at, DROP COLUMN work_state;
DROP FUNCTION research.episode_state(boolean, text, integer, integer);

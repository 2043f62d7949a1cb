-- The failure model (pkg/fault) for research.
--
-- An episode counts its leases (attempts, counted when handed out) and its
-- failures (a lease that expired: its researcher crashed, hung or lost the
-- item; an episode failure that may pass, such as its media not yet in the
-- store); a failed episode is not leased again before next_attempt_at, and
-- is parked once its budget is spent. parked_missing marks an episode
-- parked because its media never arrived: it is released when it does.
ALTER TABLE research.episodes
    ADD COLUMN leases          integer     NOT NULL DEFAULT 0,
    ADD COLUMN failures        integer     NOT NULL DEFAULT 0,
    ADD COLUMN first_failed_at timestamptz,
    ADD COLUMN next_attempt_at timestamptz NOT NULL DEFAULT '-infinity',
    ADD COLUMN last_error      text        NOT NULL DEFAULT '',
    ADD COLUMN parked_missing  boolean     NOT NULL DEFAULT false;

-- A pair whose clip failed for a cause that may pass waits ('waiting'):
-- until retry_at it is not open; once due (retry_at NULL) it is open again
-- and keeps its failures. missing marks a failure (or a parked pair) whose
-- clip's media was not in the store: it is retried when the media arrives.
ALTER TABLE research.pairs
    ADD COLUMN failures        integer     NOT NULL DEFAULT 0,
    ADD COLUMN first_failed_at timestamptz,
    ADD COLUMN retry_at        timestamptz,
    ADD COLUMN last_error      text        NOT NULL DEFAULT '',
    ADD COLUMN missing         boolean     NOT NULL DEFAULT false;
ALTER TABLE research.pairs DROP CONSTRAINT pairs_state_check;
ALTER TABLE research.pairs ADD CONSTRAINT pairs_state_check CHECK (state IN ('leased', 'researched', 'failed', 'waiting'));

-- A lease a live researcher said it was working on (held_at): if it expires
-- its researcher failed; one whose item nobody took just ran out of time.
ALTER TABLE research.leases ADD COLUMN held_at timestamptz;
CREATE INDEX pairs_waiting ON research.pairs (retry_at) WHERE state = 'waiting' AND retry_at IS NOT NULL;
CREATE INDEX pairs_missing ON research.pairs (clip_id) WHERE missing;
CREATE INDEX episodes_media ON research.episodes (media_key);
CREATE INDEX episodes_retrying ON research.episodes (next_attempt_at) WHERE failures > 0;
CREATE INDEX clips_media ON research.clips (media_key);

---- create above / drop below ----

ALTER TABLE research.leases DROP COLUMN held_at;
DROP INDEX research.clips_media;
DROP INDEX research.episodes_retrying;
DROP INDEX research.episodes_media;
DROP INDEX research.pairs_missing;
DROP INDEX research.pairs_waiting;
DELETE FROM research.pairs WHERE state = 'waiting';
ALTER TABLE research.pairs DROP CONSTRAINT pairs_state_check;
ALTER TABLE research.pairs ADD CONSTRAINT pairs_state_check CHECK (state IN ('leased', 'researched', 'failed'));
ALTER TABLE research.pairs DROP COLUMN failures, DROP COLUMN first_failed_at, DROP COLUMN retry_at, DROP COLUMN last_error, DROP COLUMN missing;
ALTER TABLE research.episodes DROP COLUMN leases, DROP COLUMN failures, DROP COLUMN first_failed_at, DROP COLUMN next_attempt_at,
    DROP COLUMN last_error, DROP COLUMN parked_missing;

-- Every claim of a batch or job counts an attempt at its current state, so
-- that a worker that crashes or hangs on it counts too; a failed attempt
-- waits (next_attempt_at) before the next, backing off. Both reset when the
-- entity moves on. After INGEST_MAX_ATTEMPTS the entity is failed with the
-- reason, in the states where the transition table lets the daemon fail it.
ALTER TABLE curator.batches ADD COLUMN attempts integer NOT NULL DEFAULT 0,
                            ADD COLUMN next_attempt_at timestamptz NOT NULL DEFAULT '-infinity',
                            ADD COLUMN last_attempt_error text NOT NULL DEFAULT '';
ALTER TABLE curator.jobs ADD COLUMN attempts integer NOT NULL DEFAULT 0,
                         ADD COLUMN next_attempt_at timestamptz NOT NULL DEFAULT '-infinity',
                         ADD COLUMN last_attempt_error text NOT NULL DEFAULT '';

---- create above / drop below ----

ALTER TABLE curator.jobs DROP COLUMN attempts, DROP COLUMN next_attempt_at, DROP COLUMN last_attempt_error;
ALTER TABLE curator.batches DROP COLUMN attempts, DROP COLUMN next_attempt_at, DROP COLUMN last_attempt_error;

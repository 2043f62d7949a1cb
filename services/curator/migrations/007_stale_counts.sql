-- Stale curation updates (an event older than the stored record, skipped),
-- counted by kind across every curator replica, with the last one seen:
-- an operator sees a source resending old versions.
CREATE TABLE curator.stale_updates (
    kind     text        PRIMARY KEY,
    n        bigint      NOT NULL,
    last_key text        NOT NULL,
    last_at  timestamptz NOT NULL
);

---- create above / drop below ----

DROP TABLE curator.stale_updates;

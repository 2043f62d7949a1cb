-- Episodes and clips as curating systems last described them. version is the
-- sent_at of the event that wrote the row: a newer event wins, an equal one
-- is an idempotent replay, an older one is skipped.
CREATE TABLE curator.episodes (
    id                 text PRIMARY KEY,
    title              text        NOT NULL,
    media_key          text        NOT NULL,
    media_sha256       text        NOT NULL DEFAULT '',
    duration_ms        bigint      NOT NULL,
    priority           integer     NOT NULL,
    initial_curated_at timestamptz NOT NULL,
    latest_curated_at  timestamptz NOT NULL,
    version            timestamptz NOT NULL,
    event_id           text        NOT NULL,
    producer           text        NOT NULL,
    updated_at         timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE curator.clips (LIKE curator.episodes INCLUDING ALL);

---- create above / drop below ----

DROP TABLE curator.clips;
DROP TABLE curator.episodes;

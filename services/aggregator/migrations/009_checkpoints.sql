-- How far the aggregator's consumer of announcements has acknowledged
-- INDEX_READY, written by the leader every few seconds: a database
-- restored from a backup takes the announcements since again (package
-- checkpoint).
CREATE TABLE aggregator.checkpoints (
    consumer   text PRIMARY KEY,
    stream_seq bigint NOT NULL CHECK (stream_seq >= 0),
    at         timestamptz NOT NULL DEFAULT now()
);

---- create above / drop below ----

DROP TABLE aggregator.checkpoints;

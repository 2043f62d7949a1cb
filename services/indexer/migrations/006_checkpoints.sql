-- How far the indexer's consumer of recorded archive files has
-- acknowledged the ARCHIVE stream, written by the leader every few
-- seconds: a database restored from a backup takes the files recorded
-- since again (package checkpoint).
CREATE TABLE indexer.checkpoints (
    consumer   text PRIMARY KEY,
    stream_seq bigint NOT NULL CHECK (stream_seq >= 0),
    at         timestamptz NOT NULL DEFAULT now()
);

---- create above / drop below ----

DROP TABLE indexer.checkpoints;

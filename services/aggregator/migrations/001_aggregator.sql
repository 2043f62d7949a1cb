-- The aggregator's state: the current CDX output of every archive file, and
-- the generations of the merged index (a large main level and a small
-- recent one) that queries read.
CREATE TABLE aggregator.outputs (
    file        text PRIMARY KEY,
    output      text        NOT NULL,   -- blob key of the file's sorted CDX
    lines       bigint      NOT NULL,
    received_at timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE aggregator.generations (
    level    text PRIMARY KEY CHECK (level IN ('main', 'recent')),
    key      text        NOT NULL,      -- blob key of the merged file ('' when empty)
    lines    bigint      NOT NULL,
    bytes    bigint      NOT NULL,
    sources  integer     NOT NULL,
    built_at timestamptz NOT NULL       -- outputs received before this are in it
);
INSERT INTO aggregator.generations VALUES ('main', '', 0, 0, 0, 'epoch'), ('recent', '', 0, 0, 0, 'epoch');

---- create above / drop below ----

DROP TABLE aggregator.generations;
DROP TABLE aggregator.outputs;

-- Operators' corrections of the matcher (services/curator/matcher,
-- Decide): every decision, kept (who, why, when), and the ones in force.
-- A merge joins two records' graphs whatever their links say; a split
-- takes a record out of its graph (no record's link to or from it
-- counts). A split drops the merges the record is in; a merge taken after
-- a split counts.
CREATE TABLE curator.curation_decisions (
    id     bigserial   PRIMARY KEY,
    kind   text        NOT NULL CHECK (kind IN ('episode', 'clip')),
    action text        NOT NULL CHECK (action IN ('merge', 'unmerge', 'split', 'unsplit')),
    a      text        NOT NULL,
    b      text        NOT NULL DEFAULT '',
    by     text        NOT NULL,
    reason text        NOT NULL,
    at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX curation_decisions_a ON curator.curation_decisions (kind, a);
CREATE INDEX curation_decisions_b ON curator.curation_decisions (kind, b) WHERE b <> '';

-- The merges in force, each pair once (a < b).
CREATE TABLE curator.operator_merges (
    kind     text   NOT NULL,
    a        text   NOT NULL,
    b        text   NOT NULL,
    decision bigint NOT NULL REFERENCES curator.curation_decisions (id),
    PRIMARY KEY (kind, a, b),
    CHECK (a < b)
);
CREATE INDEX operator_merges_b ON curator.operator_merges (kind, b);

-- The splits in force.
CREATE TABLE curator.operator_splits (
    kind     text   NOT NULL,
    key      text   NOT NULL,
    decision bigint NOT NULL REFERENCES curator.curation_decisions (id),
    PRIMARY KEY (kind, key)
);

---- create above / drop below ----

DROP TABLE curator.operator_splits;
DROP TABLE curator.operator_merges;
DROP TABLE curator.curation_decisions;

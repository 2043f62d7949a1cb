-- Every work the merger wrote, with its explanation (services/curator/merger,
-- Explanation): each field with the record, version and rule that supplied
-- it, the members in precedence order, the graph's links and refused links.
-- A key's work at a time is the newest row listing it written by then.
CREATE TABLE curator.work_history (
    kind        text        NOT NULL,
    key         text        NOT NULL,
    version     timestamptz NOT NULL,
    written_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    members     text[]      NOT NULL,
    explanation jsonb       NOT NULL,
    PRIMARY KEY (kind, key, version)
);
CREATE INDEX work_history_members ON curator.work_history USING gin (members);

---- create above / drop below ----

DROP TABLE curator.work_history;

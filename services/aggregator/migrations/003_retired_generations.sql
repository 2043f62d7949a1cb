-- Generations replaced by a newer build: their objects are deleted once
-- AGGREGATOR_RETIRE_AFTER has passed (queries that started on them finish).
CREATE TABLE aggregator.retired (
    key        text PRIMARY KEY,
    retired_at timestamptz NOT NULL DEFAULT now()
);

---- create above / drop below ----

DROP TABLE aggregator.retired;

-- The repository scan resumes where it stopped: one page of keys a tick,
-- after the last key it registered, from the start again once a listing
-- ends (a cycle). It runs in one replica (the leader), so the store is
-- listed once, a page at a time, however many indexers run.
CREATE TABLE indexer.scan_cursor (
    id               integer PRIMARY KEY CHECK (id = 1),
    after            text        NOT NULL DEFAULT '',
    cycle_started_at timestamptz NOT NULL DEFAULT now()
);
INSERT INTO indexer.scan_cursor (id) VALUES (1);

---- create above / drop below ----

DROP TABLE indexer.scan_cursor;

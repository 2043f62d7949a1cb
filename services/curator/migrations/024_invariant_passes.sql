-- The last finished pass of the curation invariant's check, per kind
-- (services/curator/completeness): written by the curator's leader at a
-- pass's end, read by the curation status (and so the dashboard) from any
-- replica.
CREATE TABLE curator.invariant_passes (
    kind       text        PRIMARY KEY CHECK (kind IN ('episode', 'clip')),
    ended_at   timestamptz NOT NULL,
    violations integer     NOT NULL,
    unhealed   integer     NOT NULL,
    -- {"source": {"records": N, "placed": N, "refused": N}, ...}
    sources    jsonb       NOT NULL
);

---- create above / drop below ----

DROP TABLE curator.invariant_passes;

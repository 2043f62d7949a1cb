-- The second copy, written (#49): a deletion's tombstone, which a copy
-- delivered late honours, so that a withdrawn object is never written back
-- into the second copy.
CREATE TABLE auditor.replica_tombstones (
    object     text PRIMARY KEY,
    deleted_at timestamptz NOT NULL
);

---- create above / drop below ----

DROP TABLE auditor.replica_tombstones;

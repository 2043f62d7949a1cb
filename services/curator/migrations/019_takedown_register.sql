-- A takedown sticks across a restore of the database (#47). Every
-- withdrawn version is also written to a register in the blob store
-- (takedowns/...), outside the database; the leader replays it, a page at a
-- time, re-applying what a restored database does not know of.
CREATE TABLE curator.takedown_replay (
    id     boolean PRIMARY KEY DEFAULT true CHECK (id),
    after  text        NOT NULL DEFAULT '',  -- the last register key read
    passes bigint      NOT NULL DEFAULT 0
);
INSERT INTO curator.takedown_replay DEFAULT VALUES;

-- Register entries of versions the database never knew (made after its
-- backup), already re-applied: their deletions announced again.
CREATE TABLE curator.takedowns_replayed (
    key text PRIMARY KEY,
    at  timestamptz NOT NULL DEFAULT now()
);

---- create above / drop below ----

DROP TABLE curator.takedowns_replayed;
DROP TABLE curator.takedown_replay;

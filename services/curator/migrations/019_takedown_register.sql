-- A takedown sticks across a restore of the database (#47). Every
-- withdrawn version (and every reinstatement) is also written to a register
-- in the blob store (takedowns/...), outside the database; the leader
-- replays it, a page at a time, applying again every entry the database
-- does not list as applied: a restored database lists none made after its
-- backup, and a replay cut short lists none it did not finish.
--
-- The store keeps the number of passes ended too (takedowns/epoch.json): a
-- database that has ended fewer was restored, and its next pass applies
-- every entry again, for what other services lost with it (an index that
-- took a deletion after the backup).
CREATE TABLE curator.takedown_replay (
    id     boolean PRIMARY KEY DEFAULT true CHECK (id),
    after  text    NOT NULL DEFAULT '',    -- the last register key read this pass
    passes bigint  NOT NULL DEFAULT 0,     -- passes ended
    full_pass boolean NOT NULL DEFAULT false -- this pass applies every entry again
);
INSERT INTO curator.takedown_replay DEFAULT VALUES;

-- The register's entries this database made (in the withdrawal's
-- transaction) or applied again (once finished), each with the store's
-- checksum of the entry as the database last knew it: an entry written
-- again since (a later withdrawal of the object, after a reinstatement)
-- differs, and is applied again, even where the database listed the key
-- before its backup.
CREATE TABLE curator.takedowns_applied (
    key      text PRIMARY KEY,
    checksum text NOT NULL DEFAULT '',
    at       timestamptz NOT NULL DEFAULT now()
);

---- create above / drop below ----

DROP TABLE curator.takedowns_applied;
DROP TABLE curator.takedown_replay;

-- A takedown sticks across a restore of the database (#47). Every
-- withdrawn version (and every reinstatement) is also written to a register
-- in the blob store (takedowns/...), outside the database; the leader
-- replays it, a page at a time. Every takedown newer than the last pass
-- that ended whole (last_at) is applied again, or finished again, once: a
-- restored database's last_at is as old as its backup, so what the restore
-- lost is re-applied, and a replay cut short is done again.
CREATE TABLE curator.takedown_replay (
    id          boolean PRIMARY KEY DEFAULT true CHECK (id),
    after       text        NOT NULL DEFAULT '',    -- the last register key read this pass
    pass_max_at timestamptz,                        -- the newest takedown read this pass
    pass_failed boolean     NOT NULL DEFAULT false, -- an entry could not be applied this pass
    last_at     timestamptz,                        -- every takedown up to it applied (NULL: none yet)
    passes      bigint      NOT NULL DEFAULT 0
);
INSERT INTO curator.takedown_replay DEFAULT VALUES;

---- create above / drop below ----

DROP TABLE curator.takedown_replay;

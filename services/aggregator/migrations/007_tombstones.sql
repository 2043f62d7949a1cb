-- A takedown sticks whatever the order of events (#47): every archive file
-- withdrawn from the index (an operator's withdrawal, or its deletion from
-- the archive) keeps a tombstone, whether or not the index held it yet,
-- and an announcement of its output is refused. Only an operator's
-- reinstatement removes it.
CREATE TABLE aggregator.tombstones (
    file   text PRIMARY KEY,
    reason text        NOT NULL,
    at     timestamptz NOT NULL DEFAULT now()
);
INSERT INTO aggregator.tombstones (file, reason, at)
SELECT file, 'withdrawn before tombstones were kept', received_at FROM aggregator.outputs WHERE withdrawn;

---- create above / drop below ----

DROP TABLE aggregator.tombstones;

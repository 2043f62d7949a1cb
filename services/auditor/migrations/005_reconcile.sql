-- Reconciliation of the blob store's objects against the schedule: a sweep
-- that resumes after the last key it compared, a page at a time, so that
-- an object whose archive.object.recorded was lost is still audited, and a
-- scheduled object that is gone is checked (or, deleted, unscheduled).
CREATE TABLE auditor.reconcile (
    id              boolean     PRIMARY KEY DEFAULT true CHECK (id),
    after           text        NOT NULL DEFAULT '',  -- the last key compared ('': a pass begins)
    pass_started_at timestamptz NOT NULL DEFAULT now(),
    passes          bigint      NOT NULL DEFAULT 0
);
INSERT INTO auditor.reconcile DEFAULT VALUES;

-- The schedule in the blob store's (byte) order, for the sweep's ranges.
CREATE INDEX schedule_object_bytes ON auditor.schedule (object COLLATE "C");

---- create above / drop below ----

DROP INDEX auditor.schedule_object_bytes;
DROP TABLE auditor.reconcile;

-- Claims fenced by an epoch: each claim of a batch or job counts one up, and
-- its holder checks the count before every side effect (a download renamed
-- into place, a store, a record, a callback) and in the move itself. A
-- worker whose advisory lock went with its connection (a PostgreSQL
-- failover) while it worked finds the count moved on and stops, instead of
-- working the job beside its new holder.
ALTER TABLE curator.batches ADD COLUMN claim_epoch bigint NOT NULL DEFAULT 0;
ALTER TABLE curator.jobs ADD COLUMN claim_epoch bigint NOT NULL DEFAULT 0;

---- create above / drop below ----

ALTER TABLE curator.jobs DROP COLUMN claim_epoch;
ALTER TABLE curator.batches DROP COLUMN claim_epoch;

-- A depositor may name a submission with an Idempotency-Key: a retry of a
-- POST whose answer was lost (a restart, a timeout) finds the batch the
-- first one made instead of making a second batch of the same files.
ALTER TABLE curator.batches ADD COLUMN idempotency_key text;
CREATE UNIQUE INDEX batches_idempotency ON curator.batches (submitter, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

---- create above / drop below ----

DROP INDEX curator.batches_idempotency;
ALTER TABLE curator.batches DROP COLUMN idempotency_key;

-- The failure model (pkg/fault): a failed file waits for its next attempt
-- (backing off), and its budget is counted from its first failure.
ALTER TABLE indexer.files
    ADD COLUMN next_attempt_at timestamptz NOT NULL DEFAULT '-infinity',
    ADD COLUMN first_failed_at timestamptz;
DROP INDEX indexer.files_due;
CREATE INDEX files_due ON indexer.files (failures, discovered_at DESC) WHERE status IN ('new', 'failed');

---- create above / drop below ----

ALTER TABLE indexer.files DROP COLUMN next_attempt_at, DROP COLUMN first_failed_at;

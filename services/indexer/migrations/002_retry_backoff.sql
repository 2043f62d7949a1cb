-- The failure model (pkg/fault): a failed file waits for its next attempt
-- (backing off), and its budget is counted from its first failure.
ALTER TABLE indexer.files
    ADD COLUMN next_attempt_at timestamptz NOT NULL DEFAULT '-infinity',
    ADD COLUMN first_failed_at timestamptz;
-- What to hand out next: new files, newest first; then failed files whose
-- wait is over (fewest failures first); then tasks lost in the queue.
-- Apart, so that files backing off are never scanned over.
DROP INDEX indexer.files_due;
CREATE INDEX files_new ON indexer.files (discovered_at DESC) WHERE status = 'new';
CREATE INDEX files_failed_due ON indexer.files (next_attempt_at) WHERE status = 'failed';
CREATE INDEX files_queued ON indexer.files (status_at) WHERE status IN ('queued', 'indexing');

---- create above / drop below ----

DROP INDEX indexer.files_queued;
DROP INDEX indexer.files_failed_due;
DROP INDEX indexer.files_new;
CREATE INDEX files_due ON indexer.files (failures, discovered_at DESC) WHERE status IN ('new', 'failed');
ALTER TABLE indexer.files DROP COLUMN next_attempt_at, DROP COLUMN first_failed_at;

-- The failure model (pkg/fault) for the audit queue: an entry that fails
-- backs off alone (the queue goes on with the others) and parks, with its
-- reason, once it has kept failing past its budget.
ALTER TABLE auditor.audit_queue
    ADD COLUMN failures        integer     NOT NULL DEFAULT 0,
    ADD COLUMN first_failed_at timestamptz,
    ADD COLUMN next_attempt_at timestamptz NOT NULL DEFAULT '-infinity',
    ADD COLUMN last_error      text        NOT NULL DEFAULT '',
    ADD COLUMN parked_at       timestamptz;

---- create above / drop below ----

ALTER TABLE auditor.audit_queue DROP COLUMN failures, DROP COLUMN first_failed_at, DROP COLUMN next_attempt_at,
    DROP COLUMN last_error, DROP COLUMN parked_at;

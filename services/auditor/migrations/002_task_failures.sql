-- A task's failures, apart from its deliveries (a "retry later" is a
-- delivery, not a failure), by task message id; forgotten when the task
-- succeeds, and after a week.
CREATE TABLE auditor.task_failures (
    task       text PRIMARY KEY,
    object     text        NOT NULL,
    failures   integer     NOT NULL,
    last_error text        NOT NULL,
    at         timestamptz NOT NULL DEFAULT now()
);

-- An object whose check failed three times is parked: the schedule does not
-- requeue it (it is checked again next cycle, or on demand), and the status
-- and `archivist audit parked` show it with its reason.
ALTER TABLE auditor.schedule ADD COLUMN parked_at timestamptz,
                             ADD COLUMN parked_reason text;

---- create above / drop below ----

ALTER TABLE auditor.schedule DROP COLUMN parked_at, DROP COLUMN parked_reason;
DROP TABLE auditor.task_failures;

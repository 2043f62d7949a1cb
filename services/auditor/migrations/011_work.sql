-- The work kit (pkg/work) lists the audit queue's requests, the internal
-- repairs and the parked checks as items: each one's state and when it entered it are
-- functions of its own columns, stored as generated columns so that a page
-- is a range of an index at any size; their errors are searched by words.
ALTER TABLE auditor.audit_queue
    ADD COLUMN work_state text GENERATED ALWAYS AS (
        CASE WHEN done THEN 'done' WHEN parked_at IS NOT NULL THEN 'parked' WHEN failures > 0 THEN 'retrying' ELSE 'queued' END) STORED,
    ADD COLUMN state_at timestamptz GENERATED ALWAYS AS (coalesce(done_at, parked_at, first_failed_at, created_at)) STORED;
CREATE INDEX audit_queue_moved ON auditor.audit_queue (state_at, id);
CREATE INDEX audit_queue_state_moved ON auditor.audit_queue (work_state, state_at, id);
CREATE INDEX audit_queue_object ON auditor.audit_queue (object);
CREATE INDEX audit_queue_created ON auditor.audit_queue (created_at);
CREATE INDEX audit_queue_error_words ON auditor.audit_queue USING gin (to_tsvector('simple', last_error));

ALTER TABLE auditor.resolution_tasks
    ADD COLUMN work_state text GENERATED ALWAYS AS (
        CASE WHEN state = 'closed' THEN 'closed' WHEN repair_parked_at IS NOT NULL THEN 'parked'
             WHEN repair_failures > 0 THEN 'retrying' ELSE 'open' END) STORED,
    ADD COLUMN state_at timestamptz GENERATED ALWAYS AS (coalesce(repair_parked_at, repair_first_failed_at, created_at)) STORED;
CREATE INDEX resolution_tasks_moved ON auditor.resolution_tasks (state_at, id) WHERE kind = 'internal';
CREATE INDEX resolution_tasks_state_moved ON auditor.resolution_tasks (work_state, state_at, id) WHERE kind = 'internal';
CREATE INDEX resolution_tasks_object ON auditor.resolution_tasks (object);
CREATE INDEX resolution_tasks_created ON auditor.resolution_tasks (created_at) WHERE kind = 'internal';
CREATE INDEX resolution_tasks_error_words ON auditor.resolution_tasks USING gin (to_tsvector('simple', reason || ' ' || repair_error));

-- Objects whose checks kept failing are parked in the schedule.
CREATE INDEX schedule_parked ON auditor.schedule (parked_at, object) WHERE parked_at IS NOT NULL;

---- create above / drop below ----

DROP INDEX auditor.schedule_parked;
DROP INDEX auditor.resolution_tasks_error_words;
DROP INDEX auditor.resolution_tasks_created;
DROP INDEX auditor.resolution_tasks_object;
DROP INDEX auditor.resolution_tasks_state_moved;
DROP INDEX auditor.resolution_tasks_moved;
ALTER TABLE auditor.resolution_tasks DROP COLUMN state_at, DROP COLUMN work_state;
DROP INDEX auditor.audit_queue_error_words;
DROP INDEX auditor.audit_queue_created;
DROP INDEX auditor.audit_queue_object;
DROP INDEX auditor.audit_queue_state_moved;
DROP INDEX auditor.audit_queue_moved;
ALTER TABLE auditor.audit_queue DROP COLUMN state_at, DROP COLUMN work_state;

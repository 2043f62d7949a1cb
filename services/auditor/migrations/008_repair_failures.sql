-- A repair ends (#47): an automatic repair that fails is recorded on its
-- task under the failure model (failures, backoff, parked with its
-- reason), and the next repairs page past it instead of taking the same
-- lowest tasks every minute for ever.
ALTER TABLE auditor.resolution_tasks ADD COLUMN repair_failures integer NOT NULL DEFAULT 0;
ALTER TABLE auditor.resolution_tasks ADD COLUMN repair_first_failed_at timestamptz;
ALTER TABLE auditor.resolution_tasks ADD COLUMN repair_next_at timestamptz;
ALTER TABLE auditor.resolution_tasks ADD COLUMN repair_error text NOT NULL DEFAULT '';
ALTER TABLE auditor.resolution_tasks ADD COLUMN repair_parked_at timestamptz;
CREATE INDEX resolution_tasks_to_repair ON auditor.resolution_tasks (id)
    WHERE state = 'open' AND kind = 'internal' AND repair_parked_at IS NULL;

---- create above / drop below ----

DROP INDEX auditor.resolution_tasks_to_repair;
ALTER TABLE auditor.resolution_tasks DROP COLUMN repair_parked_at;
ALTER TABLE auditor.resolution_tasks DROP COLUMN repair_error;
ALTER TABLE auditor.resolution_tasks DROP COLUMN repair_next_at;
ALTER TABLE auditor.resolution_tasks DROP COLUMN repair_first_failed_at;
ALTER TABLE auditor.resolution_tasks DROP COLUMN repair_failures;

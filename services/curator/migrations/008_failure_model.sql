-- The failure model (pkg/fault) for ingest: a batch's or job's failed
-- attempts at a state are bounded in time as well as in number (a short
-- outage of an origin or the store never fails a job): first_failed_at is
-- when its attempts at the current state began to fail.
ALTER TABLE curator.batches ADD COLUMN first_failed_at timestamptz;
ALTER TABLE curator.jobs ADD COLUMN first_failed_at timestamptz;

---- create above / drop below ----

ALTER TABLE curator.jobs DROP COLUMN first_failed_at;
ALTER TABLE curator.batches DROP COLUMN first_failed_at;

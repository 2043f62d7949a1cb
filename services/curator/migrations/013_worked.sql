-- How long workers have worked on a batch or job, over every attempt and
-- state (waiting, backing off and outages not counted): a job that has
-- worked longer than INGEST_JOB_TIMEOUT is failed with the reason, so that
-- an origin trickling its bytes, attempt after attempt, cannot hold a
-- worker for ever.
ALTER TABLE curator.batches ADD COLUMN worked interval NOT NULL DEFAULT '0';
ALTER TABLE curator.jobs ADD COLUMN worked interval NOT NULL DEFAULT '0';

---- create above / drop below ----

ALTER TABLE curator.jobs DROP COLUMN worked;
ALTER TABLE curator.batches DROP COLUMN worked;

-- Automatic cleanup of completed batches past INGEST_RETENTION runs every
-- INGEST_TIDY_INTERVAL: it reads the oldest completed batches by when they
-- completed, without scanning every completed batch the archive holds.
CREATE INDEX batches_completed_at ON curator.batches (state_at) WHERE state = 'completed';

---- create above / drop below ----

DROP INDEX curator.batches_completed_at;

-- Explanations are kept for CURATOR_HISTORY_RETENTION, the newest of each
-- work for ever (services/curator/merger, PruneHistory): the pruning reads
-- the oldest rows first.
CREATE INDEX work_history_written ON curator.work_history (written_at);

---- create above / drop below ----

DROP INDEX curator.work_history_written;

-- The W3C trace id of the request that submitted a batch (empty where
-- tracing was off): an operator follows a batch, and its jobs, to its trace.
ALTER TABLE curator.batches ADD COLUMN trace_id text NOT NULL DEFAULT '';

---- create above / drop below ----

ALTER TABLE curator.batches DROP COLUMN trace_id;

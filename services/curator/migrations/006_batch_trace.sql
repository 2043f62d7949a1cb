-- The W3C traceparent of the request that submitted a batch (empty where
-- tracing was off): an operator follows a batch, and its jobs, to its trace.
ALTER TABLE curator.batches ADD COLUMN traceparent text NOT NULL DEFAULT '';

---- create above / drop below ----

ALTER TABLE curator.batches DROP COLUMN traceparent;

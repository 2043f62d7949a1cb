-- The W3C traceparent of the works message that last changed a work (empty
-- where tracing was off): an operator follows an episode to its trace.
ALTER TABLE research.episodes ADD COLUMN traceparent text NOT NULL DEFAULT '';
ALTER TABLE research.clips ADD COLUMN traceparent text NOT NULL DEFAULT '';

---- create above / drop below ----

ALTER TABLE research.clips DROP COLUMN traceparent;
ALTER TABLE research.episodes DROP COLUMN traceparent;

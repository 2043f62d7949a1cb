-- The W3C trace id of the works message that last changed a work (empty
-- where tracing was off): an operator follows an episode to its trace.
ALTER TABLE research.episodes ADD COLUMN trace_id text NOT NULL DEFAULT '';
ALTER TABLE research.clips ADD COLUMN trace_id text NOT NULL DEFAULT '';

---- create above / drop below ----

ALTER TABLE research.clips DROP COLUMN trace_id;
ALTER TABLE research.episodes DROP COLUMN trace_id;

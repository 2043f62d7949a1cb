-- The work kit (pkg/work) finds batches and jobs by any field at archive
-- size: a page is a range of (state_at, id), or of (state, state_at, id)
-- for a state; a query matches an ARK, a local id or a payload URL exactly,
-- or words of the error through a full-text index.
CREATE INDEX jobs_moved ON curator.jobs (state_at, id);
CREATE INDEX jobs_state_moved ON curator.jobs (state, state_at, id);
CREATE INDEX jobs_profile_moved ON curator.jobs (profile, state_at, id);
CREATE INDEX jobs_ark ON curator.jobs USING hash (ark);
CREATE INDEX jobs_local_id ON curator.jobs USING hash (local_id);
CREATE INDEX jobs_payload_url ON curator.jobs USING hash (payload_url);
CREATE INDEX jobs_error_words ON curator.jobs USING gin (to_tsvector('simple', error || ' ' || last_attempt_error));
CREATE INDEX jobs_created ON curator.jobs (created_at);
CREATE INDEX batches_moved ON curator.batches (state_at, id);
CREATE INDEX batches_created ON curator.batches (created_at);
CREATE INDEX batches_state_moved ON curator.batches (state, state_at, id);
CREATE INDEX batches_payload_url ON curator.batches USING hash (payload_url);
CREATE INDEX batches_error_words ON curator.batches USING gin (to_tsvector('simple', error || ' ' || last_attempt_error));

---- create above / drop below ----

DROP INDEX curator.batches_error_words;
DROP INDEX curator.batches_payload_url;
DROP INDEX curator.batches_state_moved;
DROP INDEX curator.batches_created;
DROP INDEX curator.batches_moved;
DROP INDEX curator.jobs_created;
DROP INDEX curator.jobs_error_words;
DROP INDEX curator.jobs_payload_url;
DROP INDEX curator.jobs_local_id;
DROP INDEX curator.jobs_ark;
DROP INDEX curator.jobs_profile_moved;
DROP INDEX curator.jobs_state_moved;
DROP INDEX curator.jobs_moved;

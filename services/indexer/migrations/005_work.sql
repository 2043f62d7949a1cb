-- The work kit (pkg/work) finds archive files by any field at archive
-- size: a page is a range of (status_at, name), or of (status, status_at,
-- name) for a status; a query matches a name or an output key exactly, or
-- words of the last error.
CREATE INDEX files_moved ON indexer.files (status_at, name);
CREATE INDEX files_status_moved ON indexer.files (status, status_at, name);
CREATE INDEX files_discovered ON indexer.files (discovered_at);
CREATE INDEX files_output ON indexer.files USING hash (output);
CREATE INDEX files_error_words ON indexer.files USING gin (to_tsvector('simple', last_error));

---- create above / drop below ----

DROP INDEX indexer.files_error_words;
DROP INDEX indexer.files_output;
DROP INDEX indexer.files_discovered;
DROP INDEX indexer.files_status_moved;
DROP INDEX indexer.files_moved;

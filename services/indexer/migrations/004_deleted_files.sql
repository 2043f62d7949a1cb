-- An archive file deleted from the archive (an object withdrawn) is not
-- indexed (#47): the indexer takes archive.object.deleted, and a file its
-- task no longer finds in the store is recorded gone, not tried again 50
-- times. The repository scan finding the key in the store again makes it
-- new.
ALTER TABLE indexer.files DROP CONSTRAINT files_status_check;
ALTER TABLE indexer.files ADD CONSTRAINT files_status_check
    CHECK (status IN ('new', 'queued', 'indexing', 'indexed', 'failed', 'parked', 'deleted'));

---- create above / drop below ----

DELETE FROM indexer.files WHERE status = 'deleted';
ALTER TABLE indexer.files DROP CONSTRAINT files_status_check;
ALTER TABLE indexer.files ADD CONSTRAINT files_status_check
    CHECK (status IN ('new', 'queued', 'indexing', 'indexed', 'failed', 'parked'));

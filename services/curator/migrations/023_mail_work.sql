-- The work kit (pkg/work) lists the collections' mails as items: a mail's
-- state (queued, retrying, parked) and when it entered it are functions of
-- its own columns, stored as generated columns so that a page is a range
-- of an index; a parked mail can be sent again (resend) or dropped.
ALTER TABLE curator.mail_outbox
    ADD COLUMN work_state text GENERATED ALWAYS AS (
        CASE WHEN parked_at IS NOT NULL THEN 'parked' WHEN first_failed_at IS NOT NULL THEN 'retrying' ELSE 'queued' END) STORED,
    ADD COLUMN state_at timestamptz GENERATED ALWAYS AS (coalesce(parked_at, first_failed_at, created_at)) STORED;
CREATE INDEX mail_outbox_moved ON curator.mail_outbox (state_at, id);
CREATE INDEX mail_outbox_state_moved ON curator.mail_outbox (work_state, state_at, id);
CREATE INDEX mail_outbox_batch ON curator.mail_outbox (batch_id);
CREATE INDEX mail_outbox_error_words ON curator.mail_outbox USING gin (to_tsvector('simple', subject || ' ' || last_error));

---- create above / drop below ----

DROP INDEX curator.mail_outbox_error_words;
DROP INDEX curator.mail_outbox_batch;
DROP INDEX curator.mail_outbox_state_moved;
DROP INDEX curator.mail_outbox_moved;
ALTER TABLE curator.mail_outbox DROP COLUMN state_at, DROP COLUMN work_state;

-- What processing an audit queue entry did: 'captured' (the provider's
-- object written into the content index and the audit log, and checked
-- again) or 'gone' (no longer at the provider).
ALTER TABLE auditor.audit_queue ADD COLUMN outcome text,
                                ADD COLUMN done_at timestamptz;

---- create above / drop below ----

ALTER TABLE auditor.audit_queue DROP COLUMN outcome, DROP COLUMN done_at;

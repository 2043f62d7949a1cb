-- Objects stored without a checksum of the provider's own (on S3, before
-- Archivist asked S3 for one): a full check that finds such an object's
-- content as the archive recorded it asks the store to add one, and its
-- outcome is kept here, so that an operator sees which objects have none
-- (an S3 object beyond one copy's 5 GiB).
CREATE TABLE auditor.provider_checksums (
    object text        PRIMARY KEY,
    state  text        NOT NULL CHECK (state IN ('added', 'none', 'differs')),
    note   text        NOT NULL DEFAULT '',
    at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX provider_checksums_state ON auditor.provider_checksums (state) WHERE state <> 'added';

---- create above / drop below ----

DROP TABLE auditor.provider_checksums;

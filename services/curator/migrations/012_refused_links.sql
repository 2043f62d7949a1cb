-- Same-as links the matcher refused: a link that would make a work graph
-- larger than events.MaxGraphMembers records is not stored; it is kept
-- here with its reason (the record's latest state decides: a new version
-- of the record replaces its refusals), shown with the record and counted
-- in the curation status.
CREATE TABLE curator.match_refused (
    kind     text        NOT NULL,
    from_key text        NOT NULL,
    to_key   text        NOT NULL,
    reason   text        NOT NULL,
    at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, from_key, to_key)
);

---- create above / drop below ----

DROP TABLE curator.match_refused;
